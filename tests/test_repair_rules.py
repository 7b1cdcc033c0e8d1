"""Rules name repair actions that exist: the schema's enum is the registry, and a name outside
the registry is a lint problem with its file and line (triage/kb/validate.py)."""

import json

from triage.errors import BadRules
from triage.kb import load_rules
from triage.repair import registry
from tests.conftest import ROOT
from tests.rule_files import rules_dir, valid_rule


def test_schema_enum_is_the_registry():
    schema = json.loads((ROOT / "rules" / "schema.json").read_text())
    assert tuple(schema["properties"]["repairs"]["items"]["enum"]) == registry.names()


def test_every_action_has_its_module_functions():
    for name in registry.names():
        module = registry.action(name)
        assert callable(module.plan) and callable(module.execute) and callable(module.structural), name


def test_every_named_repair_exists(rules):
    named = {r for rule in rules.rules for r in rule.data.get("repairs", [])}
    assert named == set(registry.names())  # each action is offered by some rule, and no rule names another


def test_unknown_action_is_reported_with_its_line(tmp_path):
    directory = rules_dir(tmp_path, {"DS-T001-test.yaml": valid_rule() + "repairs: [latest, merge]\n"})
    schema = json.loads((directory / "schema.json").read_text())
    schema["properties"]["repairs"]["items"]["enum"].append("merge")  # a schema ahead of the registry
    (directory / "schema.json").write_text(json.dumps(schema))
    try:
        load_rules(directory, use_cache=False)
    except BadRules as exc:
        problems = exc.problems
    else:
        raise AssertionError("the unknown repair action was accepted")
    [problem] = problems
    line = (directory / "DS-T001-test.yaml").read_text().splitlines().index("repairs: [latest, merge]") + 1
    assert f"DS-T001-test.yaml:{line}:" in problem and "repair action 'merge' does not exist" in problem
    assert "triage/repair/registry.py" in problem
