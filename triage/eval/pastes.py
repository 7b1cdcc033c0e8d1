"""The paste-robustness curve: how the classifier does on the parts of a log people paste.

From each labelled corpus log, the variants a person on call pastes into a ticket or a chat:
the exception line alone, the exception without its frames, the last 5 or 20 lines of the
traceback, the message with its type cut off, the traceback without frames, the log wrapped
at 80 columns, and the whole log behind another logger's or runner's line prefix. Each is
classified like a paste and scored top-1 / top-3 against the case's label, beside the whole
log's score on the same cases. A variant is built by cutting or reformatting the real log;
nothing is invented but the prefixes, which are the shapes those tools print.

`contains_exception_line` marks the variants that keep the exception's line intact: the ones
issue 17's goal holds within 5 points of the whole log.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from triage import progress
from triage.eval.evaluate import LABELLED, UNKNOWN, Case, rate

# Line prefixes of the tools whose output wraps DeepSpeed's (their shapes, our values).
PREFIXES = {
    "transformers logger": "[INFO|trainer.py:2817] 2026-12-03 10:15:42,118 >> ",
    "loguru": "2026-12-03 10:15:42.118 | INFO     | __main__:main:88 - ",
    "Ray worker": "(RayTrainWorker pid=48213) ",
    "Kubernetes timestamps": "2026-12-03T10:15:42.118402937Z ",
    "srun --label": "3: ",
}
WRAP = 80


@dataclass(frozen=True)
class Paste:
    name: str
    contains_exception_line: bool
    cut: Callable[[list[str], object], str | None]  # (the log's lines, its primary exception) -> the paste


def _block(lines: list[str], exc) -> tuple[int, int]:
    """0-based [start, end) of the exception's `Type: message` line and its continuation lines."""
    start = exc.log_line - 1
    return start, min(len(lines), start + max(1, len(exc.message.splitlines())))


def _traceback_start(lines: list[str], exc) -> int:
    first = min((f.log_line for f in exc.frames), default=exc.log_line) - 1
    above = first - 1
    return above if above >= 0 and "Traceback (most recent call last)" in lines[above] else first


def _frame_lines(exc) -> set[int]:
    """0-based lines of the frames: `File "...", line N, in f` and the code line under it."""
    out = set()
    for frame in exc.frames:
        out.add(frame.log_line - 1)
        if frame.code:
            out.add(frame.log_line)
    return out


def _exception_line(lines, exc):
    return lines[exc.log_line - 1]


def _exception_block(lines, exc):
    start, end = _block(lines, exc)
    return "\n".join(lines[start:end])


def _type_stripped(lines, exc):
    start, end = _block(lines, exc)
    first = lines[start]
    at = first.find(exc.type.split(".")[-1] + ":")
    if at < 0:
        return None
    cut = first[at + len(exc.type.split(".")[-1]) + 1:].lstrip()
    return "\n".join([cut] + lines[start + 1:end])


def _last(n: int):
    def cut(lines, exc):
        _, end = _block(lines, exc)
        return "\n".join(lines[max(0, end - n):end])
    return cut


def _without_frames(lines, exc):
    start, (_, end) = _traceback_start(lines, exc), _block(lines, exc)
    frames = _frame_lines(exc)
    kept = [lines[i] for i in range(start, end) if i not in frames and not _is_caret(lines[i])]
    return "\n".join(kept)


def _is_caret(line: str) -> bool:
    """Python 3.11's ^^^^ markers under a frame's code."""
    return bool(line.strip()) and set(line.strip()) <= set("^~")


def _wrapped(lines, exc):
    return "\n".join(part for line in lines for part in (_wrap(line) or [""]))


def _wrap(line: str) -> list[str]:
    return [line[i:i + WRAP] for i in range(0, len(line), WRAP)]


def _prefixed(prefix: str):
    def cut(lines, exc):
        return "\n".join(prefix + line for line in lines)
    return cut


