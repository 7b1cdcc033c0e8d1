"""What a new user reaches for on the command line (issue 44, "smaller things"): `-V`, fish
completion run by a real fish, `--extra-rules` beside the bundled rules, every environment
variable listed, and a report whose first line is not an error."""

import json
import re
import shutil
import subprocess
import sys

import pytest

from tests.conftest import CORPUS, ROOT
from tests.rule_files import rules_dir, valid_rule

TEAM_LOG = """\
Traceback (most recent call last):
  File "/workspace/team/train.py", line 88, in <module>
    restore(engine, args.load)
  File "/workspace/team/ckpt_guard.py", line 41, in restore
    raise ShardManifestError(f"manifest lists {len(expected)} shards, found {len(found)}")
team.ckpt_guard.ShardManifestError: manifest lists 4 shards, found 3
"""


def team_rule(rule_id="DS-T901") -> str:
    """A team's own rule about its own training code's exception (not DeepSpeed's)."""
    rule = valid_rule(rule_id)
    rule = rule.replace("title: A test rule about a bare assertion", "title: The team's shard manifest disagrees with the tag")
    rule = rule.replace("""            - exception: AssertionError
              frame: {file: runtime/state_dict_factory.py, function: check_ckpt_list}""",
                        """            - exception: ShardManifestError
              message: manifest lists \\d+ shards""")
    example = "".join(f"\n              {line}" for line in TEAM_LOG.splitlines())
    return rule.split("        examples:")[0] + f"""\
        examples:
          - expect: match
            log: |{example}
          - expect: no-match
            log: "ShardManifestError was renamed"
    """


@pytest.fixture
def team_rules(tmp_path):
    directory = rules_dir(tmp_path, {"DS-T901-team-manifest.yaml": team_rule()})
    (directory / "schema.json").unlink()  # an extra set runs under the main set's schema
    return directory


def test_dash_capital_v_prints_the_version(cli):
    from triage import __version__

    for flag in ("-V", "--version"):
        proc = cli(flag)
        assert proc.returncode == 0 and proc.stdout.decode().strip() == f"ds-triage {__version__}"


def test_extra_rules_add_to_the_bundled_set(cli, team_rules, tmp_path):
    log = tmp_path / "team.log"
    log.write_text(TEAM_LOG)
    bundled = json.loads(cli("classify", log, "--json").stdout)
    # the bundled rules know only that it is the job's own code (DS-N010), not which failure
    assert [h["rule_id"] for h in bundled["hypotheses"]] in ([], ["DS-N010"])
    both = json.loads(cli("classify", log, "--json", "--extra-rules", team_rules).stdout)
    assert both["hypotheses"][0]["rule_id"] == "DS-T901"
    # ... and the bundled rules still answer their own failures in the same run
    zero3 = CORPUS / "cases" / "job-zero3-train-then-stage2-load.log"
    report = json.loads(cli("classify", zero3, "--json", "--extra-rules", team_rules).stdout)
    assert report["hypotheses"][0]["rule_id"] == "DS-Z001"
    # the environment variable does the same, for serve's and stream's workers
    by_env = json.loads(cli("classify", log, "--json", env={"DS_TRIAGE_EXTRA_RULES": str(team_rules)}).stdout)
    assert by_env["hypotheses"][0]["rule_id"] == "DS-T901"


def test_an_extra_rule_reusing_a_bundled_id_is_refused_with_its_file(cli, tmp_path, team_rules):
    (tmp_path / "clash").mkdir()
    clash = rules_dir(tmp_path / "clash", {"DS-Z001-clash.yaml": team_rule("DS-Z001")})
    (clash / "schema.json").unlink()
    proc = cli("classify", "-", "--extra-rules", clash, stdin=TEAM_LOG.encode())
    assert proc.returncode == 4
    assert re.search(r"DS-Z001-clash\.yaml:1: same id as rules/.*DS-Z001", proc.stderr.decode())


def test_stream_reads_extra_rules_too(cli, team_rules):
    proc = cli("stream", "--extra-rules", team_rules, stdin=TEAM_LOG.encode())
    incidents = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert [i["classification"]["hypotheses"][0]["rule_id"] for i in incidents] == ["DS-T901"]


def test_every_environment_variable_read_is_listed_in_help_and_guide(cli):
    from triage.cli.environment import VARIABLES, markdown_table

    source = "\n".join(p.read_text() for p in (ROOT / "triage").rglob("*.py"))
    read = set(re.findall(r"\"((?:DS_TRIAGE|XDG)_[A-Z_]+|NO_COLOR|FORCE_COLOR|COLUMNS)\"", source))
    listed = {name for name, _ in VARIABLES}
    assert read <= listed, f"read but not listed in triage/cli/environment.py: {sorted(read - listed)}"
    help_text = cli("--help", env={"COLUMNS": "80"}).stdout.decode()
    assert all(name in help_text for name in listed)
    assert max(map(len, help_text.splitlines())) <= 80
    assert markdown_table() in (ROOT / "docs" / "guide.md").read_text()


