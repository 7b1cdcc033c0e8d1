"""Self-contained copies of the JSON output schemas, for validators with no registry.

The schemas in docs/schemas/ refer to each other by file name (`classify.schema.json#/$defs/...`)
under a base `$id` no server answers, so a plain `jsonschema.validate` cannot resolve them. The
bundle of a schema embeds every schema it refers to, directly or not, under `$defs` with its own
`$id` (a JSON Schema 2020-12 compound document): the references resolve inside the file.
"""

from __future__ import annotations

import json

BUNDLED = "schemas/bundled"  # under docs/


def references(schema) -> set[str]:
    """The schema files `schema` refers to (the part of each `$ref` before any '#')."""
    found: set[str] = set()
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and not ref.startswith("#") and ref.split("#", 1)[0]:
            found.add(ref.split("#", 1)[0])
        for value in schema.values():
            found |= references(value)
    elif isinstance(schema, list):
        for value in schema:
            found |= references(value)
    return found


def bundle(name: str, schemas: dict[str, dict]) -> dict:
    """`name`'s schema with every schema it needs embedded; KeyError names one that is missing."""
    needed, todo = set(), [name]
    while todo:
        for other in references(schemas[todo.pop()]) - needed - {name}:
            needed.add(other)
            todo.append(other)
    out = dict(schemas[name])
    embedded = {other: {k: v for k, v in schemas[other].items() if k != "$schema"} for other in sorted(needed)}
    if embedded:
        out["$defs"] = {**out.get("$defs", {}), **embedded}
    return out


def bundle_pages(schemas: dict[str, dict]) -> dict[str, str]:
    """{docs-relative path: JSON text} of every schema's bundle."""
    return {f"{BUNDLED}/{name}": json.dumps(bundle(name, schemas), indent=2, ensure_ascii=False) + "\n"
            for name in sorted(schemas)}
