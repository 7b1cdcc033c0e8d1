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


def _transformers(text):
    return "\n".join(f"[WARNING|trainer.py:{2800 + i % 90}] 2026-12-02 18:53:14,{i % 1000:03d} >> {line}"
                     for i, line in enumerate(text.splitlines()))


def _loguru(text):
    return "\n".join(f"2026-12-02 18:53:14.{i % 1000:03d} | ERROR    | train:<module>:{i + 1} - {line}"
                     for i, line in enumerate(text.splitlines()))


def _ray(text):
    return "\n".join(f"(RayTrainWorker pid=48213, ip=10.0.3.7) {line}" for line in text.splitlines())


def _srun_node(text):
    """srun --label in front of torchrun: the label is the node's srun task, 1 here."""
    return "\n".join(f"1: {line}" for line in text.splitlines())


def _bad_bytes(text):
    lines = text.splitlines()
    lines.insert(1, "progress \udcff\udcfe 50%")  # surrogates -> invalid UTF-8 once encoded
    return "\n".join(lines)


TRANSFORMS = [_ansi, _iso, _cri, _python_logging, _crlf, _srun, _pdsh, _transformers, _loguru, _ray, _srun_node,
              _bad_bytes]


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
    if transform in (_srun, _srun_node) and not expected[1]:
        # srun's label names its task: a log without torch's rank tags gains that rank, rightly.
        expected = (expected[0], [0 if transform is _srun else 1], *expected[2:])
    assert _signature(decoded) == expected


@pytest.mark.parametrize("transform", [_iso, _cri, _python_logging, _transformers, _loguru], ids=lambda t: t.__name__.strip("_"))
@pytest.mark.parametrize("name", ["zero2-dp1-load-torch-force-weights-only", "accelerate-load-torch-force-weights-only"])
def test_a_collectors_timestamp_on_every_line_keeps_a_ranks_whole_message(name, transform):
    """torch's weights_only refusal is several paragraphs, the last unindented after an empty line
    torch leaves untagged; a collector's timestamp outside `[rankN]:` is on that last line too, and
    must not read as a new record of the rank that ends the message early."""
    text = LOGS[name]
    assert "\n\n" in text and "Check the documentation of torch.load" in _signature(text)[0][1]
    assert _signature(decode_log(transform(text).encode(), name).text) == _signature(text)

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
    # other loggers' record headers, as transformers, loguru, Python logging and Ray print them
    ("[INFO|trainer.py:2817] 2026-12-03 10:15:42,118 >> [rank1]: AssertionError", "AssertionError", 1),
    ("[WARNING|modeling_utils.py:4280] 2026-12-03 10:15:42,118 >> Some weights", "Some weights", None),
    ("2026-12-03 10:15:42.118 | ERROR    | __main__:main:88 - ValueError: x", "ValueError: x", None),
    ("2026-12-03 10:15:42.118 | CRITICAL | pkg.mod:<module>:1 - y", "y", None),
    ("12/03/2026 10:15:42 - WARNING - __main__ - Process rank: 0", "Process rank: 0", None),
    ("2026-12-03 10:15:42,118 - INFO - root - loaded", "loaded", None),
    ("(RayTrainWorker pid=48213) Traceback (most recent call last):", "Traceback (most recent call last):", None),
    ("(pid=123, ip=10.0.0.1) [rank3]: KeyError: 'step'", "KeyError: 'step'", 3),
    ("(raylet, ip=10.0.0.2) Task was killed", "Task was killed", None),
    ("(autoscaler +1m2s) Resized", "Resized", None),
    # not a wrapper: the message keeps them
    ("- INFO - a list item -", "- INFO - a list item -", None),
    ("(pid: 12) in the message", "(pid: 12) in the message", None),
    ("| a | table |", "| a | table |", None),
])
def test_prefixes(raw, text, rank):
    got_text, got_rank, _ = strip_prefixes(raw)
    assert (got_text, got_rank) == (text, rank)


def test_full_width_punctuation_of_a_translated_console_is_ascii():
    [line] = normalize("FileNotFoundError\uff1a [Errno 2] No such file\uff08x\uff09\u3000y")
    assert line.text == "FileNotFoundError: [Errno 2] No such file(x) y"
    assert parse("ValueError\uff1a Unable to find 'latest' file at /c/latest")[0].primary.type == "ValueError"


def test_ray_dedup_suffix_is_dropped():
    [line] = normalize("(RayTrainWorker pid=48213) AssertionError [repeated 3x across cluster]")
    assert line.text == "AssertionError"


def test_srun_label_is_the_rank_only_where_torch_tags_no_rank():
    lines = normalize("0: launching\n0: [rank1]: Traceback (most recent call last):\n0: [rank1]: KeyError: 'x'")
    assert [line.rank for line in lines] == [None, 1, 1]
    assert [line.rank for line in normalize("3: launching\n3: KeyError: 'x'")] == [3, 3]


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


@pytest.mark.parametrize("pump", [
    "[INFO|" + "a" * 100_000, "[INFO|a:1] " + "2" * 100_000, "| " + "x" * 100_000, "| INFO " + " " * 100_000 + "|",
    "| INFO | " + "a" * 100_000 + ":", "- INFO - " + "a" * 100_000, "(" + "a" * 100_000 + " pid=1", "(pid=" + "1" * 100_000,
    "(pid=1, ip=" + "1." * 50_000, "0: " * 10_000 + "x",
])
def test_prefix_stripping_is_linear_on_pump_strings(pump):
    import time

    started = time.perf_counter()
    for _ in range(3):
        strip_prefixes(pump)
    assert time.perf_counter() - started < 0.5
