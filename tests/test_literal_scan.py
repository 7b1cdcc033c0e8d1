"""The one-pass literal scan answers exactly what a substring test per literal answers."""

from __future__ import annotations

from pathlib import Path

import hyperscan

from triage.kb import literal_scan, load_rules
from triage.kb.regex import known_literals

ROOT = Path(__file__).resolve().parents[1]


def _logs() -> list[Path]:
    return sorted((ROOT / "corpus" / "cases").glob("*.log")) + sorted((ROOT / "corpus" / "field").rglob("*.log"))


def test_scan_equals_substring_tests_on_every_corpus_log():
    load_rules()
    literals = known_literals()
    assert len(literals) > 100  # every rule's literals, not a handful
    scanner = literal_scan.LiteralScanner(hyperscan, literals)
    non_ascii = 0
    for log in _logs():
        text = log.read_text(errors="replace")
        non_ascii += not text.isascii()
        answer = scanner.present(text.encode("utf-8", "replace"))
        assert answer == {literal: literal in text for literal in literals if literal}, log.name
    assert non_ascii  # real logs with non-ASCII text are among them


def test_a_literal_with_non_ascii_and_regex_characters_is_matched_as_bytes():
    scanner = literal_scan.LiteralScanner(hyperscan, frozenset({"a.b", "(x)*", "naïve", "\\d", "tab\there"}))
    text = "axb (x)* naïve tab\there"
    assert scanner.present(text.encode()) == {"a.b": False, "(x)*": True, "naïve": True, "\\d": False, "tab\there": True}


def test_the_database_is_built_at_the_second_log_only(monkeypatch):
    monkeypatch.setattr(literal_scan, "_seen", 0)
    monkeypatch.setattr(literal_scan, "_scanner", None)
    monkeypatch.setattr(literal_scan, "_unavailable", False)
    literals = frozenset({"Traceback", "KeyError"})
    assert literal_scan.presence("Traceback (most recent call last):", literals) == {}
    assert literal_scan.presence("KeyError: 'x'", literals) == {"Traceback": False, "KeyError": True}
    # a literal the database lacks (rules loaded later) rebuilds it with the old ones kept
    more = literal_scan.presence("ValueError", frozenset({"ValueError"}))
    assert more == {"Traceback": False, "KeyError": False, "ValueError": True}
