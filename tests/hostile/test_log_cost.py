"""Classification cost per byte and memory (issue 40, findings 9 and 13).

The lines are real: every distinct line the classifier cites as the deciding evidence of a
corpus case or of a rule's inline example, and every exception line it parsed there
(tests.hostile.logs.error_lines). Two bounds on work, no clock:

- The message reader (triage.logs.tracebacks) reads each log line into one exception's message
  at most: the characters of all messages, each exception counted as often as it was printed,
  are at most the log's characters (the constant is 1). Before, every bare exception line joined
  up to the next MAX_MESSAGE_LINES (200) lines: 93 to 146 times the log for the corpus's lines,
  and past 6 GB for a 10.8 MB log of one gloo `RuntimeError` line repeated.
- The matcher reads at most HEAD_EXCEPTIONS + TAIL_EXCEPTIONS exceptions (and the primary one's
  chain), however many a log raised: each pattern's work is bounded by that, not by the log.

And memory under the 1 GiB address-space cap of issue 16 (a subprocess, RLIMIT_AS): 32 MiB of
each real line repeated. Speed lives in benchmarks/bench_hostile_logs.py.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from functools import lru_cache

import pytest

from tests.conftest import ROOT
from tests.hostile.logs import blocks_of, error_lines, numbered, repeated, shape
from triage.classify import messages
from triage.classify.match import HEAD_EXCEPTIONS, TAIL_EXCEPTIONS, LogView
from triage.errors import EXIT_FOUND, EXIT_UNKNOWN
from triage.logs.normalize import strip_prefixes
from triage.logs.parse import parse
from triage.logs.tracebacks import MAX_MESSAGE_LINES

LIMIT = 1 << 30  # the address space the CLI gets, as in tests/test_big_inputs.py
LOG_SIZE = 32 << 20  # the size cap of the log reader (triage.logs.inputs.MAX_BYTES)
COPIES = 2 * MAX_MESSAGE_LINES  # enough copies of a line for every old join to be a whole one
KEYERRORS = 16_000  # finding 13: 16,000 distinct KeyError lines


@lru_cache(maxsize=None)
def lines() -> tuple[str, ...]:
    return tuple(error_lines())


def message_chars(text: str) -> int:
    """Characters of every parsed exception's message, each counted as often as it was printed."""
    incident, _ = parse(text)
    return sum(chain.copies * len(exc.message) for chain in incident.chains for exc in chain.exceptions)


def cost_classes(found) -> dict[tuple, str]:
    """The longest line of each kind the parser treats differently: read as an exception or not,
    behind a rank or log prefix or not, indented or not, ASCII or wider characters (a str of 4
    bytes a character: one emoji makes a 32 MiB log 128 MB a copy)."""
    out: dict[tuple, str] = {}
    for line in found:
        text = strip_prefixes(line)[0]
        key = (shape(line)[0] != "line", text != line, text[:1] in " \t", line.isascii())
        if len(line) > len(out.get(key, "")):
            out[key] = line
    return out


def test_the_corpus_gives_real_error_lines_of_every_kind():
    found = lines()
    assert len(found) > 100
    assert any("Connection closed by peer" in line and not line.isascii() for line in found)  # finding 9's line
    assert any(shape(line)[0] == "KeyError" for line in found)
    assert len(cost_classes(found)) >= 6


def test_each_real_error_line_repeated_is_read_into_one_message_at_most():
    too_much = []
    for line in lines():
        text = repeated(line, COPIES * (len(line) + 1))
        joined = message_chars(text)
        if joined > len(text):
            too_much.append(f"{joined / len(text):.0f}x the log: {line[:120]}")
    assert not too_much, f"{len(too_much)} lines joined into messages more than once:\n" + "\n".join(too_much[:20])


def keyerror_line() -> str:
    return min((line for line in lines() if shape(line)[0] == "KeyError"), key=len)


