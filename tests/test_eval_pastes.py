"""The paste-robustness curve (issue 17, point 2): each variant cuts a real corpus log the way
its name says, and `eval --pastes` scores every variant beside the whole log."""

import json
import re
import shutil
from pathlib import Path

import jsonschema
import pytest

from tests.conftest import ROOT, corpus_log
from triage.classify.classifier import classify
from triage.eval import pastes

CHAINED = "cases/ds_to_universal-zero2-dp2-missing-shard.log"  # a chained traceback, frames with ^^^ markers
DEMO = "cases/job-zero3-train-then-stage2-load.log"  # two ranks, torchrun's summary after the trace


@pytest.fixture(scope="module", params=[CHAINED, DEMO])
def cut(request, rules):
    text = corpus_log(request.param)
    exc = classify(text, rules=rules).incident.primary
    lines = text.splitlines()
    return lines, exc, {p.name: p.cut(lines, exc) for p in pastes.PASTES}


def test_the_exception_line_is_the_line_of_the_primary_exception(cut):
    lines, exc, got = cut
    line = got["exception line only"]
    assert "\n" not in line and exc.type.split(".")[-1] in line
    assert line == lines[exc.log_line - 1]
    for name in ("exception without frames", "last 5 lines", "last 20 lines", "traceback without frames"):
        assert line in got[name].splitlines(), name


def test_cuts_without_frames_have_no_frame_and_no_caret_line(cut):
    _, _, got = cut
    for name in ("exception without frames", "traceback without frames"):
        assert not re.search(r'^\s*(\[\w+\]:?\s*)*File "', got[name], re.M), name
        bare = [re.sub(r"^\s*(\[\w+\]:?\s*)*", "", line).strip() for line in got[name].splitlines()]
        assert not any(line and set(line) <= set("^~") for line in bare), name  # behind a [rankN]: tag too


def test_last_n_lines_end_at_the_exception_and_count_n(cut):
    lines, exc, got = cut
    end = got["exception without frames"].splitlines()[-1]
    for n in (5, 20):
        kept = got[f"last {n} lines"].splitlines()
        assert kept[-1] == end and len(kept) == min(n, lines.index(end) + 1)


def test_type_cut_off_starts_with_the_message(cut):
    _, exc, got = cut
    if not exc.message:  # a bare `AssertionError`: nothing is left once the type is cut off
        assert got["type cut off"] is None
        return
    first = got["type cut off"].splitlines()[0]
    assert not first.startswith(exc.type.split(".")[-1]) and first == exc.message.splitlines()[0].strip()


def test_wrapped_and_prefixed_logs_keep_every_character(cut):
    lines, _, got = cut
    wrapped = got[f"wrapped at {pastes.WRAP} columns"].splitlines()
    assert max(map(len, wrapped)) <= pastes.WRAP and "".join(wrapped) == "".join(lines)
    for tool, prefix in pastes.PREFIXES.items():
        prefixed = got[f"behind {tool} prefix"].splitlines()
        assert [line[len(prefix):] for line in prefixed] == lines and all(l.startswith(prefix) for l in prefixed)


def test_eval_pastes_reports_every_variant_and_validates(cli, tmp_path):
    proc = cli("eval", "--pastes", "--json")
    data = json.loads(proc.stdout)
    schema = json.loads((ROOT / "docs" / "schemas" / "bundled" / "eval.schema.json").read_text())
    jsonschema.validate(data, schema)
    rows = {row["variant"]: row for row in data["pastes"]}
    assert set(rows) == {p.name for p in pastes.PASTES}
    labelled = data["accuracy"]["cases"]
    for row in rows.values():
        assert 0 < row["cases"] <= labelled
        # the variant's whole-log score is the whole log's on the same cases: at most the overall count
        assert row["top3"] >= row["top1"] and row["whole_log_top1"] is not None
        # no classifier beats the ceiling; the negative gate holds on pastes too (issue 17)
        assert row["top1_ceiling"] >= row["top1"] and row["negatives"] > 0 and row["negatives_diagnosed"] == 0
        # the points a better reading could still win: the ceiling's lead over the variant's top-1
        assert abs(row["top1_points_below_ceiling"] - 100 * (row["top1_ceiling"] - row["top1"])) <= 0.1
    # every bare `AssertionError` line is the same text: the exception line alone cannot reach the whole log
    assert rows["exception line only"]["top1_ceiling"] < rows["exception line only"]["whole_log_top1"]
    for prefixed in (name for name in rows if name.startswith("behind ")):  # other loggers' prefixes cost nothing
        assert rows[prefixed]["top1"] == rows[prefixed]["whole_log_top1"], prefixed
    # the text table, on a few real cases (the scoring above is the whole corpus's; once is enough)
    text = cli("eval", "--pastes", small_corpus(tmp_path)).stdout.decode()
    assert "pastes (each labelled log with a traceback" in text and "exception line only *" in text
    assert "below ceiling" in text


def small_corpus(where: Path, per_kind: int = 6) -> Path:
    """A corpus dir of the first `per_kind` real cases of each kind, logs copied."""
    import yaml
    from triage.kb.source import load_yaml

    manifest = load_yaml((ROOT / "corpus" / "manifest.yaml").read_text())
    chosen = [c for kind in ("failure", "negative", "clean") for c in [e for e in manifest if e["kind"] == kind][:per_kind]]
    for case in chosen:
        (where / case["log"]).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / "corpus" / case["log"], where / case["log"])
    (where / "manifest.yaml").write_text(yaml.safe_dump(chosen))
    return where


def test_cuts_count_lines_as_classify_does_past_a_progress_bar(rules):
    # tqdm redraws its bar with a bare \r: a line for classify, two for str.splitlines().
    from triage.logs.inputs import decode_log

    path = ROOT / "corpus" / "cases" / "zero_to_fp32-zero2-dp2-missing-shard.log"
    text = decode_log(path.read_bytes(), str(path)).text
    assert "\r" in text
    exc = classify(text, rules=rules).incident.primary
    line = pastes.PASTES[0].cut(pastes.log_lines(text), exc)
    assert line.startswith(f"{exc.type}: ") and exc.message.startswith(line[len(exc.type) + 2:])


def test_the_markdown_table_holds_the_same_figures_as_the_rows():
    rows = [pastes.Row("exception line only", True, cases=8, top1=5, top3=7, whole_top1=7, whole_top3=8, unknown=1,
                       ceiling=6, negatives=3, negatives_diagnosed=0),
            pastes.Row("type cut off", False)]
    head, rule, line, empty = pastes.markdown(rows)
    assert head.count("|") == rule.count("|") == line.count("|") == empty.count("|")
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells == ["exception line only *", "8", "62.5%", "87.5%", "87.5%", "25.0", "75.0%", "12.5", "1", "0 / 3"]
    assert "| type cut off | 0 | - |" in empty


def test_markdown_goes_with_pastes(cli):
    proc = cli("eval", "--markdown")
    assert proc.returncode == 2 and b"--markdown goes with --pastes" in proc.stderr
