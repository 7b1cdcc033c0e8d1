"""The JSON schemas validate as shipped (issue 20, point 8): docs/schemas/bundled/ holds each schema
with the ones it refers to embedded, so a plain `jsonschema.validate`, with no registry and no
network, checks real command output against it, cross-file references included."""

import json

import jsonschema
import pytest

from tests import probe_checkpoints as pc
from tests.conftest import ROOT
from triage.runbook.schema_bundle import bundle, references

BUNDLED = ROOT / "docs" / "schemas" / "bundled"
DEMO = ROOT / "corpus" / "cases" / "job-zero3-train-then-stage2-load.log"
ZERO3_LOG = ROOT / "corpus" / "cases" / "zero3-saved-stage2-load-dp2.log"


def plain(name: str, instance) -> None:
    jsonschema.validate(instance, json.loads((BUNDLED / name).read_text()))


def test_every_schema_has_a_bundle_whose_references_all_resolve_inside_it():
    sources = sorted((ROOT / "docs" / "schemas").glob("*.schema.json"))
    assert sorted(p.name for p in BUNDLED.glob("*.schema.json")) == [p.name for p in sources]
    for path in sources:
        bundled = json.loads((BUNDLED / path.name).read_text())
        assert references(json.loads(path.read_text())) <= set(bundled.get("$defs", {}))
        jsonschema.Draft202012Validator.check_schema(bundled)


def test_the_unbundled_schema_is_what_a_plain_validator_cannot_resolve():
    """Why the bundles exist: the files refer to each other under an $id no server answers."""
    with pytest.raises(Exception, match="Unresolvable"):
        jsonschema.validate({}, json.loads((ROOT / "docs" / "schemas" / "triage.schema.json").read_text()))


def test_bundle_embeds_references_of_references():
    schemas = {"a.json": {"$id": "https://x.invalid/a.json", "$ref": "b.json"},
               "b.json": {"$id": "https://x.invalid/b.json", "$ref": "c.json#/$defs/n"},
               "c.json": {"$id": "https://x.invalid/c.json", "$defs": {"n": {"type": "integer"}}}}
    a = bundle("a.json", schemas)
    assert set(a["$defs"]) == {"b.json", "c.json"}
    jsonschema.validate(3, a)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate("three", a)


def test_real_classify_runbook_and_stream_output_validates_plainly(cli):
    plain("classify.schema.json", json.loads(cli("classify", DEMO, "--json").stdout))
    plain("runbook.schema.json", json.loads(cli("runbook", "DS-Z001", "--json").stdout))
    stream = cli("stream", "-", stdin=DEMO.read_bytes())
    incidents = [json.loads(line) for line in stream.stdout.decode().splitlines()]
    assert incidents
    for incident in incidents:
        plain("stream.schema.json", incident)  # its classification is classify.schema.json, embedded


def test_real_triage_and_probe_output_validates_plainly_and_cross_file_rules_hold(cli):
    ckpt = pc.scenario(pc.ZERO3)
    triage = json.loads(cli("triage", "--log", ZERO3_LOG, "--ckpt", ckpt, "--json").stdout)
    plain("triage.schema.json", triage)
    plain("probe.schema.json", json.loads(cli("probe", ckpt, "--json").stdout))
    triage["verdict"]["category"] = "not_a_category"  # the enum lives in classify.schema.json
    with pytest.raises(jsonschema.ValidationError):
        plain("triage.schema.json", triage)
