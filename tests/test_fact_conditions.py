"""Rule conditions over facts (issue 41, item 3): the matcher reads what the error says once per
log and only when a rule asks; one parser of torch's key lists, size mismatches and flat-partition
sizes serves classify and the probes; the analysis never raises on shapes a log garbles."""

from tests.conftest import ROOT
from triage.analysis.state_dict import Difference, analyse, names
from triage.classify.classifier import classify
from triage.classify.match import LogView, holds
from triage.kb.model import Conditions
from triage.logs.parse import parse
from triage.probe.log_facts import model_claims

CASES = ROOT / "corpus" / "cases"
# real torch 2.13 output, made here: a degree-4 column-parallel weight loaded at degree 1
TP = ("[rank0]: RuntimeError: Error(s) in loading state_dict for ColumnParallelLinear:\n"
      "[rank0]: \tsize mismatch for weight: copying a param with shape torch.Size([512, 4096]) from checkpoint, "
      "the shape in current model is torch.Size([2048, 4096]).\n")


def test_facts_are_read_once_and_only_when_a_condition_asks():
    incident, lines = parse(TP)
    view = LogView(incident, lines)
    assert holds(Conditions(exception=None, line=None), view) == [] and view._signals is None
    first = holds(Conditions(facts=(("tp_ratio", None),)), view)
    signals = view._signals
    assert first and holds(Conditions(facts=(("tp_ratio", "checkpoint"),)), view) and view._signals is signals
    assert holds(Conditions(facts=(("tp_ratio", "model"),)), view) is None  # the checkpoint's shapes are smaller
    assert holds(Conditions(facts=(("tp_ratio", None), ("zero3_placeholder", None))), view) is None  # all must hold


def test_the_evidence_says_what_was_read_and_where():
    hypothesis = classify(TP).hypotheses[0]
    assert hypothesis.rule.id == "DS-P002"
    said = [e for e in hypothesis.evidence if "tp_ratio" in e.why]
    assert said and "4x smaller in the checkpoint" in said[0].why and said[0].line == 2
    assert said[0].text.startswith("size mismatch for weight")


def test_one_parser_serves_classify_and_the_probes():
    for case in ("zero3-dp2-model-hidden-changed", "zero2-dp1-model-renamed", "zero2-dp1-model-hidden-changed"):
        text = (CASES / f"{case}.log").read_text()
        incident, _ = parse(text)
        claims = model_claims(text)
        assert incident.partition == claims.partition
        assert incident.missing_keys == claims.missing and incident.unexpected_keys == claims.unexpected
        assert {s["param"]: (tuple(s["checkpoint"]), tuple(s["model"])) for s in incident.size_mismatches} \
            == claims.sizes
    assert parse((CASES / "zero3-dp2-model-hidden-changed.log").read_text())[0].partition == (33540, 74884)


def test_both_key_lists_on_one_line_stay_apart():
    # torch's message (module.py load_state_dict) joined onto one line, as a chat or an issue shows it
    line = ('RuntimeError: Error(s) in loading state_dict for Net: Missing key(s) in state_dict: "fc1.weight", '
            '"fc1.bias". Unexpected key(s) in state_dict: "fc9.weight". ')
    incident, _ = parse(line)
    assert incident.missing_keys == ["fc1.weight", "fc1.bias"] and incident.unexpected_keys == ["fc9.weight"]
    claims = model_claims(line)
    assert claims.missing == ["fc1.weight", "fc1.bias"] and claims.unexpected == ["fc9.weight"]


def test_shapes_of_another_rank_or_none_are_no_ratio_and_no_crash():
    for sizes in ({"w": ((), (192, 192))}, {"w": ((4,), (4, 4))}, {"w": ((), ())}, {"w": ((0,), ())}):
        assert names(analyse(Difference(sizes=sizes))) <= {"shapes_unpatterned", "zero3_placeholder"}, sizes
    text = (CASES / "zero2-dp1-model-hidden-changed.log").read_text().replace(
        "torch.Size([128, 128]) from checkpoint", "torch.Size([]) from checkpoint", 1)
    assert classify(text).hypotheses[0].rule.id == "DS-M001"
