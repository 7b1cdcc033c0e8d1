"""Manifests: every file of a tag with its size and sha256, the layout and the versions, kept
beside the shards as `<tag>/ds-triage-manifest.json` (triage/manifest/build.py writes it,
check.py compares a tag with it). A tag is what is saved, copied and named by `latest`, so its
manifest travels with it."""

MANIFEST_NAME = "ds-triage-manifest.json"
SCHEMA_VERSION = 1
