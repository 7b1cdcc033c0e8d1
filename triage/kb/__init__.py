"""The knowledge base: YAML rules, validated, compiled and cached."""

from triage.kb.index import RuleSet, load_rules

__all__ = ["RuleSet", "load_rules"]
