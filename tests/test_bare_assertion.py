"""A bare `AssertionError` pasted without its frames (triage.classify.bare): every cause of a bare
assert on the load path, at low confidence, the reported ones first, each asking for the frames."""

import json
import re

from tests.conftest import ROOT, corpus_log
from triage.classify import messages
from triage.classify.bare import REPORTS_NAME, load_reports
from triage.classify.classifier import classify
from triage.eval import pastes

# Real corpus logs ending in DeepSpeed's bare check_ckpt_list assertion, for two different causes.
DELETED = "cases/zero0-dp1-model-states-deleted.log"  # missing_file
STAGE = "cases/zero1-saved-stage3-load-dp1.log"  # zero_stage_mismatch


def _exception_line(rules, name: str) -> str:
    text = corpus_log(name)
    exc = classify(text, rules=rules).incident.primary
    return pastes.PASTES[0].cut(pastes.log_lines(text), exc)


def test_a_frameless_bare_assertion_names_every_cause_at_low_confidence(rules):
    for name in (DELETED, STAGE):
        line = _exception_line(rules, name)
        assert re.fullmatch(r"(\[rank\d\]: )?AssertionError", line), line
        report = classify(line, rules=rules)
        categories = [h.rule.category for h in report.hypotheses]
        # both causes the corpus shows for this very text are among the first three
        assert {"missing_file", "zero_stage_mismatch"} <= set(categories[:3]), categories
        # never a confident answer: below what a known site's message alone earns
        assert all(h.confidence < messages.WEAK for h in report.hypotheses)
        for h in report.hypotheses:  # each says what to paste to tell them apart
            assert any("paste the `File ...` lines" in e.why for e in h.evidence), h.rule.id


def test_the_most_reported_site_comes_first(rules):
    report = classify(_exception_line(rules, DELETED), rules=rules)
    reports = rules.bare_reports
    top_site = max(reports, key=reports.get)
    assert f"{top_site}: {reports[top_site]} public threads report it" in report.hypotheses[0].evidence[0].why
    assert report.hypotheses[0].confidence > report.hypotheses[-1].confidence


def test_with_its_frames_the_assertion_is_read_from_them_not_guessed(rules):
    report = classify(corpus_log(DELETED), rules=rules)
    assert report.category == "missing_file" and report.top.confidence >= 0.6
    assert not any("without frames" in e.why for h in report.hypotheses for e in h.evidence)


def test_an_assertion_with_a_message_or_another_bare_exception_is_not_a_bare_assertion(rules):
    for text in ("AssertionError: the batch size must be positive", "KeyError: 'learning_rate'"):
        report = classify(text, rules=rules)
        assert not any("without frames" in e.why for h in report.hypotheses for e in h.evidence), text


def test_the_report_counts_are_bare_asserts_of_the_catalogue_and_public_threads_outside_the_field_set(load_sites):
    data = json.loads((ROOT / "rules" / REPORTS_NAME).read_text())
    field = (ROOT / "corpus" / "field" / "manifest.yaml").read_text()
    assert data["sites"] and load_reports(ROOT / "rules") == {s: len(e["threads"]) for s, e in data["sites"].items()}
    sites, _ = load_sites
    bare = {f"{s.package}/{s.file} {s.function}" for s in sites if s.kind == "assert" and not s.message}
    for site, entry in data["sites"].items():
        assert site in bare, site
        assert entry["threads"] and len(set(entry["threads"])) == len(entry["threads"])
        for url in entry["threads"]:
            assert url.startswith("https://github.com/") and url not in field, url  # the field set stays held out


def test_the_report_says_it_is_a_low_confidence_guess_and_what_to_paste(rules):
    from triage.classify.render import LOW_CONFIDENCE, render_report

    report = classify(_exception_line(rules, STAGE), rules=rules)
    guess = render_report(report)
    assert f"low confidence ({report.top.confidence:.2f})" in guess
    assert "paste more of the log" in guess
    whole = classify(corpus_log(STAGE), rules=rules)
    assert whole.top.confidence >= LOW_CONFIDENCE and "low confidence" not in render_report(whole)
