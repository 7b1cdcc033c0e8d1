"""Per-stream incident assembly: which lines of which stream make one incident, and when it ends.

An incident opens at a trigger line (prefilter.py) and takes every following line of its
stream (frames, messages, other ranks' lines, torchrun's summary), so the classifier sees
what `classify` would see in that stream. It closes when

* torchrun's failure summary has ended (the `====` rule after "Root Cause"): "summary";
* `gap` lines of its stream went by without a trigger: "gap";
* `idle` seconds went by without a trigger in it (wall clock, also on a quiet pipe): "idle";
* the input ends: "end-of-input";
* memory would overflow: more than `max_open` incidents open, more than `max_held` bytes held
  by all open incidents together, or more than `max_streams` streams remembered; the one
  whose last trigger is oldest is closed and emitted, never dropped: "evicted" (counted in the
  summary). The limits are sized so that a fleet failing at once (thousands of pods, each
  incident well under `max_bytes`) is held whole: an incident is split only when memory
  really would overflow, and then its rest opens a new incident at its next trigger.

Memory is bounded: an incident keeps at most `max_lines` / `max_bytes` of its lines (the
head and the tail; the middle is counted and marked), a line at most `max_line`
characters, and a stream remembers one line per rule context check.
"""

from __future__ import annotations

import re
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Callable

from triage.logs.normalize import strip_prefixes
from triage.stream.limits import Limits  # noqa: F401 - re-exported: the assembler's limits
from triage.stream.prefilter import Hint, Prefilter
from triage.stream.records import Key, Record
from triage.logs.torchrun import _ROOT as TORCHRUN_ROOT

MAX_FILTERED = 32  # open streams the scanner tells by their literals; past this it decodes every line
CONTEXT_LINE = 1024  # characters kept of a remembered context line
# A traceback's frames and a long message's indented lines ("\tsize mismatch for ...") hold
# no trigger but belong to the incident: right after a trigger they do not count towards `gap`.
_CONTINUES = re.compile(r"[ \t]")


@dataclass
class Window:
    """One open incident of one stream."""

    key: Key
    first_no: int
    last_trigger: float  # monotonic time of its last trigger line
    context: list[str]  # the stream's remembered context lines from before it opened, oldest first
    limits: Limits
    last_no: int = 0
    first_time: object = None  # the records' own time values (records.time_text renders them)
    last_time: object = None
    head: list[str] = field(default_factory=list)
    tail: deque = field(default_factory=deque)
    lines: int = 0
    omitted: int = 0
    cut_lines: int = 0  # lines longer than max_line, kept shortened
    quiet: int = 0  # lines since the last trigger
    continuing: bool = False  # the last line was a trigger or continued one (indented)
    in_summary: bool = False  # inside torchrun's "Root Cause" box
    literal: bytes | None = None  # bytes every raw line of its stream holds (scan.py), if any
    done: bool = False
    closed_by: str = ""
    _head_bytes: int = 0
    _tail_bytes: int = 0

    def add(self, text: str, no: int, time: object, triggered: bool, now: float) -> None:
        if len(text) > self.limits.max_line:
            text = text[: self.limits.max_line] + f" [ds-triage: {len(text) - self.limits.max_line} characters cut]"
            self.cut_lines += 1
        self.lines += 1
        self.last_no = no
        if time is not None:
            self.first_time = time if self.first_time is None else self.first_time
            self.last_time = time
        if triggered:
            self.quiet = 0
            self.last_trigger = now
            self.continuing = True
        elif self.continuing and _CONTINUES.match(strip_prefixes(text)[0]):
            self.quiet = 0  # a frame's code, or an indented line of a long message: the incident goes on
        else:
            # Indented lines further on are not the incident's: a config dump printed by a
            # restart would otherwise keep it open for good.
            self.quiet += 1
            self.continuing = False
        self._keep(text)
        self._watch_summary(text)

    def _keep(self, text: str) -> None:
        half_lines, half_bytes = self.limits.max_lines // 2, self.limits.max_bytes // 2
        size = len(text) + 1
        if not self.tail and len(self.head) < half_lines and self._head_bytes + size <= half_bytes:
            self.head.append(text)
            self._head_bytes += size
            return
        self.tail.append(text)
        self._tail_bytes += size
        while self.tail and (len(self.tail) > self.limits.max_lines - len(self.head)
                             or self._tail_bytes > self.limits.max_bytes - self._head_bytes):
            self._tail_bytes -= len(self.tail.popleft()) + 1
            self.omitted += 1

    def _watch_summary(self, text: str) -> None:
        # torchrun prints its box last: once the rule under "Root Cause" is out, the job is over.
        if "Root Cause" in text and strip_prefixes(text)[0].strip() == TORCHRUN_ROOT:
            self.in_summary = True
        elif self.in_summary and text.count("=") >= 20 and set(strip_prefixes(text)[0].strip()) == {"="}:
            self.done = True

    @property
    def held(self) -> int:
        return self._head_bytes + self._tail_bytes

    @property
    def truncated(self) -> bool:
        return self.omitted > 0 or self.cut_lines > 0


