"""The trust gate reads what DeepSpeed and its converters open (issue 40, findings 1, 2, 3 and 6).

Each test plants a real `__reduce__` payload (tests/hostile/payloads.py MarkerPayload, saved with
torch.save) where a DeepSpeed 0.19.8 load opens it and the old gate did not look: the tag
`latest_universal` names (read under checkpoint.load_universal), `zero/optimizer_state.pt` of a
universal checkpoint, a nested `mp_rank_*` file ds_to_universal's recursive walk picks up. Or it
plants a shard that is another file outside the root (a symlink, a hard link), whose first 8 bytes
the old gate printed. Real checkpoints: copies of the cached baselines (tests/probe_checkpoints.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import probe_checkpoints as pc
from tests.hostile import payloads
from tests.repair_support import ext_env
from triage.errors import EXIT_UNTRUSTED

ROOT = pc.ROOT
LAYOUT = "z2-dp2-fp32"
UNIVERSAL_TAG = payloads.TAG + "_universal"  # ds_to_universal's output, as the corpus names it
OUTSIDE_BYTES = b"Q7Z!k#9W"  # the outside file's first 8 bytes: never to be shown, in any form


def run(*args, timeout=600, env=None):
    full = dict(os.environ, NO_COLOR="1", PYTHONPATH=str(ROOT), **ext_env(), **(env or {}))
    return subprocess.run([sys.executable, "-m", "triage", *map(str, args)], capture_output=True, cwd=ROOT,
                          env=full, timeout=timeout)


def refused(proc, marker: Path, planted: str) -> None:
    err = proc.stderr.decode()
    assert proc.returncode == EXIT_UNTRUSTED, (proc.returncode, err[-3000:])
    assert "not verified safe" in err and planted in err and "Traceback" not in err, err
    assert not marker.exists(), "the payload ran"


def universal_config(tmp_path: Path) -> Path:
    config = tmp_path / "universal.json"
    config.write_text(json.dumps({"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 2},
                                  "checkpoint": {"load_universal": True}}))
    return config


def resave(path: Path, marker: Path) -> None:
    """A real torch.save of the file's own state plus the payload (as payloads.zip_payload does)."""
    import torch

    state = torch.load(path, map_location="cpu", weights_only=False)  # our own baseline: trusted
    state[payloads.PAYLOAD_KEY] = payloads.MarkerPayload(marker)
    torch.save(state, path)


@pytest.fixture(scope="module")
def universal_root(tmp_path_factory) -> Path:
    """A real universal checkpoint: the baseline and ds_to_universal's conversion of it beside it
    (`global_step3_universal`, with `zero/`), `latest_universal` written by the converter."""
    from corpus import layouts as L
    from corpus import runner

    root = payloads.copy_baseline(LAYOUT, tmp_path_factory.mktemp("universal") / "ckpt")
    log = root.parent / "convert.log"
    pre = {"run": "ds_to_universal", "flags": ["--inject_missing_state"]}
    rc = runner.run(runner.build_command(pre, L.LAYOUTS[LAYOUT], str(root)), ext_env(), log)
    assert rc == 0, log.read_text()[-2000:]
    assert (root / "latest_universal").read_text().strip() == UNIVERSAL_TAG
    assert (root / UNIVERSAL_TAG / "zero" / "optimizer_state.pt").is_file()
    return root


def copy_universal(universal_root: Path, dest: Path) -> Path:
    shutil.copytree(universal_root, dest, symlinks=True)
    return dest


# ---------------------------------------------------------------- finding 1: latest_universal

@pytest.mark.slow
def test_the_tag_latest_universal_names_is_read(tmp_path):
    """load_universal set: DeepSpeed reads the tag `latest_universal` names, not `latest`'s. A payload
    there is refused by probe --reproduce and fails verify (the old gate scanned `latest`'s tag only)."""
    root = payloads.copy_baseline(LAYOUT, tmp_path / "ckpt")
    other = payloads.copy_baseline(LAYOUT, tmp_path / "other")
    marker = tmp_path / "payload.marker"
    payloads.zip_payload(other, marker)
    (other / payloads.TAG).rename(root / "global_step9")
    (root / "latest_universal").write_text("global_step9")
    planted = "../global_step9/mp_rank_00_model_states.pt"  # named from the tag `latest` names

    proc = run("probe", root, "--reproduce", "--config", universal_config(tmp_path))
    refused(proc, marker, planted)

    proc = run("verify", root, "--json")
    data = json.loads(proc.stdout)
    assert proc.returncode == 1 and data["healthy"] is False, data["problems"]
    assert f"trust: {planted}: suspicious (its pickle names builtins.exec, which loading would run)" in data["problems"]
    assert "global_step9" in data["trust"]["tags"] and not marker.exists()


# ---------------------------------------------------------------- finding 2: zero/optimizer_state.pt

@pytest.mark.slow
def test_a_payload_in_zero_optimizer_state_is_refused(universal_root, tmp_path):
    """The universal load torch.loads `<tag>/zero/optimizer_state.pt` (weights_only=False) first thing;
    the old gate listed the tag's top level only. Loading the universal tag itself, as a tag dir."""
    root = copy_universal(universal_root, tmp_path / "ckpt")
    marker = tmp_path / "payload.marker"
    resave(root / UNIVERSAL_TAG / "zero" / "optimizer_state.pt", marker)
    proc = run("probe", root / UNIVERSAL_TAG, "--reproduce", "--config", universal_config(tmp_path))
    refused(proc, marker, "zero/optimizer_state.pt")


