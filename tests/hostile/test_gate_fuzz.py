"""Fuzz the trust gate's file discovery (triage/probe/load_files.py) over random layouts on disk.

Each example builds a checkpoint root beside an `outside` dir: tag dirs with DeepSpeed's file names
and others, nested dirs (`zero/<param>/`, `old/`), symlinks inside and out (files and dirs, loops),
hard links to outside files, FIFOs; `latest` and `latest_universal` naming a tag, a missing one, a
path out, or being a symlink out; an explicit tag or none; checkpoint.load_universal on or off. Then:

* every file DeepSpeed 0.19.8 would open (`deepspeed_opens`, its name logic read off engine.py,
  base_optimizer.py, universal_checkpoint.py, zero_to_fp32.py and ds_to_universal.py, run with the
  same glob/os.walk/listdir calls on the same tree) is either in the gate's list under a name the gate
  judges, or covered by a refusal (itself, a dir above it, or the pointer that named its tag);
* nothing in the list resolves outside the root;
* the gate's scan (trust.scan_load) opens nothing outside the root, and never opens a hard link out
  (an audit hook on `open` records every path).

No torch: the files hold a few bytes, so every judgement is quick.
"""

from __future__ import annotations

import glob
import os
import re
import sys
import tempfile
import threading

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triage.probe import load_files, trust

_OPENED = threading.local()


def _audit(event, args):
    record = getattr(_OPENED, "paths", None)
    if record is not None and event == "open" and isinstance(args[0], (str, bytes)):
        record.append(os.fsdecode(args[0]))


sys.addaudithook(_audit)  # records only inside `opened_by` (a thread-local list), cheap otherwise

TAGS = ("global_step1", "global_step2", "global_step2_universal")
DIRS = ("", "", "", "zero", "zero/w.weight", "zero/b.bias", "old", "old/deeper")
NAMES = ("mp_rank_00_model_states.pt", "mp_rank_01_model_states.pt", "zero_pp_rank_0_mp_rank_00_optim_states.pt",
         "zero_pp_rank_1_mp_rank_00_optim_states.pt", "bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt",
         "zero_pp_rank_0_mp_rank_00_model_states.pt", "zero_pp_rank_0_mp_rank_00optim_states.pt",
         "layer_01-model_00-model_states.pt", "layer_0_expert_0_mp_rank_00_model_states.pt",
         "expert_0_mp_rank_00_model_states.pt", "expp_rank_0_mp_rank_00_optim_states.pt", "extra_optim_states.pt",
         "optimizer_state.pt", "fp32.pt", "exp_avg.pt", "exp_avg_sq.pt", "step.pt", "fp32.pt.bak",
         "mp_rank_00", "layer_07", "fp16_zero_pp_rank_0", "notes.txt", "README", "weights.bin", "data.pth")
KINDS = ("file", "file", "file", "torch_magic", "symlink_in", "symlink_out", "symlink_out_dir", "symlink_in_dir",
         "hardlink_out", "fifo", "loop")
POINTER = st.one_of(st.none(), st.sampled_from(TAGS), st.just("global_step_gone"), st.just("../outside/tag"),
                    st.just("/proc/self"), st.just("old/../global_step1"), st.just("symlink_out"))

entry = st.tuples(st.sampled_from(DIRS), st.sampled_from(NAMES), st.sampled_from(KINDS))
layout = st.fixed_dictionaries({
    "tags": st.dictionaries(st.sampled_from(TAGS), st.lists(entry, max_size=10), min_size=1, max_size=3),
    "latest": POINTER, "latest_universal": POINTER,
    "tag": st.one_of(st.none(), st.sampled_from(TAGS)),
    "load_universal": st.booleans(),
})


def build(base: str, spec: dict) -> str:
    root, outside = os.path.join(base, "root"), os.path.join(base, "outside")
    os.makedirs(os.path.join(outside, "tag", "zero"))
    with open(os.path.join(outside, "secret.pt"), "wb") as f:
        f.write(b"OUTSIDE!")
    with open(os.path.join(outside, "tag", "mp_rank_00_model_states.pt"), "wb") as f:
        f.write(b"OUTSIDE!")
    os.makedirs(root)
    for tag, entries in spec["tags"].items():
        os.makedirs(os.path.join(root, tag), exist_ok=True)
        for where, name, kind in entries:
            parent = os.path.join(root, tag, where)
            os.makedirs(parent, exist_ok=True)
            _plant(os.path.join(parent, name), kind, root, outside)
    for pointer in ("latest", "latest_universal"):
        text = spec[pointer]
        path = os.path.join(root, pointer)
        if text == "symlink_out":
            with open(os.path.join(outside, pointer), "w") as f:
                f.write("../outside/tag")
            os.symlink(os.path.join(outside, pointer), path)
        elif text is not None:
            with open(path, "w") as f:
                f.write(text + "\n")
    return root