@dataclass
class _Stream:
    context: dict[int, tuple[int, int, str]] = field(default_factory=dict)  # check -> (line no, seq, text)
    partial: list[str] = field(default_factory=list)
    partial_chars: int = 0
    partial_no: int = 0
    window: Window | None = None


class Assembler:
    def __init__(self, prefilter: Prefilter, limits: Limits, emit: Callable[[Window], None]):
        self.prefilter = prefilter
        self.limits = limits
        self.emit = emit
        self.streams: OrderedDict[Key, _Stream] = OrderedDict()  # least recently seen first
        self.open: OrderedDict[Key, Window] = OrderedDict()  # stalest trigger first
        self.partials = 0  # streams holding the first part of a split line
        self.evicted = 0
        self.forgotten = 0  # streams dropped as the least recently seen (max_streams)
        self.held = 0  # bytes held by the open incidents
        self.now = 0.0  # the latest time seen, for lines flushed outside add()
        self._seq = 0  # orders remembered context lines that share a line number
        # Asked when an incident opens: bytes every raw line of the stream holds (the scanner
        # decodes only the lines that hold one); None: every line must be read.
        self.literal_of: Callable[[Key], bytes | None] = lambda key: None
        self.unfiltered = 0  # open incidents without a literal
        # Context every new stream starts with (split.py: stand-ins for what the part of the
        # input another process reads may have left it); none when one process reads it all.
        self.inherited: dict[int, tuple[int, int, str]] = {}

    @property
    def busy(self) -> bool:
        """Some stream is mid-incident or mid-line: every line must be decoded and routed."""
        return bool(self.open) or self.partials > 0

    @property
    def every_line(self) -> bool:
        """Busy, and some open stream's lines cannot be told by a literal: decode every line."""
        return self.partials > 0 or self.unfiltered > 0 or len(self.open) > MAX_FILTERED

    def add(self, record: Record, no: int, hint: Hint | None, now: float) -> None:
        """One record. `hint`: what the raw line's literals say (prefilter.NO_HIT when it held
        none); None when unknown, and the text itself is searched."""
        self.now = now
        state = self._stream(record.key)
        if record.partial:
            if not state.partial:
                self.partials += 1
                state.partial_no = no
            if state.partial_chars < self.limits.max_line:
                state.partial.append(record.text)
                state.partial_chars += len(record.text)
            return
        text = record.text
        if state.partial:
            text = "".join(state.partial) + text
            hint = None  # the line's head was never looked at
            self._clear_partial(state)
        for line in text.split("\n"):
            self._line(record.key, state, line, no, record.time, hint, now)

    def owns(self, key: Key) -> bool:
        """The stream has an incident open or a split line begun: its records go in, in order."""
        state = self.streams.get(key)
        return state is not None and (state.window is not None or bool(state.partial))

    def touch(self, key: Key) -> None:
        """The stream was seen (it is the most recent; remembered if new)."""
        self._stream(key)

    def remember_match(self, key: Key, check: int, no: int, text: str) -> None:
        """A context line found outside the routing (scan.py settles runs of them at once). A
        line routed since, newer than it, stays."""
        context = self._stream(key).context
        if check in context and context[check][0] > no:
            return
        self._seq += 1
        context[check] = (no, self._seq, text[:CONTEXT_LINE])

    def tick(self, now: float) -> None:
        """Close the incidents whose last trigger is `idle` seconds old."""
        while self.open:
            key, window = next(iter(self.open.items()))
            if window.last_trigger + self.limits.idle > now:
                return
            self._close(key, "idle")

    def next_deadline(self) -> float | None:
        if not self.open:
            return None
        return next(iter(self.open.values())).last_trigger + self.limits.idle

    def finish(self, now: float) -> None:
        for key, state in list(self.streams.items()):
            if state.partial:
                self._flush_partial(key, state, now)
        for key in sorted(self.open, key=lambda k: self.open[k].first_no):
            self._close(key, "end-of-input")

    def _line(self, key: Key, state: _Stream, text: str, no: int, time: object,
              hint: Hint | None, now: float) -> None:
        if hint is None:
            triggered, checks = self.prefilter.is_trigger(text), self.prefilter.context_hits(text)
            run_start = self.prefilter.is_run_start(text)
        else:
            triggered = hint.trigger and self.prefilter.is_trigger(text)
            checks = self.prefilter.context_hits(text, hint) if hint.checks else ()
            run_start = hint.run_start and self.prefilter.is_run_start(text)
        if run_start:  # a new launch: the last run's settings (run_line) are not this one's
            for check in [c for c in state.context if self.prefilter.context[c].run_scoped]:
                del state.context[check]
        window = state.window
        if window is None and triggered:
            if len(self.open) >= self.limits.max_open:
                self.evicted += 1
                self._close(next(iter(self.open)), "evicted")
            # (line no, seq): in input order, also for the many records of one line (a Loki answer)
            context = [text for _, _, text in sorted(state.context.values())]
            window = state.window = Window(key, no, now, context, self.limits, literal=self.literal_of(key))
            self.unfiltered += window.literal is None
            self.open[key] = window
        for check in checks:  # after opening: a trigger line is in its window, not its context
            self._seq += 1
            state.context[check] = (no, self._seq, text[:CONTEXT_LINE])
        if window is None:
            return
        before = window.held
        window.add(text, no, time, triggered, now)
        self.held += window.held - before
        if triggered:
            self.open.move_to_end(key)
        while self.held > self.limits.max_held and len(self.open) > 1:
            stalest = next(iter(self.open))
            if stalest == key:  # this line's own incident last: it is the one being added to
                stalest = next(k for k in self.open if k != key)
            self.evicted += 1
            self._close(stalest, "evicted")
        if window.done:
            self._close(key, "summary")
        elif window.quiet >= self.limits.gap:
            self._close(key, "gap")

    def _stream(self, key: Key) -> _Stream:
        state = self.streams.get(key)
        if state is not None:
            self.streams.move_to_end(key)
            return state
        if len(self.streams) >= self.limits.max_streams:
            old_key, old = next(iter(self.streams.items()))
            if old.window is not None or old.partial:
                self.evicted += 1
            if old.partial:
                self._flush_partial(old_key, old, self.now)
            if old.window is not None:
                self._close(old_key, "evicted")
            del self.streams[old_key]
            self.forgotten += 1
        state = self.streams[key] = _Stream(dict(self.inherited))
        return state

    def _flush_partial(self, key: Key, state: _Stream, now: float) -> None:
        text, no = "".join(state.partial), state.partial_no
        self._clear_partial(state)
        for line in text.split("\n"):
            self._line(key, state, line, no, None, None, now)

    def _clear_partial(self, state: _Stream) -> None:
        state.partial.clear()
        state.partial_chars = 0
        self.partials -= 1

    def _close(self, key: Key, reason: str) -> None:
        window = self.open.pop(key)
        self.held -= window.held
        self.unfiltered -= window.literal is None
        window.closed_by = reason
        state = self.streams.get(key)
        if state is not None and state.window is window:
            state.window = None
            if reason == "summary":
                state.context.clear()  # the launcher has exited: this run is over
        self.emit(window)