def test_16000_distinct_keyerror_lines_cost_each_pattern_a_bounded_number_of_exceptions():
    text = numbered(keyerror_line(), KEYERRORS)
    incident, parsed = parse(text)
    assert len(incident.chains) == KEYERRORS  # each its own exception: nothing dropped from the incident
    assert message_chars(text) <= len(text)
    view = LogView(incident, parsed)
    primary_chain = next(chain for chain in incident.chains if chain.final is incident.primary)
    assert len(view.exceptions) <= HEAD_EXCEPTIONS + TAIL_EXCEPTIONS + len(primary_chain.exceptions)
    assert incident.primary in view.exceptions


def test_the_message_index_searches_a_bounded_text_whatever_one_line_holds():
    """Each of the ~300 raise sites' anchors is looked for in every block (triage.classify.messages):
    one exception line of 4 MB made that 300 passes over 4 MB, and a set of its 4 million 4-grams."""
    line = next(line for line in lines() if "Connection closed by peer" in line)
    text = line + " and then" * 450_000 + "\n" + keyerror_line() + "\n"
    incident, parsed = parse(text)
    found = messages.blocks(LogView(incident, parsed))
    assert sum(len(block.text) + 1 for block in found) <= messages.MAX_HAYSTACK + messages.MAX_BLOCK_CHARS
    assert all(len(block.text) <= messages.MAX_BLOCK_CHARS for block in found)


@pytest.fixture
def cli_env(rule_cache):
    return dict(os.environ, XDG_CACHE_HOME=rule_cache, NO_COLOR="1")


def classify_capped(cli_env, paths) -> subprocess.CompletedProcess:
    """`ds-triage classify --format json` of several logs in one process under the 1 GiB cap."""
    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))

    return subprocess.run([sys.executable, "-m", "triage", "classify", "--format", "json", *map(str, paths)],
                          capture_output=True, cwd=ROOT, env=cli_env, timeout=900, preexec_fn=cap)


def assert_classified(done: subprocess.CompletedProcess, count: int) -> list[dict]:
    err = done.stderr.decode(errors="replace")
    assert done.returncode in (EXIT_FOUND, EXIT_UNKNOWN), err[-2000:]
    assert "MemoryError" not in err and "Traceback" not in err
    # several logs: one report a line; one log: the report, indented
    reports = [json.loads(row) for row in done.stdout.splitlines()] if count > 1 else [json.loads(done.stdout)]
    assert len(reports) == count
    return reports


def test_16000_distinct_keyerror_lines_classify_within_1_gib(tmp_path, cli_env):
    path = tmp_path / "keyerrors.log"
    path.write_text(numbered(keyerror_line(), KEYERRORS), encoding="utf-8")
    (report,) = assert_classified(classify_capped(cli_env, [path]), 1)
    assert len(report["incident"]["chains"]) == KEYERRORS


@pytest.mark.slow
def test_32_mib_of_each_real_error_line_repeated_within_1_gib(tmp_path, cli_env):
    """32 MiB of the longest real line of each kind the parser reads differently, one log each, and
    one 32 MiB log of every distinct real line repeated in a block of its own (each block more
    than MAX_MESSAGE_LINES copies): every line's shape at the cap, in one process."""
    found = lines()
    logs = {f"kind-{n}": line for n, line in enumerate(cost_classes(found).values())}
    paths = []
    for name, line in logs.items():
        paths.append(tmp_path / f"{name}.log")
        paths[-1].write_text(repeated(line, LOG_SIZE), encoding="utf-8")
    # every line that a block of its share of 32 MiB holds more than MAX_MESSAGE_LINES times (a few
    # long ones do not: the longest of each kind has a 32 MiB log of its own above)
    share = LOG_SIZE // len(found)
    fit = [line for line in found if share // (len(line) + 1) > MAX_MESSAGE_LINES]
    assert len(fit) >= 0.9 * len(found)
    paths.append(tmp_path / "every-line.log")
    paths[-1].write_text(blocks_of(fit, LOG_SIZE), encoding="utf-8")
    assert all(LOG_SIZE // 2 < path.stat().st_size <= LOG_SIZE * 5 // 4 for path in paths)
    assert_classified(classify_capped(cli_env, paths), len(paths))
