"""No input, however malformed, makes the parser or the classifier raise."""

import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triage.classify.classifier import classify
from triage.logs.inputs import decode_log
from triage.errors import BadInput
from triage.logs.parse import parse

# Fragments of the structures the parser keys on, so random text reaches the
# interesting states (half a traceback, a chain marker with nothing after it).
FRAGMENTS = [
    "Traceback (most recent call last):\n",
    '  File "/x/deepspeed/runtime/engine.py", line 12, in load_checkpoint\n',
    "    self._load_checkpoint(load_dir)\n",
    "AssertionError\n",
    "RuntimeError: Error(s) in loading state_dict for Net:\n",
    '\tMissing key(s) in state_dict: "a.weight". \n',
    "\tsize mismatch for a: copying a param with shape torch.Size([0]) from checkpoint, the shape in current model is torch.Size([4]).\n",
    "\nThe above exception was the direct cause of the following exception:\n\n",
    "During handling of the above exception, another exception occurred:\n",
    "[rank1]: ",
    "\x1b[31m",
    "2026-12-02T18:00:00.123Z stderr F ",
    "Root Cause (first observed failure):\n",
    "  rank      : 1 (local_rank: 1)\n",
    "  exitcode  : -9 (pid: 1)\n",
    "\r\n",
    "\r",
    "    ^^^^^^\n",
]
texts = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=40)), max_size=60).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts)
def test_parse_never_raises(text):
    incident, lines = parse(text)
    assert incident.line_count == len(lines)
    incident.to_json()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(texts)
def test_classify_never_raises(rules, text):
    report = classify(text, rules=rules)
    data = report.to_json()
    assert data["schema_version"] == 1
    confidences = [h["confidence"] for h in data["hypotheses"]]
    assert confidences == sorted(confidences, reverse=True)
    assert all(0 <= c <= 1 for c in confidences)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000))
def test_decode_accepts_or_refuses_cleanly(data):
    try:
        log = decode_log(data, "<test>")
    except BadInput as exc:
        assert exc.message
    else:
        assert "\x00" not in log.text
        parse(log.text)
