"""Older DeepSpeed / torch release pairs for the corpus: one cached venv per pair.

`python -m corpus.generate --deepspeed 0.14.5 --torch 2.5.1` builds (once) the venv
`~/.cache/ds-triage-corpus/venvs/ds0.14.5-torch2.5.1` and runs the release fault matrix in it.
The logs go to `corpus/releases/<pair>/cases|clean/<id>.log` and into corpus/manifest.yaml as
`<id>@<pair>`, with the `deepspeed` and `torch` releases the run really imported.

Only PyPI is reachable here, so an older torch is PyPI's CUDA build with its nvidia-* wheels: they
are needed at import (torch preloads libcudart & co. even on a machine without a GPU), and the runs
use DeepSpeed's CPU accelerator (DS_ACCELERATOR=cpu, gloo). See corpus/NOTES.md for what each pair
needed and the pairs that could not be built.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

CACHE = Path(os.environ.get("CORPUS_VENV_CACHE") or Path.home() / ".cache" / "ds-triage-corpus" / "venvs")
RELEASES_DIR = "releases"   # under the corpus dir
# The fault matrix run on every older pair: scenario ids of corpus/scenarios*.py whose layouts every
# release here can save (direct DeepSpeed loads, no framework, tensor-parallel mpu or pipeline): the
# common faults of each category, a few negatives, and healthy runs that must fire no rule.
MATRIX = (
    # ZeRO stage changed at load
    "zero3-saved-stage2-load-dp2", "zero2-saved-stage3-load-dp2", "zero1-saved-stage3-load-dp1",
    "zero0-saved-stage2-load-dp1",
    # data-parallel size changed
    "zero1-dp2-saved-load-dp1", "zero2-dp2-saved-load-dp1", "zero3-dp2-saved-load-dp1",
    # missing files, wrong paths, an interrupted save
    "zero2-dp2-optim-shard-deleted", "zero3-dp2-optim-shard-deleted", "zero2-dp2-model-states-deleted",
    "zero2-dp1-latest-deleted", "zero2-dp1-latest-points-to-missing-tag", "zero2-dp1-tag-dir-deleted-explicit-tag",
    "killed-save-zero2-load-explicit-tag",
    # damaged files
    "zero2-dp2-optim-shard-truncated", "zero2-dp2-model-states-truncated", "zero2-dp2-optim-shard-random",
    # model and optimizer changed
    "zero2-dp1-model-hidden-changed", "zero2-dp1-model-renamed", "zero2-dp1-adamw-saved-sgd-load",
    "zero2-dp1-param-groups-changed",
    # precision switched, release check, torch.load
    "zero2-dp2-fp32-saved-bf16-load", "zero1-dp1-optim-ds-version-older", "torch-load-zero2-optim-shard",
    "zero2-dp1-load-torch-force-weights-only",
    # the converters
    "zero_to_fp32-zero2-dp2-missing-shard", "zero_to_fp32-zero2-latest-deleted", "ds_to_universal-zero2-dp2-missing-shard",
    # healthy on 0.19.8; a known bug of the older converters (DS-B106)
    "ds_to_universal-groups-z3-dp2-fp32", "resume-universal-groups-z3-dp2-fp32-converted-by-project-release-on-dp1",
    "zero3-dp1-latest-deleted-load-tag-no-optim", "job-ds-to-universal-output-slash-then-load-universal",
    # not a checkpoint failure
    "negative-shape",
    # healthy runs
    "train-z2-dp2-fp32", "resume-z2-dp2-fp32", "zero_to_fp32-z2-dp2-fp32",
)
# pip requirements a pair needs besides torch and deepspeed (found by building them; NOTES.md)
EXTRAS = [
    # torch < 2.3 wheels are built against numpy 1.x
    (lambda ds, tv: _v(tv) < (2, 3), ["numpy<2"]),
    # DeepSpeed < 0.14 pins pydantic 1 (its config classes use pydantic 1's API)
    (lambda ds, tv: _v(ds) < (0, 14), ["pydantic<2"]),
]
# pip packages removed after the install: torch >= 2.6 brings triton, whose import finds no GPU driver
# and raises at `import deepspeed` in DeepSpeed < 0.16 (its triton kernels are imported when triton is
# importable); a CPU machine without triton imports it fine (corpus/NOTES.md).
REMOVE = [(lambda ds, tv: _v(ds) < (0, 16) and _v(tv) >= (2, 6), ["triton"])]
PIP_FLAGS = ["--disable-pip-version-check", "--no-input", "--progress-bar", "off"]


def _v(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version.split("+")[0])[:3])


def check_version(text: str) -> str:
    """argparse type: a release number like 0.14.5 or 2.5.1 (nothing that pip would read as a path)."""
    import argparse
    if not re.fullmatch(r"\d+(\.\d+){1,2}", text or ""):
        raise argparse.ArgumentTypeError(f"{text!r} is not a release number like 0.14.5")
    return text


def pair_name(deepspeed: str, torch: str) -> str:
    return f"ds{deepspeed}-torch{torch}"


def case_id(scenario_id: str, deepspeed: str, torch: str) -> str:
    return f"{scenario_id}@{pair_name(deepspeed, torch)}"


def venv_dir(deepspeed: str, torch: str, cache: Path = CACHE) -> Path:
    return cache / pair_name(deepspeed, torch)


def requirements(deepspeed: str, torch: str) -> list[list[str]]:
    """The pip install steps, in order: torch first (DeepSpeed's setup.py imports it), the pair's
    extras, then DeepSpeed without build isolation (DS_BUILD_OPS=0: ops are JIT-built at run time)."""
    extras = [r for test, reqs in EXTRAS if test(deepspeed, torch) for r in reqs]
    steps = [[f"torch=={torch}", "wheel"] + extras, ["--no-build-isolation", f"deepspeed=={deepspeed}"] + extras]
    steps.append(["pyyaml", "huggingface_hub"] + extras)   # zero_to_fp32 in newer releases imports huggingface_hub
    return steps


def ensure_venv(deepspeed: str, torch: str, say=print, cache: Path = CACHE) -> Path:
    """The pair's venv, built when missing (a `.complete` file marks a finished build; an unfinished
    one is resumed: pip skips what is already installed)."""
    root = venv_dir(deepspeed, torch, cache)
    done = root / ".complete"
    if done.exists():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    log = root.parent / f"{root.name}.build.log"
    say(f"  building venv {root} (log {log})")
    t0 = time.time()
    base_python = os.path.join(sys.base_prefix, "bin", "python3")
    with open(log, "ab") as out:
        def step(cmd, env=None):
            out.write(("$ " + " ".join(cmd) + "\n").encode())
            out.flush()
            rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env).returncode
            if rc != 0:
                raise SystemExit(f"venv for {pair_name(deepspeed, torch)}: `{' '.join(cmd)}` failed (exit {rc}); see {log}")
        step([base_python, "-m", "venv", str(root)])
        pip = [str(root / "bin" / "python"), "-m", "pip", "install"] + PIP_FLAGS
        env = dict(os.environ, DS_BUILD_OPS="0")
        for args in requirements(deepspeed, torch):
            step(pip + args, env)
        removed = [r for test, names in REMOVE if test(deepspeed, torch) for r in names]
        if removed:
            step([str(root / "bin" / "python"), "-m", "pip", "uninstall", "-y"] + removed, env)
        step([str(root / "bin" / "python"), "-c",
              "import torch, deepspeed; print('torch', torch.__version__, 'deepspeed', deepspeed.__version__)"],
             dict(env, DS_ACCELERATOR="cpu"))
    done.write_text(f"built in {time.time() - t0:.0f}s\n")
    say(f"  venv {root.name} built in {time.time() - t0:.0f}s")
    return root


# What a pair showed where it differs from the scenario table (kind, category, rule, note), filled
# in by reading the pair's logs; `rule` is the expected rule of that pair's case (None: no rule
# can name the cause from that log).
_TORCH_LOAD_BEFORE_2_6 = dict(
    kind="clean", rule=None,
    note="torch before 2.6 defaults to weights_only=False: the optimizer shard loads (with a FutureWarning "
         "about the coming default), so this is no failure on this pair")
_WEIGHTS_ONLY = dict(
    kind="failure", category="unsafe_load_blocked", rule="DS-U001",
    note="DeepSpeed before 0.16 calls torch.load without weights_only, and torch 2.6 made weights_only=True "
         "the default: the healthy checkpoint's optimizer shard is refused (the version skew, not a fault)")
_PARAM_GROUPS_BEFORE_0_19 = dict(
    rule="DS-O002",
    note="DeepSpeed before 0.19 has no parameter-alignment layout check in _load_legacy_checkpoint (DS-O003's "
         "raise site, 0.19.8 only in triage/kb/site_history.json): the changed param groups reach torch's "
         "Optimizer.load_state_dict, which refuses another number of groups")


def _two_failures(fault: str) -> dict:
    return dict(note=f"two real failures in one log: {fault}, rank 0's healthy shard is refused by torch 2.6's "
                     "weights_only default; labelled with the injected fault")


def _refused_before(step: str) -> dict:
    return dict(_WEIGHTS_ONLY, note=(
        "DeepSpeed 0.15.4 calls torch.load without weights_only: torch 2.6's default refuses the optimizer shard "
        f"(LossScaler) before {step}, so the injected fault is never reached; labelled with what happened"))


_Z3_GROUPS_UNIVERSAL = dict(
    kind="failure", category="known_bug", rule="DS-B106",
    note="ds_to_universal before 0.18 reads only the first ZeRO-3 flat partition (state[0], fp32_flat_groups[0]) "
         "and walks every parameter's offset through it: with two param groups the first parameter of the second "
         "group runs past its end (narrow: start + length exceeds dimension size). 0.19.8 converts the same layout")
_Z3_GROUPS_UNIVERSAL_LOAD = dict(
    kind="failure", category="known_bug", rule="DS-B107",
    note="the ZeRO-3 universal loader before 0.18 (load_hp_checkpoint_state_from_checkpoint_dir_stage3) reads "
         "param_shapes[0] only and puts every fragment into the first partition and param group: the second group "
         "arrives empty and torch's Optimizer.load_state_dict refuses the group sizes. The universal checkpoint is "
         "0.19.8's (this release cannot convert two groups: DS-B106); 0.19.8 loads it")
OBSERVED: dict[str, dict[str, dict]] = {
    "ds0.14.5-torch2.5.1": {"torch-load-zero2-optim-shard": _TORCH_LOAD_BEFORE_2_6,
                            "zero2-dp1-param-groups-changed": _PARAM_GROUPS_BEFORE_0_19,
                            "ds_to_universal-groups-z3-dp2-fp32": _Z3_GROUPS_UNIVERSAL,
                            "resume-universal-groups-z3-dp2-fp32-converted-by-project-release-on-dp1":
                                _Z3_GROUPS_UNIVERSAL_LOAD},
    "ds0.16.9-torch2.6.0": {"zero2-dp1-param-groups-changed": _PARAM_GROUPS_BEFORE_0_19,
                            "ds_to_universal-groups-z3-dp2-fp32": _Z3_GROUPS_UNIVERSAL,
                            "resume-universal-groups-z3-dp2-fp32-converted-by-project-release-on-dp1":
                                _Z3_GROUPS_UNIVERSAL_LOAD},
    "ds0.15.4-torch2.6.0": {
        "resume-z2-dp2-fp32": _WEIGHTS_ONLY,
        "zero_to_fp32-z2-dp2-fp32": _WEIGHTS_ONLY,
        "zero_to_fp32-zero2-dp2-missing-shard": dict(_WEIGHTS_ONLY, note=(
            "zero_to_fp32 of DeepSpeed 0.15.4 is refused by torch 2.6's weights_only default on the first file "
            "it loads, before it counts the shards: the deleted shard is never reached")),
        "zero2-dp2-optim-shard-deleted": _two_failures("rank 1's shard is missing (FileNotFoundError)"),
        "zero3-dp2-optim-shard-deleted": _two_failures("rank 1's shard is missing (FileNotFoundError)"),
        "zero2-dp2-optim-shard-truncated": _two_failures(
            "rank 1's shard is truncated (PytorchStreamReader failed reading zip archive)"),
        "zero2-dp2-optim-shard-random": _two_failures(
            "rank 1's shard holds random bytes (the restricted unpickler: Unsupported operand 205)"),
        "zero2-dp1-adamw-saved-sgd-load": _refused_before("the optimizer's state is handed to the SGD optimizer"),
        "zero2-dp1-param-groups-changed": _refused_before("the optimizer's param groups are compared"),
        "zero1-dp1-optim-ds-version-older": _refused_before("its saved ds_version is checked"),
        "ds_to_universal-zero2-dp2-missing-shard": dict(_WEIGHTS_ONLY, note=(
            "ds_to_universal of DeepSpeed 0.15.4 is refused by torch 2.6's weights_only default on the first "
            "optimizer shard it loads (_get_zero_stage), before it merges the shards: the deleted shard is never "
            "reached")),
        "ds_to_universal-groups-z3-dp2-fp32": dict(_WEIGHTS_ONLY, note=(
            "ds_to_universal of DeepSpeed 0.15.4 is refused by torch 2.6's weights_only default on the first "
            "optimizer shard it loads (ZeroStageEnum), before it extracts a fragment: its one-group limit "
            "(DS-B106) is never reached")),
        "resume-universal-groups-z3-dp2-fp32-converted-by-project-release-on-dp1": _refused_before(
            "the universal checkpoint's optimizer state is read"),
        "zero2-dp1-load-torch-force-weights-only": dict(_WEIGHTS_ONLY, note=(
            "TORCH_FORCE_WEIGHTS_ONLY_LOAD=1 changes nothing on this pair: torch 2.6's default already refuses "
            "DeepSpeed 0.15.4's torch.load without weights_only (resume-z2-dp2-fp32 of this pair fails the same "
            "without the variable), in 2.6's wording, and the log does not show the variable")),
    },
}


def observed(pair: str, scenario: dict) -> dict:
    return {**scenario, **OBSERVED.get(pair, {}).get(scenario["id"], {})}


def pair_order(pair: str) -> tuple:
    """Sort key of a pair name: by DeepSpeed release, then torch release."""
    ds, _, tv = pair.removeprefix("ds").partition("-torch")
    return _v(ds), _v(tv)
