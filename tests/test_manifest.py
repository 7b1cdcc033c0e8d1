"""`ds-triage manifest`: one new file in the tag dir, with every file's size and sha256, matching
its schema; never overwritten; refused on a broken tag unless --force."""

import hashlib
import json

import pytest

from tests import probe_checkpoints as pc
from tests.test_probe_cli import _validator, errors
from triage.manifest import MANIFEST_NAME

pytestmark = pytest.mark.slow
SCHEMA = _validator("manifest.schema.json")


def test_manifest_lists_every_file_and_is_the_only_write(cli):
    root = pc.copy_of(pc.HEALTHY, "manifest")
    before = pc.snapshot(root)
    proc = cli("manifest", root)
    assert proc.returncode == 0, proc.stderr.decode()
    path = root / "global_step3" / MANIFEST_NAME
    assert proc.stdout.decode() == f"wrote {path}\n"
    assert "MB/s" in proc.stderr.decode() and "hashed 3 file(s)" in proc.stderr.decode()
    manifest = json.loads(path.read_text())
    assert errors(SCHEMA, manifest) == []
    shards = sorted((root / "global_step3").glob("*.pt"))
    assert [f["path"] for f in manifest["files"]] == [p.name for p in shards]
    for entry, shard in zip(manifest["files"], shards):
        assert entry["sha256"] == hashlib.sha256(shard.read_bytes()).hexdigest()
        assert entry["size"] == shard.stat().st_size
    assert manifest["layout"]["stage"] == 2 and manifest["layout"]["dp"] == 2
    assert manifest["versions"]["ds_version_saved"] == manifest["versions"]["deepspeed"]
    after = pc.snapshot(root)
    assert {p for p in after if before.get(p) != after[p]} == {str(path), str(root / "global_step3")}


def test_an_existing_manifest_is_never_overwritten(cli):
    root = pc.copy_of(pc.HEALTHY, "manifest-twice")
    assert cli("manifest", root).returncode == 0
    path = root / "global_step3" / MANIFEST_NAME
    first = path.read_bytes()
    proc = cli("manifest", root)
    assert proc.returncode == 1 and "never overwrites" in proc.stderr.decode()
    assert path.read_bytes() == first


def test_a_broken_tag_gets_no_manifest_unless_forced(cli):
    root = pc.copy_of("zero2-dp2-optim-shard-truncated", "manifest-broken")
    proc = cli("manifest", root)
    assert proc.returncode == 1 and "truncated" in proc.stderr.decode()
    assert not (root / "global_step3" / MANIFEST_NAME).exists()
    assert cli("manifest", root, "--force", "--json").returncode == 0
    assert (root / "global_step3" / MANIFEST_NAME).exists()


def test_manifest_of_a_missing_path_is_bad_input(cli):
    proc = cli("manifest", "/no/such/ckpt")
    assert proc.returncode == 3 and "no such file" in proc.stderr.decode()
