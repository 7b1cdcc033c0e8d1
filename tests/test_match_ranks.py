"""The `ranks` condition: one rank's bad file fails that rank alone; a setting all
ranks share fails every rank. Real dp-2 logs from corpus/ decide it."""

import pytest

from tests.conftest import CORPUS
from triage.kb.model import compile_rule
from triage.classify.match import LogView, holds
from triage.logs.parse import parse

SHARD_MISSING = {"exception": "FileNotFoundError", "message": r"zero_pp_rank_\d+_mp_rank_\d+_optim_states\.pt"}


def _view(name):
    text = (CORPUS / "cases" / f"{name}.log").read_text(encoding="utf-8")
    incident, lines = parse(text)
    return LogView(incident, lines)


def _conditions(**extra):
    rule = compile_rule({"id": "DS-T001", "category": "unknown", "title": "t", "signature": {"patterns": [dict(SHARD_MISSING, **extra)]}})
    return rule.patterns[0].conditions


@pytest.mark.parametrize(
    "log, ranks, fires",
    [
        ("zero2-dp2-optim-shard-deleted", "some", True),  # rank 1's shard deleted: rank 1 alone fails
        ("zero2-dp2-optim-shard-deleted", "all", False),
        ("zero2-dp2-fp32-saved-bf16-load", "all", True),  # bf16_ names on both ranks: both fail
        ("zero2-dp2-fp32-saved-bf16-load", "some", False),
        ("zero0-saved-stage2-load-dp1", "all", True),  # a single rank is all ranks
        ("zero0-saved-stage2-load-dp1", "some", False),
    ],
)
def test_ranks_condition(log, ranks, fires):
    evidence = holds(_conditions(ranks=ranks), _view(log))
    assert (evidence is not None) == fires
    if fires:
        assert any("ranks" in e.text for e in evidence)


def test_without_ranks_the_exception_alone_decides():
    assert holds(_conditions(), _view("zero2-dp2-optim-shard-deleted")) is not None


@pytest.mark.parametrize("log", ["cases/zero2-dp2-optim-shard-deleted.log",
                                 "releases/ds0.16.9-torch2.6.0/cases/zero2-dp2-fp32-saved-bf16-load.log"])
def test_a_paste_of_rank_1_alone_is_neither_some_nor_all_ranks(log):
    # the last 20 lines of a dp-2 log: rank 1's traceback only, rank 0 is not in the paste
    from triage.eval.pastes import PASTES, log_lines

    text = (CORPUS / log).read_text(encoding="utf-8")
    lines = log_lines(text)
    exc = parse(text)[0].primary
    paste = next(p for p in PASTES if p.name == "last 20 lines").cut(lines, exc)
    view = LogView(*parse(paste))
    assert set(view.incident.ranks) == {1}
    for ranks in ("some", "all"):
        assert holds(_conditions(ranks=ranks), view) is None, ranks