def test_a_successful_report_does_not_start_with_error(cli):
    proc = cli("classify", CORPUS / "cases" / "job-zero3-train-then-stage2-load.log")
    first = proc.stdout.decode().splitlines()[0]
    assert proc.returncode == 0
    assert first.startswith("raised: AssertionError") and not first.lower().startswith("error")


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed (.ci/run installs it)")
def test_fish_completes_subcommands_options_and_choices(tmp_path):
    shim = tmp_path / "ds-triage"
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} -m triage \"$@\"\n")
    shim.chmod(0o755)
    script = tmp_path / "ds-triage.fish"
    script.write_text(subprocess.run([shim, "completion", "fish"], capture_output=True, text=True, cwd=ROOT,
                                     check=True).stdout)
    asks = ["ds-triage cla", "ds-triage verify --ju", "ds-triage classify --format ", "ds-triage probe --stage ",
            "ds-triage rules ", "ds-triage rules lint --exa", "ds-triage completion "]
    program = f"source {script}; " + "; ".join(f"complete -C '{ask}'; echo ---" for ask in asks)
    proc = subprocess.run(["fish", "--no-config", "-c", program], capture_output=True, text=True, timeout=60,
                          env={"PATH": f"{tmp_path}:/usr/bin:/bin", "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    answers = [sorted(line.split("\t")[0] for line in block.strip().splitlines())
               for block in proc.stdout.split("---")[:-1]]
    assert answers == [["classify"], ["--junit"], ["json", "markdown", "text"], ["0", "1", "2", "3"],
                       ["docs", "lint", "list"], ["--examples"], ["bash", "fish", "tcsh", "zsh"]]


def test_runbook_shows_the_whole_page_or_where_it_is_published(cli):
    """An installed tool has no docs/ beside it: the page is shown whole, or its URL is named."""
    whole = cli("runbook", "DS-M001").stdout.decode()
    headings = re.findall(r"^([A-Z][A-Z ]+)$", whole, re.M)
    assert headings[-2:] == ["EXAMPLES", "SIGNATURE"] and "docs/rules" not in whole and "Full page" not in whole
    short = cli("runbook", "DS-M001", env={"DS_TRIAGE_DOCS_URL": "https://docs.example/ds-triage"}).stdout.decode()
    assert "SIGNATURE" not in short
    assert short.rstrip().endswith("Full page with the signature and examples: https://docs.example/ds-triage/rules/DS-M001/")


@pytest.mark.slow
def test_inspect_reads_a_real_shard_without_running_it(cli):
    from tests import probe_checkpoints as pc

    tag = pc.baselines() / "z2-dp2-fp32" / "global_step3"
    model = tag / "mp_rank_00_model_states.pt"
    config = json.loads(cli("inspect", "--config", model).stdout)
    assert config["zero_optimization"]["stage"] == 2  # the saved ds_config of a ZeRO-2 save
    shapes = cli("inspect", "--shapes", model).stdout.decode().splitlines()
    assert shapes and all(re.fullmatch(r"[\w.]+\t\[[\d, ]*\]", line) for line in shapes)
    ranks = cli("inspect", "--ranks", tag).stdout.decode()
    assert "zero_pp_rank_1_mp_rank_00_optim_states.pt" in ranks and "global_steps 3" in ranks
    bad = cli("inspect", ROOT / "README.md")
    assert bad.returncode == 3 and bad.stderr.decode().count("\n") == 1 and "Traceback" not in bad.stderr.decode()


def test_no_printed_command_needs_the_package_importable_by_the_users_python():
    """Verify steps and probe commands call `ds-triage ...` (issue 44: `python -m triage.probe.safe_pickle`
    failed under pipx, whose python is not the user's)."""
    import yaml

    printed = [step["command"] for path in (ROOT / "rules").rglob("*.yaml")
               for step in (yaml.safe_load(path.read_text()) or {}).get("verify", [])]
    printed += re.findall(r"f\"(python -m triage[^\"]*)\"", "\n".join(
        p.read_text() for p in (ROOT / "triage" / "probe").rglob("*.py")))
    assert printed and not [c for c in printed if "python -m triage" in c]


def test_the_probe_extra_takes_a_torch_range_that_fits_a_clusters_build():
    """`pip install ".[probe]" torch==<another release>` must resolve: no pinned torch in the extra (dev.py
    pins the CPU build for development and CI only). Resolved for real with torch==2.12.0 by
    `pip install --dry-run` (the lead's note); here the requirement itself is checked."""
    import tomllib

    from packaging.requirements import Requirement

    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["probe"]
    torch = next(Requirement(r) for r in extra if Requirement(r).name == "torch")
    assert not any(spec.operator in ("==", "===") for spec in torch.specifier)
    assert all(torch.specifier.contains(v) for v in ("2.5.1", "2.12.0", "2.13.0", "2.14.1"))
