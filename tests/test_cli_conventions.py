"""The conventions every subcommand keeps (issue 20, point 6): --color with NO_COLOR/FORCE_COLOR,
-q / -v, --format text|json|markdown, several logs to classify, and a bad option answered with
the subcommand's own usage."""

import io
import json

import pytest

from tests.conftest import CORPUS
from tests.test_probe_cli import _validator, errors
from triage.classify.render import wants_color

STAGE = CORPUS / "cases" / "job-zero3-train-then-stage2-load.log"  # DS-Z001, a real load's log
CLASSIFY = _validator("classify.schema.json")
CLEAN = next((CORPUS / "clean").glob("*.log"))  # a healthy run's log: nothing to find


class Tty(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("choice,environ,tty,expect", [
    ("auto", {}, True, True),
    ("auto", {}, False, False),
    ("auto", {"TERM": "dumb"}, True, False),
    ("auto", {"NO_COLOR": "1"}, True, False),
    ("auto", {"NO_COLOR": ""}, True, True),  # set but empty: no-color.org says it does not count
    ("auto", {"FORCE_COLOR": "1"}, False, True),
    ("auto", {"FORCE_COLOR": ""}, False, False),
    ("auto", {"NO_COLOR": "1", "FORCE_COLOR": "1"}, True, False),  # the "no" wins
    ("always", {"NO_COLOR": "1"}, False, True),  # the flag beats the environment
    ("never", {"FORCE_COLOR": "1"}, True, False),
])
def test_when_there_is_colour(choice, environ, tty, expect):
    assert wants_color(choice, Tty() if tty else io.StringIO(), environ) is expect


def test_color_flag_on_every_subcommand(cli):
    always = cli("classify", "--color", "always", STAGE).stdout.decode()
    assert "\x1b[1m" in always  # the fixture sets NO_COLOR: --color always overrides it
    assert "\x1b[" not in cli("classify", STAGE, env={"NO_COLOR": "", "FORCE_COLOR": ""}).stdout.decode()
    assert "\x1b[" in cli("classify", STAGE, env={"NO_COLOR": "", "FORCE_COLOR": "1"}).stdout.decode()
    assert "\x1b[" not in cli("classify", "--color", "never", STAGE, env={"FORCE_COLOR": "1"}).stdout.decode()
    for sub in ("probe", "triage", "verify", "stream", "serve", "runbook", "rules", "eval", "chat"):
        assert "--color" in cli(sub, "--help").stdout.decode(), sub


def test_quiet_is_the_answer_alone_and_verbose_all_the_evidence(cli):
    top = json.loads(cli("classify", "--json", STAGE).stdout)["hypotheses"][0]
    quiet = cli("classify", "-q", STAGE)
    assert quiet.returncode == 0
    assert quiet.stdout.decode().splitlines() == [f"{top['rule_id']} zero_stage_mismatch: {top['title']}"]
    assert cli("classify", "-q", CLEAN).stdout.decode().startswith("unknown")
    many = CORPUS / "cases" / "zero2-dp1-sgd-saved-adamw-load.log"  # a hypothesis with 6 pieces of evidence
    normal = cli("classify", many).stdout.decode().count("   > ")
    verbose = cli("classify", "-v", many).stdout.decode().count("   > ")
    evidence = sum(len(h["evidence"]) for h in json.loads(cli("classify", "--json", many).stdout)["hypotheses"])
    assert normal < verbose == evidence
    assert cli("classify", "-q", "-v", STAGE).returncode == 2  # one or the other


def test_format_markdown_is_a_ticket(cli):
    md = cli("classify", "--format", "markdown", STAGE)
    text = md.stdout.decode()
    assert md.returncode == 0 and text.startswith("# Incident report: zero_stage_mismatch [DS-Z001]")
    assert "Written by `ds-triage classify`" in text and "## Log excerpt" in text and "## Fix (DS-Z001)" in text
    assert json.loads(cli("classify", "--format", "json", STAGE).stdout) == json.loads(
        cli("classify", "--json", STAGE).stdout)


def test_several_logs(cli, tmp_path):
    missing = tmp_path / "gone.log"
    proc = cli("classify", "--json", STAGE, CLEAN)
    reports = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert proc.returncode == 0 and [r["source"] for r in reports] == [str(STAGE), str(CLEAN)]
    assert [r["category"] for r in reports] == ["zero_stage_mismatch", "unknown"]
    assert [errors(CLASSIFY, r) for r in reports] == [[], []]
    text = cli("classify", STAGE, CLEAN).stdout.decode()
    assert f"==> {STAGE} <==" in text and f"==> {CLEAN} <==" in text
    assert cli("classify", CLEAN, CLEAN).returncode == 1  # nothing found in any
    bad = cli("classify", "-q", missing, STAGE)  # one unreadable: the others still classified, exit 3
    assert bad.returncode == 3 and "gone.log" in bad.stderr.decode() and "DS-Z001" in bad.stdout.decode()


@pytest.mark.parametrize("sub", ["classify", "probe", "verify", "stream"])
def test_a_bad_option_gets_the_subcommands_usage(cli, sub):
    proc = cli(sub, "--no-such-option", STAGE)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and err.startswith(f"usage: ds-triage {sub} ")
    assert "unrecognized arguments: --no-such-option" in err


def test_runbook_url_on_every_hypothesis_of_classify_triage_and_stream(cli):
    """--docs-url (or DS_TRIAGE_DOCS_URL) gives each hypothesis its page; without, null."""
    base = "https://docs.example.org/ds-triage"
    data = json.loads(cli("classify", "--json", "--docs-url", base, STAGE).stdout)
    assert [h["runbook_url"] for h in data["hypotheses"]] == [
        f"{base}/rules/{h['rule_id']}/" for h in data["hypotheses"]] and data["hypotheses"]
    assert all(h["runbook_url"] is None for h in json.loads(cli("classify", "--json", STAGE).stdout)["hypotheses"])
    text = cli("classify", STAGE, env={"DS_TRIAGE_DOCS_URL": base + "/"}).stdout.decode()
    assert f"runbook: {base}/rules/DS-Z001/" in text
    assert "runbook: ds-triage runbook DS-Z001" in cli("classify", STAGE).stdout.decode()
    stream = cli("stream", "--docs-url", base, STAGE)
    [incident] = [json.loads(line) for line in stream.stdout.decode().splitlines()]
    assert incident["classification"]["hypotheses"][0]["runbook_url"] == f"{base}/rules/DS-Z001/"
    assert cli("classify", "--docs-url", "docs.example.org", STAGE).returncode == 2


def test_every_subcommand_lists_its_exit_codes_and_points_at_the_site(cli):
    """Each --help ends with the subcommand's codes from triage/cli/exit_codes.py (the page's source
    too), and names docs pages, not paths in the repository: with DS_TRIAGE_DOCS_URL, their URLs."""
    from triage.cli import SUBCOMMANDS
    from triage.cli.exit_codes import BY_COMMAND, codes

    assert set(BY_COMMAND) == set(SUBCOMMANDS)
    for sub in SUBCOMMANDS:
        text = " ".join(cli(sub, "--help", env={"DS_TRIAGE_DOCS_URL": "https://docs.example.org/t"}).stdout.decode()
                        .split())
        listed = "exit codes: " + "; ".join(f"{code} {short}" for code, short, _ in codes(sub))
        assert listed in text and "details: https://docs.example.org/t/exit-codes/" in text, sub
        if sub != "rules":  # `rules docs` writes into the checkout's docs/: it names those paths
            assert "docs/" not in text.replace("https://docs.example.org/t/", ""), sub
