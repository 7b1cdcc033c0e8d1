"""docs/reference/: the JSON output schemas rendered as pages (triage/runbook/schema_docs.py, via `ds-triage rules docs`).

Freshness against disk is tests/test_docs.py's (the pages are part of `docgen.generate`); the
site build with its link and anchor checks is tests/test_site.py's.
"""

import re

import pytest

from tests.conftest import ROOT
from triage.runbook import docgen
from triage.runbook.schema_docs import reference_pages, rows, schema_page

SCHEMAS = ROOT / "docs" / "schemas"
LINK = re.compile(r"\]\(([\w-]+\.md)?(?:#([\w-]+))?\)")


@pytest.fixture(scope="module")
def schemas():
    return docgen.load_schemas(SCHEMAS)


@pytest.fixture(scope="module")
def pages(schemas):
    return reference_pages(schemas, lambda file: f"../schemas/{file}")


def _refs(node):
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def test_every_schema_has_a_page_listed_in_the_index(schemas, pages):
    files = sorted(p.name for p in SCHEMAS.glob("*.schema.json"))
    assert len(files) >= 9 and sorted(schemas) == files
    index = pages["reference/index.md"]
    for file in files:
        name = file.removesuffix(".schema.json")
        page = pages[f"reference/{name}.md"]
        assert f"Generated from [docs/schemas/{file}](../schemas/{file}) by `ds-triage rules docs`" in page
        row = next(line for line in index.splitlines() if line.startswith(f"| [{name}]({name}.md) |"))
        assert "`ds-triage " in row and row.endswith(f"| [{file}](../schemas/{file}) |"), row
    assert set(pages) == {"reference/index.md"} | {f"reference/{f.removesuffix('.schema.json')}.md" for f in files}


def test_generate_writes_them_with_links_to_the_schema_files(rules):
    files = docgen.generate(rules, ROOT / "docs", sites=[], versions={})
    assert {k: v for k, v in files.items() if k.startswith("reference/")} == reference_pages(
        docgen.load_schemas(SCHEMAS), lambda file: f"../schemas/{file}")


def test_required_fields_appear_in_the_page(schemas, pages):
    for file, schema in schemas.items():
        page = pages[f"reference/{file.removesuffix('.schema.json')}.md"]
        parts = [schema, *schema.get("allOf", []), *schema.get("$defs", {}).values()]
        required = {name for part in parts for name in part.get("required", [])}
        assert required or file == "stream.schema.json", file
        missing = [name for name in required if f"| `{name}` |" not in page]
        assert not missing, f"{file}: {missing}"


def test_each_def_renders_once_and_fields_link_to_it(schemas, pages):
    for file, schema in schemas.items():
        page = pages[f"reference/{file.removesuffix('.schema.json')}.md"]
        for name in schema.get("$defs", {}):
            assert page.count(f"\n### {name}\n") == 1, (file, name)
        for ref in _refs(schema):
            if ref.startswith("#/$defs/"):
                assert f"](#{ref.removeprefix('#/$defs/')})" in page, (file, ref)
    classify = pages["reference/classify.md"]
    assert classify.count('`"zero_stage_mismatch"`') == 1  # the category enum, not expanded at each use
    assert "| `hypotheses[].category` | [category](#category) | yes |" in classify


def test_cross_file_refs_link_to_generated_pages_and_sections(schemas, pages):
    seen = 0
    for file, schema in schemas.items():
        page = pages[f"reference/{file.removesuffix('.schema.json')}.md"]
        for ref in _refs(schema):
            target, _, pointer = ref.partition("#")
            if target:
                name = target.removesuffix(".schema.json")
                anchor = f"#{pointer.removeprefix('/$defs/')}" if pointer else ""
                assert f"]({name}.md{anchor})" in page, (file, ref)
                seen += 1
        for target, anchor in LINK.findall(page):
            linked = pages.get(f"reference/{target}") if target else page
            assert linked is not None, (file, target)
            assert not anchor or f"\n### {anchor}\n" in linked, (file, target, anchor)
    assert seen >= 5
    assert "| `checkpoint` | [probe: checkpoint](probe.md#checkpoint) | yes |" in pages["reference/verify.md"]
    assert "| `classification` | [classify](classify.md) | yes |" in pages["reference/stream.md"]


