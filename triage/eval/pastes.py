"""The paste-robustness curve: how the classifier does on the parts of a log people paste.

From each labelled corpus log, the variants a person on call pastes into a ticket or a chat:
the exception line alone, the exception without its frames, the last 5 or 20 lines of the
traceback, the message with its type cut off, the traceback without frames, the log wrapped
at 80 columns, and the whole log behind another logger's or runner's line prefix. Each is
classified like a paste and scored top-1 / top-3 against the case's label, beside the whole
log's score on the same cases. A variant is built by cutting or reformatting the real log;
nothing is invented but the prefixes, which are the shapes those tools print.

`contains_exception_line` marks the variants that keep the exception's line intact: the ones
issue 17's goal holds within 5 points of the whole log. Beside each variant: its top-1 ceiling
(triage.eval.ambiguity: cases whose pastes are the same text for different causes can only be
right for one of them; every bare `AssertionError` line is the same text), and the corpus's
negative logs (failures that are not checkpoint failures) cut the same way, with how many of
those pastes were diagnosed as a checkpoint failure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from triage import progress
from triage.eval.evaluate import LABELLED, UNKNOWN, Case, rate

NEGATIVE = "negative"

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


def log_lines(text: str) -> list[str]:
    """The log's lines as classify numbers them (triage.logs.normalize): split at newlines only.
    str.splitlines() also splits at a progress bar's bare \r, and every cut after it would be
    off by one."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


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
    """Python 3.11's ^^^^ markers under a frame's code, behind torch's `[rankN]:` tag or not (a kept
    marker line would leave the paste its frames' code widths, text no one pastes without frames)."""
    text = line.strip()
    if text.startswith("[rank") and "]:" in text:
        text = text.split("]:", 1)[1].strip()
    return bool(text) and set(text) <= set("^~")


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
    ceiling: int = 0  # cases a classifier reading only this paste can get right at best
    negatives: int = 0  # negative logs this variant could be cut from
    negatives_diagnosed: int = 0  # ... whose paste was diagnosed as a checkpoint failure

    @property
    def gap(self) -> float | None:
        """Points lost against the whole log, top-1."""
        return round(100 * (self.whole_top1 - self.top1) / self.cases, 1) if self.cases else None

    @property
    def below_ceiling(self) -> float | None:
        """Points below this variant's ceiling, top-1: what reading the paste better could still win."""
        return round(100 * (self.ceiling - self.top1) / self.cases, 1) if self.cases else None

    def to_json(self) -> dict:
        return {"variant": self.name, "contains_exception_line": self.contains_exception_line, "cases": self.cases,
                "top1": rate(self.top1, self.cases), "top3": rate(self.top3, self.cases),
                "whole_log_top1": rate(self.whole_top1, self.cases), "whole_log_top3": rate(self.whole_top3, self.cases),
                "unknown": self.unknown, "top1_points_lost": self.gap, "top1_ceiling": rate(self.ceiling, self.cases),
                "top1_points_below_ceiling": self.below_ceiling,
                "negatives": self.negatives, "negatives_diagnosed": self.negatives_diagnosed}


def measure(corpus_dir, cases: list[Case], rules) -> list[Row]:
    """Every labelled case's log, whole and as each paste, classified and scored; each negative log's pastes too."""
    from triage.eval.ambiguity import same_log_groups, unreachable

    rows = [Row(p.name, p.contains_exception_line) for p in PASTES]
    printed: list[list[tuple[str, str, tuple[str, ...]]]] = [[] for _ in PASTES]
    chosen = [case for case in cases if case.kind in LABELLED or case.kind == NEGATIVE]
    with progress.meter("eval --pastes: logs cut and classified", len(chosen), unit="logs") as shown:
        for case in chosen:
            shown.update()
            _measure_case(corpus_dir, case, rules, rows, printed)
    for row, prints in zip(rows, printed):
        row.ceiling = row.cases - unreachable(same_log_groups(prints))
    return rows


def _measure_case(corpus_dir, case: Case, rules, rows: list[Row], printed) -> None:
    from triage.classify.classifier import classify
    from triage.eval.ambiguity import fingerprint
    from triage.eval.corpus import read_case_log

    log = read_case_log(corpus_dir, case)
    whole = classify(log.text, rules=rules, truncated=log.truncated)
    exc = whole.incident.primary
    if exc is None:
        return  # no traceback to cut: a launcher-only or warning-only log
    lines = log_lines(log.text)
    whole_top = _categories(whole)
    for paste, row, prints in zip(PASTES, rows, printed):
        text = paste.cut(lines, exc)
        if not text or not text.strip():
            continue
        got = _categories(classify(text, rules=rules))
        if case.kind == NEGATIVE:
            row.negatives += 1
            row.negatives_diagnosed += got[:1] != [UNKNOWN]
            continue
        row.cases += 1
        row.top1 += got[:1] == [case.expected_category]
        row.top3 += case.expected_category in got[:3]
        row.whole_top1 += whole_top[:1] == [case.expected_category]
        row.whole_top3 += case.expected_category in whole_top[:3]
        row.unknown += got[:1] == [UNKNOWN]
        prints.append((case.id, case.expected_category, fingerprint(text, case.id)))


def _categories(report) -> list[str]:
    return [h.rule.category for h in report.hypotheses] or [UNKNOWN]


def _pct(part: int, whole: int) -> str:
    return f"{part / whole:6.1%}" if whole else "     -"


def render(rows: list[Row]) -> list[str]:
    from triage.eval.render import table

    pct = _pct

    out = ["pastes (each labelled log with a traceback, cut as people paste it; * keeps the exception line)"]
    grid = [["variant", "cases", "top-1", "top-3", "whole log top-1", "lost", "unknown", "ceiling", "below ceiling",
             "negatives"]]
    for r in rows:
        grid.append([r.name + (" *" if r.contains_exception_line else ""), str(r.cases), pct(r.top1, r.cases),
                     pct(r.top3, r.cases), pct(r.whole_top1, r.cases),
                     "-" if r.gap is None else f"{r.gap:+.1f}", str(r.unknown), pct(r.ceiling, r.cases),
                     "-" if r.below_ceiling is None else f"{r.below_ceiling:+.1f}", f"{r.negatives_diagnosed}/{r.negatives}"])
    out += table(grid, right={1, 2, 3, 4, 5, 6, 7, 8, 9})
    return out + ["lost: points below the whole log, top-1; ceiling: the most a classifier reading only the paste can "
                  "get top-1 (pastes that are the same text for different causes); below ceiling: points below it; "
                  "negatives: non-checkpoint failures cut the same way, diagnosed as a checkpoint failure / cut"]


def markdown(rows: list[Row]) -> list[str]:
    """The same figures as a Markdown table (docs/benchmarks.md's)."""
    out = ["| paste | cases | top-1 | top-3 | whole log top-1 | points lost | ceiling | points below ceiling | "
           "`unknown` | negatives diagnosed |", "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in rows:
        cells = [r.name + (" *" if r.contains_exception_line else ""), str(r.cases)]
        cells += [_pct(n, r.cases).strip() for n in (r.top1, r.top3, r.whole_top1)]
        cells += ["-" if r.gap is None else f"{r.gap:.1f}", _pct(r.ceiling, r.cases).strip(),
                  "-" if r.below_ceiling is None else f"{r.below_ceiling:.1f}", str(r.unknown),
                  f"{r.negatives_diagnosed} / {r.negatives}"]
        out.append("| " + " | ".join(cells) + " |")
    return out
