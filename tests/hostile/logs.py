"""Logs built to make a backtracking regex slow (issue 16, "Linear-time matching").

`OLD` keeps the 12 regexes as they were before they were rewritten, with the call the tool
made; `ATTACKS` the text that made each one super-linear: a pump string of
triage.kb.pump (a run of blank lines, of spaces after a literal, a literal repeated...),
wrapped so that the pipeline hands it to that regex (an exception line after a traceback
header, an exception message, a line of the log). tests/test_linear_regex.py checks that each
attack still makes its OLD regex grow super-linearly, so the hostile logs stay hostile, and
that the tool classifies them in time linear in their size; benchmarks/bench_hostile_logs.py
prints the speed.

Issue 40 (cost per byte and memory) adds real lines as they stand in the corpus: `error_lines`
(every distinct deciding line), `repeated`, `numbered` (distinct copies), `blocks_of`, `fuzzed`
(a real log mutated, seeded) and `healthy` (real successful runs, for comparison);
tests/hostile/test_log_cost.py bounds their work and memory.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# A real failing load: the hostile blocks go in the middle of real DeepSpeed output.
BASE_LOG = ROOT / "corpus" / "cases" / "job-zero3-train-then-stage2-load.log"

_MULTI = re.MULTILINE
# name: (pattern as it was, flags, how the tool ran it)
OLD = {
    "tracebacks.EXCEPTION": (
        r"(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Warning|Failure|[A-Z]\w*))(?::[ ]?(?P<msg>.*))?$",
        0, "match"),
    "facts._VERSIONS deepspeed": (r"deepspeed (?:version|install version)\s*\.*\s*\[?(\d+\.\d+\.\d+[^\s\],]*)", 0, "search"),
    "facts._VERSIONS torch": (r"torch (?:version|install version)\s*\.*\s*\[?(\d+\.\d+\.\d+[^\s\],]*)", 0, "search"),
    "facts._SIZE": (
        r"size mismatch for (?P<param>[^:]+): copying a param with shape (?P<ckpt>torch\.Size\(\[[^\]]*\]\)|\S+)"
        r" from checkpoint, the shape in current model is (?P<model>torch\.Size\(\[[^\]]*\]\)|[^.\s]+)", 0, "finditer"),
    "target.LOG_WORLD": (r"^\s*world_size \.+ (\d+)\s*$", _MULTI, "search"),
    "DS-F001/DS-Z001 line": (r"^\s*assert len\(self\.ckpt_list\) > 0\s*$", _MULTI, "search"),
    "DS-M001 line": (r"^\s*size mismatch for [\w.]+: copying a param with shape \S+ from checkpoint, "
                     r"the shape in current model is ", _MULTI, "search"),
    "DS-M001 unless message": (r'Missing key\(s\) in state_dict: "base_model\.model\.(?![\s\S]*Unexpected key\(s\))',
                               0, "search"),
    "DS-X002 message": (
        r"Weights only load failed[\s\S]*(?:Unsupported operand (?!118\b)\d+|String is too long|persistent_load id must "
        r"be tuple or int|Only persistent_load of storage is allowed|unsupported persistent id encountered|Expected bytes, got)",
        0, "search"),
    "DS-X002 line": (
        r"(?m)^\s*(?:Unsupported operand (?!118\b)\d+|String is too long|persistent_load id must be tuple or int|Only "
        r"persistent_load of storage is allowed|unsupported persistent id encountered|Expected bytes, got)", _MULTI, "search"),
    "DS-X004 message": (r"Weights only load failed[\s\S]*Unsupported operand 118\b", 0, "search"),
    "DS-X004 line": (r"(?m)^\s*Unsupported operand 118\b", _MULTI, "search"),
    "DS-U001 message": (r"Unsupported global: GLOBAL \S+|\S+ was not an allowed global by default", 0, "search"),
}


def _traceback(exception_line: str) -> str:
    return ('Traceback (most recent call last):\n  File "/w/train.py", line 9, in <module>\n'
            '    engine.load_checkpoint(args.ckpt)\n' + exception_line + "\n")


def _blank_lines(size: int) -> str:
    return "\n" * size


# name -> (the text a regex of OLD sees, the same text as it stands in a log)
ATTACKS = {
    "tracebacks.EXCEPTION": (lambda n: "A" * n + "\x00",
                             lambda n: "Traceback (most recent call last):\n" + "A" * n + "\x00\n"),
    "facts._VERSIONS deepspeed": (lambda n: "deepspeed version" + " " * n + "x",
                                  lambda n: "deepspeed version" + " " * n + "x\n"),
    "facts._VERSIONS torch": (lambda n: "torch version" + " " * n + "x", lambda n: "torch version" + " " * n + "x\n"),
    "facts._SIZE": (lambda n: "size mismatch for " * (n // 18), lambda n: "size mismatch for " * (n // 18) + "\n"),
    "target.LOG_WORLD": (_blank_lines, _blank_lines),
    "DS-F001/DS-Z001 line": (_blank_lines, _blank_lines),
    "DS-M001 line": (_blank_lines, _blank_lines),
    "DS-M001 unless message": (
        lambda n: 'Missing key(s) in state_dict: "base_model.model.' * (n // 48) + "Unexpected key(s)",
        lambda n: _traceback("RuntimeError: " + 'Missing key(s) in state_dict: "base_model.model.' * (n // 48)
                             + "Unexpected key(s)")),
    "DS-X002 message": (lambda n: "Weights only load failed" * (n // 24),
                        lambda n: _traceback("_pickle.UnpicklingError: " + "Weights only load failed" * (n // 24))),
    "DS-X002 line": (_blank_lines, _blank_lines),
    "DS-X004 message": (lambda n: "Weights only load failed" * (n // 24),
                        lambda n: _traceback("_pickle.UnpicklingError: " + "Weights only load failed" * (n // 24))),
    "DS-X004 line": (_blank_lines, _blank_lines),
    "DS-U001 message": (lambda n: "a" * n, lambda n: _traceback("RuntimeError: " + "a" * n)),
}


def old_run(name: str):
    """The call the tool made with the OLD regex `name`: run(text)."""
    pattern, flags, mode = OLD[name]
    compiled = re.compile(pattern, flags)
    if mode == "finditer":
        return lambda text: sum(1 for _ in compiled.finditer(text))
    return getattr(compiled, mode)


def paste(name: str, size: int = 100_000) -> str:
    """A paste a person could send: the end of a real failing log, and one attack of `size` characters."""
    tail = "\n".join(BASE_LOG.read_text().splitlines()[-40:]) + "\n"
    return ATTACKS[name][1](size) + tail


def hostile_log(size: int, block: int | None = None) -> str:
    """About `size` characters: a real failing log with every attack, `block` characters each,
    repeated in turn in its middle. Without `block`, each attack is repeated four times, so
    that its blocks grow with the log: a quadratic regex then takes 16x the time for 4x the
    text (with blocks of a fixed size, its time would grow linearly). Runs of blank lines get
    a tenth of a block: each line costs the pipeline a Line object (microseconds), so a log of
    nothing but newlines measures the line count, not the regexes."""
    block = block or max(1, size // (4 * len(ATTACKS)))
    base = BASE_LOG.read_text().splitlines(keepends=True)
    head, tail = "".join(base[: len(base) // 2]), "".join(base[len(base) // 2:])
    parts: list[str] = [head]
    total = len(head) + len(tail)
    names = list(ATTACKS)
    i = 0
    while total < size:
        name = names[i % len(names)]
        length = block // 10 if ATTACKS[name][1] is _blank_lines else block
        text = ATTACKS[name][1](max(1, min(length, size - total)))
        parts.append(text)
        total += len(text)
        i += 1
    parts.append(tail)
    return "".join(parts)


# --- cost per byte (issue 40, findings 9 and 13): real lines, repeated, numbered, spliced ------

CASES = ROOT / "corpus" / "cases"
CLEAN = ROOT / "corpus" / "clean"


def repeated(line: str, size: int) -> str:
    """One real log line repeated to about `size` characters."""
    line = line.rstrip("\n") + "\n"
    return line * max(1, size // len(line))


def numbered(line: str, count: int) -> str:
    """`count` distinct copies of a real exception line, a number added to its message (inside
    its closing quote: `KeyError: 'param_groups'` -> `KeyError: 'param_groups_17'`)."""
    line = line.rstrip("\n")
    head, quote = (line[:-1], line[-1]) if line[-1:] in "'\"" else (line, "")
    return "".join(f"{head}_{i}{quote}\n" for i in range(count))


def healthy(size: int) -> str:
    """About `size` characters of real successful runs (corpus/clean/), whole lines, replicated."""
    text = "".join(path.read_text(encoding="utf-8") for path in sorted(CLEAN.glob("*.log")))
    whole = text * (size // len(text) + 1)
    return whole[:whole.rfind("\n", 0, size) + 1]


def fuzzed(size: int, seed: int, headers: bool = True) -> str:
    """A real failing log (corpus/cases/) mutated to about `size` characters, seeded: ranges of its
    lines duplicated, ranges of other real logs spliced in, and lines torn in two and joined to
    another line's tail (two processes writing one stream), lines copied with one character
    changed, an error line repeated up to 500 times in a row (a retry loop), each at a random place. Without `headers`, no `Traceback (most recent call last):`
    line is left: the frames and exception lines of a paste cut from such a log, which the parser
    reads line by line as cut tracebacks."""
    import random

    if not headers:
        text = fuzzed(size, seed)
        return "".join(line for line in text.splitlines(keepends=True) if "Traceback (most recent" not in line)
    rng = random.Random(seed)
    logs = [path.read_text(encoding="utf-8").splitlines(keepends=True) for path in sorted(CASES.glob("*.log"))]
    lines = list(rng.choice(logs))
    total = sum(map(len, lines))
    while total < size:
        kind = rng.random()
        source = lines if kind < 0.4 else rng.choice(logs)
        if kind < 0.7:
            start = rng.randrange(len(source))
            piece = source[start:start + rng.randint(1, 60)]
        elif kind < 0.8:
            first, second = rng.choice(source), rng.choice(rng.choice(logs))
            piece = [first[:rng.randrange(len(first))] + second[rng.randrange(len(second)):]]
        elif kind < 0.95:  # an error line of a real log, printed again and again
            other = rng.choice(logs)
            piece = [rng.choice([line for line in other if "Error" in line] or other)] * rng.randint(2, 500)
        else:
            line = rng.choice(source)
            where = rng.randrange(len(line))
            piece = [line[:where] + rng.choice("0123456789abcdefghijklmnopqrstuvwxyz_'/. ") + line[where + 1:]]
        at = rng.randrange(len(lines) + 1)
        lines[at:at] = piece
        total += sum(map(len, piece))
    return "".join(lines)


def error_lines() -> list[str]:
    """Every distinct real error line of the corpus, as printed: the lines the classifier cites as
    its top hypothesis's evidence in each failing log of corpus/cases/ and in each inline example
    of the rules, and the line of every exception it parsed there."""
    from triage.classify.classifier import classify
    from triage.kb import load_rules

    rules = load_rules(ROOT / "rules")
    texts = [path.read_text(encoding="utf-8", errors="replace") for path in sorted(CASES.glob("*.log"))]
    texts += [spec["log"] for rule in rules.rules for spec in rule.data["examples"] if "log" in spec]
    found: dict[str, None] = {}
    for text in texts:
        report = classify(text, rules=rules)
        numbers = [e.line for h in report.hypotheses[:1] for e in h.evidence]
        numbers += [exc.log_line for chain in report.incident.chains for exc in chain.exceptions]
        raw = text.splitlines()
        found.update((raw[n - 1].rstrip(), None) for n in numbers if n and 0 < n <= len(raw) and raw[n - 1].strip())
    return list(found)


_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_PATHS = re.compile(r"/[^\s:,]+")
_TYPE = re.compile(r"(?:[\w.]+\.)?(\w*(?:Error|Exception|Warning|Interrupt))\b")


def shape(line: str) -> tuple[str, str]:
    """(exception type, or `line` for another line; the message's first words with quoted text,
    paths and numbers blanked): two lines of one shape differ only in names, paths and numbers."""
    from triage.logs.normalize import strip_prefixes

    text = strip_prefixes(line)[0].strip()
    header = _TYPE.match(text)
    body = text[header.end():] if header else text
    body = re.sub(r"\d+", "0", _PATHS.sub("P", _QUOTED.sub("Q", body)))
    return (header.group(1) if header else "line"), " ".join(body.split()[:4])


def line_shapes(lines: list[str]) -> dict[tuple[str, str], str]:
    """The longest line of each shape, by shape."""
    out: dict[tuple[str, str], str] = {}
    for line in lines:
        key = shape(line)
        if len(line) > len(out.get(key, "")):
            out[key] = line
    return out


def blocks_of(lines: list[str], size: int) -> str:
    """About `size` characters: each line repeated in a block of its own, all blocks alike in size."""
    each = size // max(1, len(lines))
    return "".join(repeated(line, each) for line in lines)
