"""`ds-triage verify`: the probes as a gate, and the manifest catching what the structure cannot:
a flipped byte inside tensor data (no --deep), a short file, a missing one, an added one."""

import json
import struct
import zipfile

import pytest

from tests import probe_checkpoints as pc
from tests.test_probe_cli import _validator, errors

pytestmark = pytest.mark.slow
SCHEMA = _validator("verify.schema.json")
SHARD = "global_step3/zero_pp_rank_0_mp_rank_00_optim_states.pt"


def with_manifest(cli, name):
    root = pc.copy_of(pc.HEALTHY, name)
    assert cli("manifest", root).returncode == 0
    return root


def verify(cli, root, *args):
    proc = cli("verify", root, "--json", *args)
    data = json.loads(proc.stdout)
    assert errors(SCHEMA, data) == []
    assert proc.returncode == (0 if data["healthy"] else 1)
    return data


def flip_tensor_byte(path):
    """Flip one bit in the middle of the largest tensor record: the zip structure stays whole."""
    with zipfile.ZipFile(path) as zf:
        info = max((i for i in zf.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
    with open(path, "r+b") as f:
        f.seek(info.header_offset)
        name_len, extra_len = struct.unpack("<HH", f.read(30)[26:30])
        offset = info.header_offset + 30 + name_len + extra_len + info.file_size // 2
        f.seek(offset)
        byte = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([byte ^ 0x01]))


def test_healthy_with_and_without_a_manifest(cli):
    root = pc.copy_of(pc.HEALTHY, "verify-plain")
    data = verify(cli, root)
    assert data["healthy"] and data["manifest"] is None and "no manifest at" in data["manifest_note"]
    assert cli("manifest", root).returncode == 0
    data = verify(cli, root)
    assert data["healthy"] and data["manifest"]["ok"] and data["manifest"]["files"] == 3
    text = cli("verify", root).stdout.decode()
    assert "every file matches" in text and text.rstrip().endswith("verdict: healthy")


def test_bit_rot_the_structure_misses(cli):
    root = with_manifest(cli, "verify-bitrot")
    flip_tensor_byte(root / SHARD)
    assert cli("probe", root).returncode == 0  # zip structure and pickle still read as whole
    data = verify(cli, root)
    assert not data["healthy"]
    assert [p for p in data["problems"] if p.startswith("manifest: ")] == data["problems"]
    assert "zero_pp_rank_0_mp_rank_00_optim_states.pt: sha256" in data["problems"][0]
    assert verify(cli, root, "--sizes-only")["healthy"]  # the size did not change
    deep = verify(cli, root, "--deep")
    assert any(p.startswith("integrity: ") and "crc_mismatch" in p for p in deep["problems"])


@pytest.mark.parametrize("damage,expect", [
    ("short", "bytes, the manifest says"),
    ("missing", "missing (the manifest lists"),
    ("added", "not in the manifest"),
])
def test_partial_copies(cli, damage, expect):
    root = with_manifest(cli, f"verify-{damage}")
    path = root / SHARD
    if damage == "short":
        path.write_bytes(path.read_bytes()[:1000])
    elif damage == "missing":
        path.unlink()
    else:
        (root / "global_step3" / "notes.txt").write_text("added later")
    data = verify(cli, root, "--sizes-only")
    assert not data["healthy"]
    assert any(p.startswith("manifest: ") and expect in p for p in data["problems"]), data["problems"]


def test_a_broken_checkpoint_fails_the_gate_without_a_manifest(cli):
    data = verify(cli, pc.scenario("zero2-dp2-optim-shard-deleted"))
    assert not data["healthy"] and any(p.startswith("completeness: missing 1 of 2") for p in data["problems"])


@pytest.mark.parametrize("args,message", [(("/no/such/ckpt",), "no such file"),
                                          (("{root}", "--manifest", "/no/such.json"), "--manifest"),
                                          (("{root}", "--manifest", "{root}/latest"), "not JSON")])
def test_bad_input_is_exit_3(cli, args, message):
    root = pc.scenario(pc.HEALTHY)
    proc = cli("verify", *[a.format(root=root) for a in args])
    assert proc.returncode == 3 and message in proc.stderr.decode()


def test_junit_xml_shows_the_gate_to_ci(cli, tmp_path):
    """--junit: a testcase per probe, the manifest and the trust walk; the failures are the problems."""
    import xml.etree.ElementTree as ET

    root = with_manifest(cli, "verify-junit")
    healthy = ET.parse(_junit(cli, root, tmp_path / "healthy.xml", 0)).getroot()
    names = [c.get("name") for c in healthy.iter("testcase")]
    assert {"integrity", "manifest", "trust"} <= set(names) and healthy.get("failures") == "0"
    assert healthy.get("tests") == str(len(names))
    flip_tensor_byte(root / SHARD)
    broken = ET.parse(_junit(cli, root, tmp_path / "broken.xml", 1)).getroot()
    [failed] = [c for c in broken.iter("testcase") if c.find("failure") is not None]
    assert failed.get("name") == "manifest" and broken.get("failures") == "1"
    assert "zero_pp_rank_0_mp_rank_00_optim_states.pt: sha256" in failed.find("failure").text
    proc = cli("verify", root, "--junit", tmp_path / "no" / "dir.xml")
    assert proc.returncode == 3 and b"--junit" in proc.stderr


def _junit(cli, root, path, code):
    proc = cli("verify", root, "--junit", path)
    assert proc.returncode == code, proc.stderr
    return path


def test_a_load_dir_one_level_off_fails_verify(cli):
    """The load's silent fault: load_checkpoint(dir) of the tag dir, or of the root's parent, returns
    (None, None). The checkpoint is whole; told the dir the job passes, verify fails."""
    root = pc.scenario(pc.HEALTHY)
    assert verify(cli, root, "--load-dir", str(root))["healthy"]
    for off in (root / "global_step3", root.parent):
        data = verify(cli, root, "--load-dir", str(off))
        assert not data["healthy"] and any(p.startswith("path: ") and str(off) in p for p in data["problems"]), data


def test_a_missing_latest_fails_verify(cli):
    """A silent fault without --deep: load_checkpoint(dir) returns (None, None) and the job trains from scratch."""
    data = verify(cli, pc.copy_of("zero3-dp2-latest-deleted", "verify-latest"))
    assert not data["healthy"] and any(p.startswith("latest: ") and "(None, None)" in p for p in data["problems"])
