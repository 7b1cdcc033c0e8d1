"""Two ranks failing differently in one real log: the failure printed first is explained
first, and the other rank's failure stays among the hypotheses (DeepSpeed 0.15.4 on torch
2.6: rank 1's optimizer shard was deleted, rank 0 then hit torch's weights_only refusal)."""

import pytest

from tests.conftest import CORPUS
from triage.classify.classifier import classify
from triage.logs.parse import parse

PAIR = CORPUS / "releases" / "ds0.15.4-torch2.6.0" / "cases"


def _text(path):
    return path.read_text(encoding="utf-8")


@pytest.mark.parametrize("log", ["zero2-dp2-optim-shard-deleted", "zero3-dp2-optim-shard-deleted"])
def test_the_first_printed_failure_is_diagnosed_first(log):
    text = _text(PAIR / f"{log}.log")
    incident = parse(text)[0]
    assert incident.primary.short_type == "FileNotFoundError"
    ids = [h.rule.id for h in classify(text).hypotheses]
    assert ids[0] == "DS-F002"
    assert "DS-U001" in ids[:3]  # rank 0's refusal is real too: still reported


def test_torchruns_root_cause_rank_does_not_override_log_order():
    # zero3: torchrun names rank 0 as the first observed failure, yet rank 1's traceback came first
    text = _text(PAIR / "zero3-dp2-optim-shard-deleted.log")
    incident = parse(text)[0]
    assert incident.root_cause_rank == 0
    assert incident.primary.short_type == "FileNotFoundError"


def test_a_bare_assertion_yields_to_another_ranks_failure_that_says_what_failed():
    # rank 1 asserts with no message before rank 0 names the world-size change
    text = _text(CORPUS / "cases" / "zero3-dp1-saved-load-dp2.log")
    assert parse(text)[0].primary.short_type == "ZeRORuntimeException"
    assert classify(text).hypotheses[0].rule.id == "DS-P001"