@pytest.mark.slow
def test_a_payload_in_a_parameter_state_file_is_refused(universal_root, tmp_path):
    """`zero/<param>/exp_avg.pt` and its siblings are torch.loaded too (universal_checkpoint.py)."""
    root = copy_universal(universal_root, tmp_path / "ckpt")
    marker = tmp_path / "payload.marker"
    exp_avg = sorted((root / UNIVERSAL_TAG / "zero").glob("*/exp_avg.pt"))[0]
    resave(exp_avg, marker)
    proc = run("probe", root, "--reproduce", "--config", universal_config(tmp_path))
    refused(proc, marker, f"../{UNIVERSAL_TAG}/zero/{exp_avg.parent.name}/exp_avg.pt")


# ---------------------------------------------------------------- finding 3: nested mp_rank_*

@pytest.mark.slow
def test_a_nested_mp_rank_file_is_refused_by_repair_universal(tmp_path):
    """ds_to_universal walks the tag recursively (os.walk) and torch.loads every `mp_rank_*` it finds."""
    root = payloads.copy_baseline(LAYOUT, tmp_path / "ckpt")
    marker = tmp_path / "payload.marker"
    nested = root / payloads.TAG / "old" / "mp_rank_00_model_states.pt"
    nested.parent.mkdir()
    shutil.copy(root / payloads.TAG / "mp_rank_00_model_states.pt", nested)
    resave(nested, marker)
    proc = run("repair", "universal", root, "--out", tmp_path / "out", "--apply")
    refused(proc, marker, "old/mp_rank_00_model_states.pt")
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------- finding 6: links out of the root

AUDIT = """
import os, sys
log = open(sys.argv[1], "w")
def hook(event, args):
    if event == "open" and isinstance(args[0], (str, bytes)):
        log.write(os.fsdecode(args[0]) + "\\n"); log.flush()
sys.addaudithook(hook)
from triage.cli import main
sys.exit(main(sys.argv[2:]))
"""


def audited(tmp_path: Path, *args) -> tuple[subprocess.CompletedProcess, set[str]]:
    """The CLI run with an audit hook that logs every path passed to open (builtins and os.open)."""
    opened = tmp_path / f"opened-{len(list(tmp_path.glob('opened-*')))}.txt"
    env = dict(os.environ, NO_COLOR="1", PYTHONPATH=str(ROOT), **ext_env())
    proc = subprocess.run([sys.executable, "-c", AUDIT, str(opened), *map(str, args)], capture_output=True,
                          cwd=ROOT, env=env, timeout=600)
    return proc, {os.path.abspath(p) for p in opened.read_text().splitlines()}


def outside_shard(tmp_path: Path, how: str) -> tuple[Path, Path, Path]:
    """A copy of the baseline whose model states file is another name of `outside/secret.pt` (8
    recognisable bytes, then the real shard's own), by a symlink or a hard link."""
    root = payloads.copy_baseline("z2-dp1-fp32", tmp_path / "ckpt")
    shard = root / payloads.TAG / "mp_rank_00_model_states.pt"
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.pt"
    secret.write_bytes(OUTSIDE_BYTES + shard.read_bytes())
    shard.unlink()
    (shard.symlink_to if how == "symlink" else lambda target: os.link(target, shard))(secret)
    return root, shard, secret


def never_shown(proc) -> None:
    out = proc.stdout + proc.stderr
    for form in (OUTSIDE_BYTES, OUTSIDE_BYTES.hex().encode(), OUTSIDE_BYTES.hex(" ").encode(),
                 OUTSIDE_BYTES[:4], OUTSIDE_BYTES.hex()[:8].encode()):
        assert form not in out, f"the outside file's bytes were shown: {out[-2000:]!r}"
    assert b"Traceback" not in out and proc.returncode != 70, out[-2000:]


@pytest.mark.parametrize("how", ["symlink", "hardlink"])
def test_a_shard_that_is_a_file_outside_is_refused_unread(how, tmp_path):
    """verify and the gate's commands report the shard by name and never open it (audited): repair
    refuses it in planning (exit 1) or at the gate (exit 5), probe --reproduce at the gate."""
    root, shard, secret = outside_shard(tmp_path, how)
    before = secret.read_bytes()
    for args, codes in ((("verify", root), {1}), (("repair", "fp32", root, "--out", tmp_path / "out", "--apply"),
                                                 {1, EXIT_UNTRUSTED}),
                        (("probe", root, "--reproduce"), {EXIT_UNTRUSTED})):
        proc, opened = audited(tmp_path, *args)
        never_shown(proc)
        assert proc.returncode in codes, (args, proc.returncode, proc.stderr.decode()[-2000:])
        assert str(secret) not in opened and str(shard) not in opened, f"{args}: opened the file outside"
        if proc.returncode == EXIT_UNTRUSTED:
            err = proc.stderr.decode()
            assert "mp_rank_00_model_states.pt" in err and "not verified safe" in err, err
    proc, opened = audited(tmp_path, "verify", root, "--json")
    never_shown(proc)
    assert str(secret) not in opened and str(shard) not in opened
    problems = json.loads(proc.stdout)["problems"]
    expected = "leads outside the checkpoint root" if how == "symlink" else "a hard link"
    assert any(p.startswith("trust: mp_rank_00_model_states.pt: unverifiable") and expected in p
               for p in problems), problems
    assert secret.read_bytes() == before and not (tmp_path / "out").exists()