def _plant(path: str, kind: str, root: str, outside: str) -> None:
    if os.path.lexists(path):
        return
    if kind == "file":
        with open(path, "wb") as f:
            f.write(b"not a pickle")
    elif kind == "torch_magic":
        with open(path, "wb") as f:
            f.write(b"PK\x03\x04 not a whole zip")
    elif kind == "symlink_in":
        os.symlink(os.path.relpath(os.path.join(root, "latest"), os.path.dirname(path)), path)
    elif kind == "symlink_out":
        os.symlink(os.path.join(outside, "secret.pt"), path)
    elif kind == "symlink_out_dir":
        os.symlink(os.path.join(outside, "tag"), path)
    elif kind == "symlink_in_dir":
        os.symlink(os.path.dirname(path), path)  # its own parent: a loop DeepSpeed's join would follow
    elif kind == "hardlink_out":
        os.link(os.path.join(outside, "secret.pt"), path)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "loop":
        os.symlink(os.path.basename(path), path)


# --------------------------------------------------------------- DeepSpeed 0.19.8's name logic

MODEL_GLOBS = ("mp_rank_*_model_states.pt", "zero_pp_rank_*_mp_rank_*_model_states.pt")  # _get_all_ckpt_names
OPTIM_GLOBS = ("*zero_pp_rank_*_mp_rank_*optim_states.pt", "expp_rank_*_mp_rank_*_optim_states.pt")  # zero + MoE
EXPERT_GLOBS = ("layer_*_expert_*_mp_rank_*_model_states.pt", "expert_*_mp_rank_*_model_states.pt")
CONVERTER_GLOBS = ("*_model_states.pt", "*_optim_states.pt")  # zero_to_fp32, ds_to_universal _get_*_files
WALK_PREFIXES = ("mp_rank_", "layer_", "zero_pp_rank_", "bf16_zero_pp_rank_", "fp16_zero_pp_rank_")  # constants.py


def _pointed(root: str, name: str) -> str | None:
    path = os.path.join(root, name)
    if not os.path.isfile(path):  # engine.load_checkpoint: os.path.isfile, then open(...).read().strip()
        return None
    with open(path) as f:
        return f.read().strip()


def deepspeed_opens(root: str, tag: str | None, load_universal: bool) -> tuple[set[str], dict[str, str]]:
    """Paths a DeepSpeed load (and its converters) would open, and for each tag read through a pointer,
    the pointer's path (tag dir -> pointer)."""
    opened: set[str] = set()
    via: dict[str, str] = {}
    tags = [tag] if tag else []
    for pointer in ("latest_universal" if load_universal else "latest", "latest"):  # + z3 module-only's `latest`
        named = _pointed(root, pointer)
        if named is not None:
            opened.add(os.path.join(root, pointer))
            tags.append(named)
            via.setdefault(os.path.join(root, named), os.path.join(root, pointer))
    for t in tags:
        tag_dir = os.path.join(root, t)
        if not os.path.isdir(tag_dir):
            continue
        for pattern in MODEL_GLOBS + OPTIM_GLOBS + EXPERT_GLOBS + CONVERTER_GLOBS:
            opened.update(glob.glob(os.path.join(glob.escape(tag_dir), pattern)))
        zero = os.path.join(tag_dir, "zero")  # base_optimizer.load_hp_checkpoint_state_from_checkpoint_dir
        if os.path.isdir(zero):
            opened.add(os.path.join(zero, "optimizer_state.pt"))
            for param in _listdir(zero):
                folder = os.path.join(zero, param)
                if os.path.isdir(folder):  # universal_checkpoint.load_hp_checkpoint_state
                    opened.update(os.path.join(folder, f"{m.group(1)}.pt") for f in _listdir(folder)
                                  if (m := re.search(r"(.+).pt", f)))
        for dirpath, _, files in os.walk(tag_dir):  # ds_to_universal: reshape_utils.get_files + prefixes
            opened.update(os.path.join(dirpath, f) for f in files if f.startswith(WALK_PREFIXES))
    return {p for p in opened if os.path.lexists(p) and not os.path.isdir(p)}, via


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _key(path: str) -> tuple[str, str]:
    return os.path.realpath(os.path.dirname(path)), os.path.basename(path)