SMALL = {
    "title": "small --json",
    "description": "A small | report.",
    "type": "object",
    "required": ["id", "where", "items"],
    "properties": {
        "id": {"type": "string", "pattern": "^X-\\d+$", "description": "the id"},
        "where": {"oneOf": [{"type": "null"}, {
            "type": "object", "required": ["path"],
            "properties": {"path": {"type": "string"}, "line": {"type": ["integer", "null"], "minimum": 1}},
            "description": "where it was found"}]},
        "items": {"type": "array", "maxItems": 3, "items": {
            "type": "object", "required": ["kind"],
            "properties": {"kind": {"enum": ["a", "b", None]}, "node": {"$ref": "#/$defs/node"}}}},
        "tags": {"type": "object", "additionalProperties": {"type": ["string", "null"]}},
        "other": {"$ref": "other.schema.json#/$defs/thing"},
        "version": {"const": 2},
    },
    "$defs": {
        "node": {"type": "object", "required": ["children"], "description": "a tree node",
                 "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}},
    },
}


def test_a_small_schema_gives_the_expected_rows():
    assert rows(SMALL) == [
        ("id", "string matching `^X-\\d+$`", "yes", "the id"),
        ("where", "object or null", "yes", "where it was found"),
        ("where.path", "string", "yes", ""),
        ("where.line", "integer ≥ 1 or null", "no", ""),
        ("items", "array of object, at most 3", "yes", ""),
        ("items[].kind", 'one of `"a"`, `"b"`, `null`', "yes", ""),
        ("items[].node", "[node](#node)", "no", ""),
        ("tags", "map of (string or null)", "no", ""),
        ("other", "[other: thing](other.md#thing)", "no", ""),
        ("version", "always `2`", "no", ""),
    ]
    page = schema_page("small.schema.json", SMALL, "../schemas/small.schema.json")
    assert page.splitlines()[:3] == [
        "<!-- Generated by `ds-triage rules docs` from docs/schemas/small.schema.json. "
        "Do not edit: edit the schema and regenerate. -->", "", "# small --json"]
    assert "A small \\| report." in page
    assert "| `where.line` | integer ≥ 1 or null | no |  |" in page
    # The self-referencing def is one section with one row, linking to itself.
    assert page.count("\n### node\n") == 1
    assert page.endswith("### node\n\na tree node\n\n| field | type | required | description |\n|---|---|---|---|\n"
                         "| `children` | array of [node](#node) | yes |  |\n")


def test_an_extension_defers_to_its_base_for_what_it_does_not_require():
    extended = {"allOf": [{"$ref": "base.schema.json"},
                          {"type": "object", "required": ["extra"],
                           "properties": {"extra": {"type": "boolean"}, "kind": {"description": "re-described"}}}]}
    assert rows(extended) == [("extra", "boolean", "yes", ""),
                              ("kind", "—", "as in [base](base.md)", "re-described")]


def test_stale_and_removed_schema_pages(tmp_path, pages):
    docgen.write(tmp_path, pages)
    assert docgen.stale(tmp_path, pages) == []
    (tmp_path / "reference" / "gone.md").write_text("a page of a schema that is gone\n")
    (tmp_path / "reference" / "notes.txt").write_text("not a page\n")
    page = tmp_path / "reference" / "classify.md"
    page.write_text(page.read_text() + "hand edit\n")
    assert docgen.stale(tmp_path, pages) == [f"changed {page}", f"extra {tmp_path / 'reference' / 'gone.md'}"]
    docgen.write(tmp_path, pages)
    assert not (tmp_path / "reference" / "gone.md").exists() and (tmp_path / "reference" / "notes.txt").exists()
    assert docgen.stale(tmp_path, pages) == []
