"""The run that failed, in a real job log holding two runs: a ZeRO-3 training that saved,
then a step with a stage-2 config that failed to load it."""

from tests.conftest import CORPUS
from triage.probe.target import from_args
from triage.logs.runs import failing_run_start

JOB = (CORPUS / "cases" / "job-zero3-train-then-stage2-load.log").read_text(encoding="utf-8")


def test_the_failing_run_starts_at_the_second_launch():
    start = failing_run_start(JOB)
    before, failing = JOB[:start], JOB[start:]
    assert "zero_optimization_stage ...... 3" in before and "zero_optimization_stage ...... 3" not in failing
    assert "zero_optimization_stage ...... 2" in failing
    assert failing.startswith("Setting OMP_NUM_THREADS") or "DeepSpeed info: version=" in failing.splitlines()[0]
    assert "Traceback" not in before


def test_a_log_with_one_run_or_none_starts_at_zero():
    single = (CORPUS / "cases" / "zero3-saved-stage2-load-dp2.log").read_text(encoding="utf-8")
    assert failing_run_start(single) == 0 or "Traceback" not in single[:failing_run_start(single)]
    assert failing_run_start("[rank0]: AssertionError\n") == 0


def test_probe_target_reads_the_failing_runs_stage_and_config():
    target = from_args(None, None, None, JOB)
    assert target.stage == 2 and target.config["zero_optimization"]["stage"] == 2
    line = int(target.sources["stage"].rsplit(" ", 1)[1])
    assert JOB.count("\n", 0, failing_run_start(JOB)) < line  # a line of the second run, numbered in the whole log
    assert "zero_optimization" in JOB.splitlines()[line - 1] or "json = {" in JOB.splitlines()[line - 1]
