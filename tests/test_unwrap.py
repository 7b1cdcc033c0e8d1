"""A log hard-wrapped at a fixed width (a terminal's copy, a ticket's 80 columns): normalize joins
each wrapped line's pieces back into one, so frames and messages parse as in the whole log."""

import pytest

from tests.conftest import CORPUS
from triage.eval.pastes import log_lines
from triage.logs.normalize import normalize, wrap_width
from triage.logs.parse import parse

LOGS = ["cases/zero2-dp1-adamw-saved-sgd-load.log",  # KeyError under torch's optimizer frames
        "cases/job-zero3-train-then-stage2-load.log",  # two ranks, torchrun's summary after the trace
        "cases/zero2-dp2-optim-shard-deleted.log"]  # a FileNotFoundError whose path is longer than a line


def _wrap(lines: list[str], width: int) -> str:
    return "\n".join(part for line in lines for part in ([line[i:i + width] for i in range(0, len(line), width)] or [""]))


@pytest.mark.parametrize("name", LOGS)
@pytest.mark.parametrize("width", [80, 120])
def test_a_wrapped_log_parses_as_the_whole_log(name, width):
    text = (CORPUS / name).read_text(encoding="utf-8")
    lines = log_lines(text)
    wrapped = _wrap(lines, width)
    assert wrap_width(wrapped.split("\n")) == width
    whole, cut = parse(text)[0].primary, parse(wrapped)[0].primary
    assert (cut.type, cut.message) == (whole.type, whole.message)
    assert [(f.file, f.function, f.code) for f in cut.frames] == [(f.file, f.function, f.code) for f in whole.frames]


def test_the_pieces_keep_their_line_numbers():
    text = (CORPUS / LOGS[0]).read_text(encoding="utf-8")
    wrapped = _wrap(log_lines(text), 80)
    got = normalize(wrapped)
    assert len(got) == len(wrapped.split("\n")) and [line.no for line in got] == list(range(1, len(got) + 1))
    rest = [line for line in got if line.joined]
    assert rest and all(line.text == "" for line in rest)
    long_line = next(line for line in got if len(line.text) > 80)
    assert got[long_line.no].joined  # the line after a joined one held its rest


def test_no_log_of_the_corpus_reads_as_wrapped():
    # among them, lines as long as each other by construction (`\tsize mismatch for ...` of a PEFT
    # adapter, 8 alike at the longest length): a line that starts like the one above is no rest of it
    logs = sorted(CORPUS.rglob("*.log"))
    assert len(logs) > 300
    assert [str(p) for p in logs if wrap_width(p.read_text(encoding="utf-8", errors="replace").split("\n"))] == []
