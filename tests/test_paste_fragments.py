"""What people paste of a real log still parses and matches (issue 17): the last lines of a
traceback whose header was cut off keep their frames, and the fragments the rules were widened
for (the message without its exception type, the exception line without its frames) are cut
from the rules' own real examples, never written by hand."""

import pytest

from tests.conftest import ROOT
from triage.classify.classifier import classify
from triage.eval.pastes import log_lines
from triage.logs.inputs import decode_log
from triage.logs.parse import parse


def _log(name: str) -> str:
    path = ROOT / name
    return decode_log(path.read_bytes(), str(path)).text


@pytest.mark.parametrize("name", ["corpus/cases/zero2-dp1-adamw-saved-sgd-load.log",
                                  "corpus/cases/zero3-dp2-model-hidden-changed.log",
                                  "corpus/cases/ds_to_universal-zero2-dp2-missing-shard.log"])
@pytest.mark.parametrize("keep", [5, 20])
def test_the_last_lines_of_a_traceback_keep_their_frames(name, keep):
    text = _log(name)
    whole = parse(text)[0].primary
    lines = log_lines(text)
    header = max(i for i in range(whole.log_line) if "Traceback (most recent call last)" in lines[i])
    tail = lines[max(header + 1, whole.log_line - keep):whole.log_line]  # the header cut off
    cut = parse("\n".join(tail))[0].primary
    shown = [(f.file, f.line, f.function) for f in whole.frames][-len(cut.frames):]
    assert cut.type == whole.type and cut.frames and [(f.file, f.line, f.function) for f in cut.frames] == shown
    assert not parse("\n".join(tail))[0].chains[0].bare