PASTES = [
    Paste("exception line only", True, _exception_line),
    Paste("exception without frames", True, _exception_block),
    Paste("last 5 lines", True, _last(5)),
    Paste("last 20 lines", True, _last(20)),
    Paste("traceback without frames", True, _without_frames),
    Paste("type cut off", False, _type_stripped),
    Paste(f"wrapped at {WRAP} columns", False, _wrapped),
] + [Paste(f"behind {tool} prefix", True, _prefixed(prefix)) for tool, prefix in PREFIXES.items()]


@dataclass
class Row:
    name: str
    contains_exception_line: bool
    cases: int = 0  # labelled cases this variant could be cut from
    top1: int = 0
    top3: int = 0
    whole_top1: int = 0  # the whole log's score on the same cases
    whole_top3: int = 0
    unknown: int = 0  # the variant classified as no checkpoint failure at all

    @property
    def gap(self) -> float | None:
        """Points lost against the whole log, top-1."""
        return round(100 * (self.whole_top1 - self.top1) / self.cases, 1) if self.cases else None

    def to_json(self) -> dict:
        return {"variant": self.name, "contains_exception_line": self.contains_exception_line, "cases": self.cases,
                "top1": rate(self.top1, self.cases), "top3": rate(self.top3, self.cases),
                "whole_log_top1": rate(self.whole_top1, self.cases), "whole_log_top3": rate(self.whole_top3, self.cases),
                "unknown": self.unknown, "top1_points_lost": self.gap}


def measure(corpus_dir, cases: list[Case], rules) -> list[Row]:
    """Every labelled case's log, whole and as each paste, classified and scored."""
    rows = [Row(p.name, p.contains_exception_line) for p in PASTES]
    labelled = [case for case in cases if case.kind in LABELLED]
    with progress.meter("eval --pastes: logs cut and classified", len(labelled), unit="logs") as shown:
        for case in labelled:
            _measure_case(corpus_dir, case, rules, rows)
            shown.update()
    return rows


def _measure_case(corpus_dir, case: Case, rules, rows: list[Row]) -> None:
    from triage.classify.classifier import classify
    from triage.eval.corpus import read_case_log

    log = read_case_log(corpus_dir, case)
    whole = classify(log.text, rules=rules, truncated=log.truncated)
    exc = whole.incident.primary
    if exc is None:
        return  # no traceback to cut: a launcher-only or warning-only log
    lines = log.text.splitlines()
    whole_top = _categories(whole)
    for paste, row in zip(PASTES, rows):
        text = paste.cut(lines, exc)
        if not text or not text.strip():
            continue
        got = _categories(classify(text, rules=rules))
        row.cases += 1
        row.top1 += got[:1] == [case.expected_category]
        row.top3 += case.expected_category in got[:3]
        row.whole_top1 += whole_top[:1] == [case.expected_category]
        row.whole_top3 += case.expected_category in whole_top[:3]
        row.unknown += got[:1] == [UNKNOWN]


def _categories(report) -> list[str]:
    return [h.rule.category for h in report.hypotheses] or [UNKNOWN]


def render(rows: list[Row]) -> list[str]:
    from triage.eval.render import table

    def pct(part: int, whole: int) -> str:
        return f"{part / whole:6.1%}" if whole else "     -"

    out = ["pastes (each labelled log with a traceback, cut as people paste it; * keeps the exception line)"]
    grid = [["variant", "cases", "top-1", "top-3", "whole log top-1", "lost", "unknown"]]
    for r in rows:
        grid.append([r.name + (" *" if r.contains_exception_line else ""), str(r.cases), pct(r.top1, r.cases),
                     pct(r.top3, r.cases), pct(r.whole_top1, r.cases),
                     "-" if r.gap is None else f"{r.gap:+.1f}", str(r.unknown)])
    return out + table(grid, right={1, 2, 3, 4, 5, 6})