def covered(path: str, found: load_files.Discovery, keys: set, via: dict) -> bool:
    """The gate judges `path` (under a name it reads as loadable), or reports something above it unverifiable."""
    if path in found.pointers or _key(path) in keys:
        return path in found.pointers or load_files.loadable(os.path.basename(path))
    up = path
    while up != os.path.dirname(up):
        if up in found.refused or via.get(up) in found.refused:
            return True
        up = os.path.dirname(up)
    return False


def opened_by(fn, *args):
    _OPENED.paths = []
    try:
        fn(*args)
        return list(_OPENED.paths)
    finally:
        _OPENED.paths = None


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=layout)
def test_discovery_covers_what_deepspeed_opens_and_nothing_outside(spec):
    with tempfile.TemporaryDirectory(prefix="gate-fuzz-") as base:
        base = os.path.realpath(base)
        root = build(base, spec)
        inside = root + os.sep
        found = load_files.discover(root, spec["tag"])
        keys = {_key(f) for f in found.files}
        ds, via = deepspeed_opens(root, spec["tag"], spec["load_universal"])
        missed = sorted(p for p in ds if not covered(p, found, keys, via))
        assert not missed, (missed, found.refused)
        for path in found.files + found.pointers:
            assert os.path.realpath(path).startswith(inside), path
        opened = opened_by(trust.scan_load, root, spec["tag"])
        outside = [p for p in opened if not os.path.realpath(p).startswith(inside)]
        assert not outside, outside
        links = {f for f in found.files if os.lstat(f).st_nlink > 1}
        assert not links & {os.path.abspath(p) for p in opened}, "opened a hard link out of the root"


def test_the_name_rule_covers_deepspeeds_prefixes():
    """load_files.PREFIXES holds every *_FILE_PREFIX of the installed DeepSpeed (read, not imported)."""
    import ast
    import importlib.util

    spec = importlib.util.find_spec("deepspeed")
    path = os.path.join(os.path.dirname(spec.origin), "checkpoint", "constants.py")
    tree = ast.parse(open(path, encoding="utf-8").read())
    names = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            try:
                names[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                if isinstance(node.value, ast.BinOp):  # 'bf16_' + ZERO_FILE_PREFIX
                    names[node.targets[0].id] = node.value.left.value + names[node.value.right.id]
    prefixes = {v for k, v in names.items() if k.endswith("_FILE_PREFIX")}
    assert prefixes and prefixes <= set(load_files.PREFIXES), prefixes - set(load_files.PREFIXES)


def test_a_huge_or_deep_tag_is_refused_not_walked(tmp_path, monkeypatch):
    """Over MAX_ENTRIES entries (lowered here; 10^5 real ones would only cost time) or MAX_DEPTH dirs,
    the tag is refused: unverifiable, so the gate refuses the load, after a bounded walk."""
    root = tmp_path / "root"
    tag = root / "global_step1"
    tag.mkdir(parents=True)
    (root / "latest").write_text("global_step1")
    for i in range(30):
        (tag / f"extra_{i}.txt").write_bytes(b"x")
    monkeypatch.setattr(load_files, "MAX_ENTRIES", 20)
    report = trust.scan_load(str(root))
    assert [(f.name, f.verdict, f.detail) for f in report.untrusted] == [
        ("global_step1", "unverifiable", "more than 20 entries: not walked to the end")], report.untrusted
    monkeypatch.undo()
    deep = tag
    for i in range(load_files.MAX_DEPTH + 2):
        deep = deep / f"d{i}"
    deep.mkdir(parents=True)
    (deep / "mp_rank_00_model_states.pt").write_bytes(b"x")
    (tag / "loop").symlink_to(".")  # a dir symlink back into the tag: walked once, not forever
    report = trust.scan_load(str(root))
    assert [f.detail for f in report.untrusted] == [f"more than {load_files.MAX_DEPTH} directories deep: not walked"]
