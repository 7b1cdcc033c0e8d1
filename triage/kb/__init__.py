"""The knowledge base: YAML rules, validated, compiled and cached; and what they cover.

In: `rules/` (or `--rules DIR`). Out: a `RuleSet` (`index.load_rules`, validated by `validate`
against `rules/schema.json`, cached as JSON). `sites` catalogues every raise/assert site on
DeepSpeed's load path, `coverage` maps each to the rules that cover it, `readable` turns
regexes into the text a person sees.
"""

from triage.kb.index import RuleSet, load_rules

__all__ = ["RuleSet", "load_rules"]
