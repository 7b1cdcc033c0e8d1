"""The scripted conversation (triage/evidence/scripted.py) on a bounded real subset: each probe
scenario's real corpus log, and its real checkpoint rebuilt by tests/probe_checkpoints.py; the user
answers each deciding question by running the asked command for real on that checkpoint (read-only:
cat, ls, id, namei), as the job's user (nobody where the corpus loaded as nobody). Top-1 after 0,
1 and 2 answers is printed; a healthy checkpoint is never diagnosed."""

import subprocess

import pytest

from tests.conftest import ROOT
from tests.probe_checkpoints import HEALTHY, scenario, scenario_entry
from triage.evidence.scripted import converse

CASES = ["zero3-saved-stage2-load-dp2", "zero2-dp2-optim-shard-deleted", "zero2-dp2-model-states-deleted",
         "zero2-dp2-optim-shard-unreadable", "zero3-dp2-tag-dir-unreadable", "zero2-dp2-optim-shard-truncated"]


def answerer(root, user: str | None):
    """Runs the asked command where the checkpoint is: CKPT is its root, TAG the tag `latest` names."""
    tag = (root / "latest").read_text().strip()

    def run(command: str) -> str:
        filled = command.replace("CKPT", str(root)).replace("TAG", tag)
        for where in ("/tmp/ds-triage-corpus/" + root.name,):  # the dir the corpus job loaded: this copy
            filled = filled.replace(where, str(root))
        prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if user == "nobody" else []
        done = subprocess.run(prefix + ["bash", "-c", filled], capture_output=True, text=True, timeout=60)
        return done.stdout + done.stderr  # what a terminal shows, as the person pastes it
    return run


@pytest.mark.parametrize("case", CASES + [HEALTHY])
def test_after_at_most_two_answers_the_top_cause_is_the_cases(case, rules, capsys):
    entry = scenario_entry(case)
    root = scenario(case)
    log = (ROOT / "corpus" / ("clean" if case == HEALTHY else "cases") / f"{case}.log").read_text()
    dialogue = converse(log, rules, answerer(root, entry.get("user")))
    with capsys.disabled():
        print(f"\n{case}: top-1 after 0..{len(dialogue.answers) - 1} answers: {dialogue.answers} "
              f"({dialogue.statuses}); asked {len(dialogue.asked)}")
    if case == HEALTHY:
        assert "confirmed" not in dialogue.statuses  # nothing diagnosed on a healthy checkpoint
    else:
        assert dialogue.answers[-1] == entry["category"], dialogue
        assert len(dialogue.asked) <= 2
