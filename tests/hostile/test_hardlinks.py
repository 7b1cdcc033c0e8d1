"""Hard links out of the checkpoint (issue 40, finding 6). A name inside the root can be another name
of a file outside it (`ln /etc/shadow tag/x_optim_states.pt`); no path check sees it. Such a file is
reported by the path probe and never opened, by every reader (confine.open_regular); a file whose
names are all inside is read as usual. Real DeepSpeed checkpoints (copies of a cached baseline), real
hard links, `cp -al` / `cp -a` as a user would run them."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests import probe_checkpoints as pc
from tests.hostile import audit
from tests.hostile import paths as hp

LAYOUT = "z2-dp2-fp32"
SHARD = "zero_pp_rank_1_mp_rank_00_optim_states.pt"
HARD_LINK = "a hard link"


@pytest.fixture
def planted(tmp_path) -> hp.Planted:
    return hp.prepare(pc.baselines() / LAYOUT, tmp_path)


def run(capsys, *argv) -> tuple[int, str]:
    from triage.cli import main

    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    text = out.out + out.err
    assert code != 70 and "Traceback" not in text, text[-2000:]
    return code, out.out


def path_probe(out: str) -> dict:
    return next(p for p in json.loads(out)["probes"] if p["name"] == "path")


def link_out(p: hp.Planted, target: Path) -> Path:
    shard = p.tag_dir / SHARD
    shard.unlink()
    os.link(target, shard)
    return shard


def test_open_regular_refuses_a_hard_link_out_before_opening_it(tmp_path, monkeypatch):
    from triage.probe import confine, hardlinks

    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret").write_text(hp.MARKER)
    os.link(outside / "secret", root / "shard.pt")
    with audit.recording() as seen, pytest.raises(confine.Refused, match=HARD_LINK):
        confine.open_regular(str(root / "shard.pt"), str(root))
    assert not [e for e in seen if e.event == "open"]  # refused from its stat: never opened
    with pytest.raises(confine.Refused, match=HARD_LINK):  # no root: its names must be in its own dir
        confine.open_regular(str(root / "shard.pt"))
    monkeypatch.setenv(hardlinks.TRUST_HARDLINKS, "1")
    with confine.open_regular(str(root / "shard.pt"), str(root)) as f:
        assert f.read() == hp.MARKER.encode()


def test_open_regular_reads_a_file_whose_names_are_all_inside(tmp_path):
    from triage.probe import confine

    (tmp_path / "tag" / "sub").mkdir(parents=True)
    (tmp_path / "tag" / "shard.pt").write_bytes(b"PK\3\4")
    os.link(tmp_path / "tag" / "shard.pt", tmp_path / "tag" / "sub" / "again.pt")
    with confine.open_regular(str(tmp_path / "tag" / "shard.pt"), str(tmp_path)) as f:
        assert f.read() == b"PK\3\4"
    assert confine.refusal(str(tmp_path / "tag"), str(tmp_path / "tag" / "shard.pt")) is None


def test_one_walk_counts_the_names_of_every_file_and_a_new_link_is_seen(tmp_path):
    """A bound on work, not time: 20 files linked inside cost one walk (a scandir of each dir), not 20;
    a link made later (it changes the file's link count and ctime) is seen, and refused."""
    from triage.probe import confine

    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    for i in range(20):
        (root / f"f{i}").write_bytes(b"mine")
        os.link(root / f"f{i}", root / "sub" / f"f{i}")
    with audit.recording() as seen:
        for i in range(20):
            with confine.open_regular(str(root / f"f{i}"), str(root)) as f:
                assert f.read() == b"mine"
    assert sorted(e.path for e in seen if e.event == "os.scandir") == [str(root), str(root / "sub")]
    os.link(root / "f3", outside / "f3")
    with pytest.raises(confine.Refused, match=HARD_LINK):
        confine.open_regular(str(root / "f3"), str(root))


def test_probe_reports_a_hard_linked_shard_and_reads_none_of_it(planted, capsys):
    """Before: the integrity probe printed the secret's first 8 bytes ("not a zip archive (starts with
    72 6f 6f 74 ...")."""
    shard = link_out(planted, planted.secret)
    with audit.recording() as seen:
        code, out = run(capsys, "probe", planted.root, "--json")
    assert code == 1
    path = path_probe(out)
    assert path["status"] == "confirmed" and "unsafe_path" in path["signals"], path
    assert any(SHARD in line and HARD_LINK in line for line in path["evidence"]), path["evidence"]
    first8 = planted.secret.read_bytes()[:8]
    assert hp.MARKER not in out and first8.hex(" ") not in out and first8.hex() not in out
    secret = audit.inodes(planted.outside)
    assert not [e for e in seen if e.event == "open" and e.inode in secret], str(shard)


def test_manifest_refuses_to_hash_a_hard_link_out(planted, capsys):
    """Before: `manifest --force` hashed the secret into the checkpoint's manifest (exit 0)."""
    link_out(planted, planted.secret)
    code, _ = run(capsys, "manifest", planted.root, "--force")
    assert code == 3
    assert not (planted.tag_dir / "ds-triage-manifest.json").exists()


def test_verify_does_not_vouch_for_a_hard_link_out(planted, capsys):
    """The shard replaced, after the manifest, by a hard link to an identical copy outside: before, the
    manifest check hashed the outside file, found the sha256 equal and called the tag healthy."""
    assert run(capsys, "manifest", planted.root)[0] == 0
    link_out(planted, planted.outside / planted.tag / SHARD)
    code, out = run(capsys, "verify", planted.root, "--json")
    assert code == 1
    problems = json.loads(out)["manifest"]["problems"]
    assert any(SHARD in p and HARD_LINK in p for p in problems), problems


def test_a_cp_al_snapshot_is_refused_and_a_copy_or_the_override_is_read(planted, capsys, monkeypatch):
    """`cp -al` (a snapshot sharing every file with the original) is refused: its files have names
    outside it. The two ways out the message gives both work: a copy (`cp -a`), or the variable."""
    from triage.probe import hardlinks

    snapshot, copy = planted.base / "snapshot", planted.base / "copy"
    subprocess.run(["cp", "-al", str(planted.root), str(snapshot)], check=True)
    code, out = run(capsys, "probe", snapshot, "--json")
    path = path_probe(out)
    assert code == 1 and "unsafe_path" in path["signals"], path
    assert sum(HARD_LINK in line for line in path["evidence"]) == 4, path["evidence"]  # latest, 3 shards
    subprocess.run(["cp", "-a", str(snapshot), str(copy)], check=True)
    assert run(capsys, "probe", copy, "--json")[0] == 0
    monkeypatch.setenv(hardlinks.TRUST_HARDLINKS, "1")
    code, out = run(capsys, "probe", snapshot, "--json")
    assert code == 0 and path_probe(out)["status"] == "refuted", out


def test_a_framework_file_hard_linked_out_is_named_and_not_read(planted, capsys):
    """A Trainer's scheduler.pt beside the shards (read on resume, so checked by the integrity probe)
    that is the secret: before, the integrity probe printed its first 8 bytes and nothing named it."""
    os.link(planted.secret, planted.root / "scheduler.pt")
    code, out = run(capsys, "probe", planted.root, "--json")
    path = path_probe(out)
    assert code == 1 and "unsafe_path" in path["signals"], path
    assert any("'scheduler.pt': a hard link" in line for line in path["evidence"]), path["evidence"]
    first8 = planted.secret.read_bytes()[:8]
    assert hp.MARKER not in out and first8.hex(" ") not in out and first8.hex() not in out
