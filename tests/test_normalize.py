"""The parser sees the same incident through every kind of log noise.

Each transform wraps a real corpus log the way a log pipeline or launcher
would (colours, timestamps, Kubernetes' CRI prefix, CRLF, srun/pdsh labels,
bad bytes); the incident parsed from it must equal the clean one.
"""

import random

import pytest

from triage.logs.inputs import decode_log
from triage.logs.normalize import normalize, strip_prefixes
from triage.logs.parse import parse
from tests.corpus_cases import failure_logs


def _ansi(text):
    return "\n".join(f"\x1b[31m{line}\x1b[0m" if "Error" in line else f"\x1b[2m{line}\x1b[0m" for line in text.splitlines())


def _iso(text):
    return "\n".join(f"2026-12-02T18:53:{i % 60:02d}.{i:06d}Z {line}" for i, line in enumerate(text.splitlines()))


def _cri(text):
    return "\n".join(f"2026-12-02T18:53:14.197000123Z stderr F {line}" for line in text.splitlines())


def _python_logging(text):
    return "\n".join(f"[2026-12-02 18:53:14,197] {line}" for line in text.splitlines())


def _crlf(text):
    return text.replace("\n", "\r\n")


def _srun(text):
    return "\n".join(f"0: {line}" for line in text.splitlines())


def _pdsh(text):
    return "\n".join(f"worker-0: {line}" for line in text.splitlines())


def _bad_bytes(text):
    lines = text.splitlines()
    lines.insert(1, "progress \udcff\udcfe 50%")  # surrogates -> invalid UTF-8 once encoded
    return "\n".join(lines)


TRANSFORMS = [_ansi, _iso, _cri, _python_logging, _crlf, _srun, _pdsh, _bad_bytes]


def _signature(text: str):
    incident, _ = parse(text)
    primary = incident.primary
    return (
        primary and (primary.type, primary.message, [(f.file, f.line, f.function, f.code) for f in primary.frames]),
        sorted(incident.ranks),
        incident.root_cause_rank,
        [(len(c.exceptions), c.copies) for c in incident.chains],
    )


LOGS = failure_logs()


@pytest.mark.parametrize("transform", TRANSFORMS, ids=lambda t: t.__name__.strip("_"))
@pytest.mark.parametrize("name", sorted(LOGS)[:12])
def test_noise_does_not_change_the_incident(name, transform):
    text = LOGS[name]
    noisy = transform(text)
    decoded = decode_log(noisy.encode("utf-8", errors="surrogateescape"), name).text
    expected = _signature(text)
    if transform is _srun and not expected[1]:
        # srun's "0: " label names task 0: a log without ranks gains rank 0, rightly.
        expected = (expected[0], [0], *expected[2:])
    assert _signature(decoded) == expected


def test_progress_bar_redraw_keeps_last_state():
    [line] = normalize("step 1/10\rstep 5/10\rstep 10/10")
    assert line.text == "step 10/10"


@pytest.mark.parametrize("raw, text, rank", [
    ("[rank1]: Traceback (most recent call last):", "Traceback (most recent call last):", 1),
    ("[default3]:AssertionError", "AssertionError", 3),
    ("[1,0]<stderr>:KeyError: 'x'", "KeyError: 'x'", 1),
    ("7: RuntimeError: boom", "RuntimeError: boom", 7),
    ("gpu-node-12: [rank5]: x", "x", 5),
    ("W1202 18:53:14.163000 5312 torch/distributed/elastic/multiprocessing/api.py:1028] Sending", "Sending", None),
    ("[2026-12-02 18:53:07,428] [INFO] [engine.py:10:load] msg", "[engine.py:10:load] msg", None),
    ("2026-12-02T18:53:14.197Z stdout P partial", "partial", None),
    ('  File "a.py", line 1, in f', '  File "a.py", line 1, in f', None),
    ("ValueError: 12: not a rank", "ValueError: 12: not a rank", None),
])
def test_prefixes(raw, text, rank):
    got_text, got_rank, _ = strip_prefixes(raw)
    assert (got_text, got_rank) == (text, rank)


def test_interleaved_ranks_are_separated():
    # Two ranks' tracebacks interleaved line by line, as on one shared stderr.
    logs = [LOGS[name] for name in sorted(LOGS) if "[rank1]:" in LOGS[name]]
    if not logs:
        pytest.fail("the corpus must hold a two-rank failure")
    text = logs[0]
    rank_lines = {r: [l for l in text.splitlines() if l.startswith(f"[rank{r}]:")] for r in (0, 1)}
    rng = random.Random(0)
    merged, a, b = [], list(rank_lines[0]), list(rank_lines[1])
    while a or b:
        source = a if (a and (not b or rng.random() < 0.5)) else b
        merged.append(source.pop(0))
    before = parse("\n".join(rank_lines[0] + rank_lines[1]))[0]
    after = parse("\n".join(merged))[0]
    # Chains are listed as they complete, which interleaving may reorder.
    assert sorted((c.final.type, c.final.message, c.ranks) for c in after.chains) == \
        sorted((c.final.type, c.final.message, c.ranks) for c in before.chains)
