"""Rules compiled for matching: regexes compiled once (RE2 where it can, triage.kb.regex), defaults filled in."""

from __future__ import annotations

import re
from triage.kb.regex import Regex
from triage.record import Frozen


class FrameSpec(Frozen):
    __slots__ = _fields = ("file", "function", "code")

    def __init__(self, file: str | None, function: Regex | None, code: Regex | None):
        self.file, self.function, self.code = file, function, code

    def describe(self) -> str:
        parts = [self.file or "*"]
        if self.function:
            parts.append(self.function.pattern)
        return ":".join(parts)


class Conditions(Frozen):
    """All must hold. exception/message/frames hold for one same exception."""

    __slots__ = _fields = ("exception", "message", "frames", "line", "run_line", "exit_code", "no_traceback", "ranks",
                           "facts")

    def __init__(self, exception: Regex | None = None, message: Regex | None = None,
                 frames: tuple[FrameSpec, ...] = (), line: Regex | None = None, run_line: Regex | None = None,
                 exit_code: int | None = None, no_traceback: bool | None = None, ranks: str | None = None,
                 facts: tuple[tuple[str, str | None], ...] = ()):
        self.exception, self.message, self.frames, self.line = exception, message, frames, line
        self.run_line = run_line  # like line, in the run that failed only (match.LogView.run_text)
        self.exit_code, self.no_traceback = exit_code, no_traceback
        self.ranks = ranks  # "some" | "all": which of the log's ranks raised it
        # (signal, side or None): what the log's state-dict difference means (triage.analysis.state_dict)
        self.facts = facts

    @property
    def exception_scoped(self) -> bool:
        return bool(self.exception or self.message or self.frames or self.ranks)

    @property
    def specificity(self) -> int:
        return sum(x is not None for x in (self.exception, self.message, self.line, self.run_line, self.exit_code,
                                           self.no_traceback, self.ranks)) + len(self.frames) + len(self.facts)


class Pattern(Frozen):
    __slots__ = _fields = ("conditions", "confidence", "name")

    def __init__(self, conditions: Conditions, confidence: float, name: str | None):
        self.conditions, self.confidence, self.name = conditions, confidence, name


class Boost(Frozen):
    __slots__ = _fields = ("conditions", "weight", "why")

    def __init__(self, conditions: Conditions, weight: float, why: str | None):
        self.conditions, self.weight, self.why = conditions, weight, why


class Phrase(Frozen):
    __slots__ = _fields = ("text", "weight", "min_similarity")

    def __init__(self, text: str, weight: float, min_similarity: float):
        self.text, self.weight, self.min_similarity = text, weight, min_similarity


class Rule(Frozen):
    _fields = ("id", "category", "title", "priority", "patterns", "boosts", "phrases", "unless", "data", "path")
    _hidden = ("data",)

    def __init__(self, id: str, category: str, title: str, priority: int, patterns: tuple[Pattern, ...],
                 boosts: tuple[Boost, ...], phrases: tuple[Phrase, ...], unless: tuple[Conditions, ...],
                 data: dict, path: str = ""):
        self.id, self.category, self.title, self.priority = id, category, title, priority
        self.patterns, self.boosts, self.phrases, self.unless = patterns, boosts, phrases, unless
        self.data = data  # the validated rule as written, for rendering
        self.path = path

    @property
    def probes(self) -> list[str]:
        return self.data.get("probes", [])

    @property
    def releases(self):
        """A known bug's affected and fixed releases (triage.kb.releases.BugReleases), or None."""
        from triage.kb.releases import of_rule  # packaging: only for the probes and the docs

        return of_rule(self.data)


def compile_rule(data: dict, path: str = "") -> Rule:
    signature = data["signature"]
    return Rule(
        id=data["id"],
        category=data["category"],
        title=data["title"],
        priority=data.get("priority", 50),
        patterns=tuple(
            Pattern(_conditions(p), float(p.get("confidence", 0.8)), p.get("name")) for p in signature["patterns"]
        ),
        boosts=tuple(Boost(_conditions(b), float(b["weight"]), b.get("why")) for b in signature.get("boosts", [])),
        phrases=tuple(
            Phrase(p["text"], float(p["weight"]), float(p.get("min_similarity", 88))) for p in signature.get("phrases", [])
        ),
        unless=tuple(_conditions(u) for u in signature.get("unless", [])),
        data=data,
        path=path,
    )


def _conditions(spec: dict) -> Conditions:
    frames = list(spec.get("frames", []))
    if "frame" in spec:
        frames.append(spec["frame"])
    return Conditions(
        exception=_re(spec.get("exception")),
        message=_re(spec.get("message")),
        frames=tuple(FrameSpec(f.get("file"), _re(f.get("function")), _re(f.get("code"))) for f in frames),
        line=_re(spec.get("line"), re.MULTILINE),  # ^ and $ anchor at each log line
        run_line=_re(spec.get("run_line"), re.MULTILINE),
        exit_code=spec.get("exit_code"),
        no_traceback=spec.get("no_traceback"),
        ranks=spec.get("ranks"),
        facts=tuple(parse_fact(f) for f in spec.get("facts", ())),
    )


def parse_fact(text: str) -> tuple[str, str | None]:
    """`tp_ratio` -> ("tp_ratio", None); `zero3_placeholder:checkpoint` -> (signal, the side it is on)."""
    name, _, side = text.partition(":")
    return name, side or None


def _re(pattern: str | None, flags: int = 0) -> Regex | None:
    # Validation (kb/validate.py) has compiled every pattern before it reached the cache.
    return Regex(pattern, flags) if pattern is not None else None
