"""Second half of the scenario table (kept separate so each module stays small)."""
from corpus.layouts import LAYOUTS, TAG as T

ZLAYS = [n for n in LAYOUTS if LAYOUTS[n].get("stage", 0) > 0 and not n.startswith(("killed", "big"))
         and not LAYOUTS[n].get("worker")
         and not LAYOUTS[n].get("tp") and not LAYOUTS[n].get("pipe")]
INJ = ["--inject_missing_state"]   # ds_to_universal needs it for non-Megatron ZeRO-1/2 checkpoints

# Faults DeepSpeed accepted: kind/note as observed on deepspeed 0.19.8 / torch 2.13 (CPU).
_OK = "loads without error or warning; "
OBSERVED = {
    "zero2-saved-stage1-load-dp2": dict(kind="clean", note=_OK + "ZeRO-1 and ZeRO-2 share the shard format; "
                                        "param checksum after load equals the saved one"),
    "zero0-dp2-saved-load-dp1": dict(kind="clean", note=_OK + "stage-0 checkpoints are not partitioned by dp"),
    "zero0-dp1-saved-load-dp2": dict(kind="clean", note=_OK + "stage-0 checkpoints are not partitioned by dp"),
    "zero2-dp1-model-renamed-nonstrict-module-only": dict(
        kind="silent", note="exit 0, no warning; with strict=False the renamed blocks keep their random init "
                            "(checksum after load != saved), only the head is restored; global_steps=0"),
    "zero2-dp1-model-states-ds-version-older": dict(kind="clean", note=_OK + "model-states ds_version is not checked"),
    "zero2-dp1-model-states-ds-version-newer": dict(kind="clean", note=_OK + "model-states ds_version is not checked"),
    "zero3-dp2-model-states-ds-version-older": dict(kind="clean", note=_OK + "model-states ds_version is not checked"),
    "zero2-dp1-optim-ds-version-newer": dict(kind="clean", note=_OK + "only ZeRO-1 checks the shard ds_version (>= 0.3.17)"),
    "torch-load-zero2-model-states": dict(kind="clean", note="weights_only=True accepts the model-states file"),
    "torch-load-zero3-model-states": dict(kind="clean", note="weights_only=True accepts the model-states file"),
    "torch-load-pp2-layer-file": dict(kind="clean", note="weights_only=True accepts a pipeline layer file"),
    "zero_to_fp32-zero3-dp2-model-states-deleted": dict(
        kind="clean", note="zero_to_fp32 succeeds: it takes param shapes from the remaining model-states file "
                           "and the weights from the optimizer shards"),
    "zero3-reload-into-same-engine": dict(
        kind="clean", category=None, note="the documented ZeRO-3 'reload after save needs a fresh engine' "
                                          "limitation did not reproduce: values and next loss are right"),
}


def more(case, lay_text, OPT, BOPT, MS, Z3MS):
    z2, z2d2, z3d2 = "z2-dp1-fp32", "z2-dp2-fp32", "z3-dp2-fp32"
    # ------------------------------------------------------------ permissions (load as uid 65534)
    nob = dict(user="nobody")
    case("zero2-dp2-optim-shard-unreadable", "failure", "permission_denied", z2d2, lay_text(z2d2),
         f"chmod 000 {T}/{OPT.format(r=1)}; loaded as uid 65534", inject=[("chmod", f"{T}/{OPT.format(r=1)}", 0)], **nob)
    case("zero2-dp1-model-states-unreadable", "failure", "permission_denied", z2, lay_text(z2),
         f"chmod 000 {T}/{MS}; loaded as uid 65534", inject=[("chmod", f"{T}/{MS}", 0)], **nob)
    case("zero2-dp1-tag-dir-unreadable", "failure", "permission_denied", z2, lay_text(z2),
         f"chmod 700 {T}/ (owner root); loaded as uid 65534", inject=[("chmod", T, 0o700)], **nob)
    case("zero3-dp2-tag-dir-unreadable", "failure", "permission_denied", z3d2, lay_text(z3d2),
         f"chmod 000 {T}/; loaded as uid 65534", inject=[("chmod", T, 0)], **nob)
    case("zero2-dp1-latest-unreadable", "failure", "permission_denied", z2, lay_text(z2),
         "chmod 000 latest; loaded as uid 65534", inject=[("chmod", "latest", 0)], **nob)
    # ------------------------------------------------------------ corrupt files
    for id, lay, f, fn in [
            ("zero2-dp2-optim-shard-truncated", z2d2, OPT.format(r=1), "truncate_half"),
            ("zero2-dp2-model-states-truncated", z2d2, MS, "truncate_half"),
            ("zero2-dp2-optim-shard-zeroed", z2d2, OPT.format(r=0), "zero_fill"),
            ("zero2-dp2-optim-shard-random", z2d2, OPT.format(r=1), "random_fill"),
            ("zero3-dp2-model-states-truncated", z3d2, Z3MS.format(r=0), "truncate_half"),
            ("zero3-dp2-optim-shard-zeroed", z3d2, OPT.format(r=1), "zero_fill"),
            ("zero1-dp2-bf16-model-states-random", "z1-dp2-bf16", MS, "random_fill"),
            ("zero0-dp1-model-states-zeroed", "z0-dp1-fp32", MS, "zero_fill"),
            ("pp2-layer-file-truncated", "pp2-fp32", "layer_04-model_states.pt", "truncate_half")]:
        what = {"truncate_half": "truncated to half its size", "zero_fill": "overwritten with zero bytes (same size)",
                "random_fill": "overwritten with random bytes (same size)"}[fn]
        case(id, "failure", "corrupt_file", lay, lay_text(lay), f"{T}/{f} {what}", inject=[(fn, f"{T}/{f}")])
    # ------------------------------------------------------------ model changed
    for id, lay, model, flags in [
            ("zero2-dp1-model-hidden-changed", z2, "hidden", []),
            ("zero2-dp1-model-extra-layer", z2, "extra", []),
            ("zero2-dp1-model-removed-layer", z2, "removed", []),
            ("zero2-dp1-model-renamed", z2, "renamed", []),
            ("zero2-dp1-model-extra-layer-nonstrict", z2, "extra", ["--no-strict"]),
            ("zero2-dp1-model-removed-layer-nonstrict", z2, "removed", ["--no-strict"]),
            ("zero2-dp1-model-renamed-nonstrict-module-only", z2, "renamed", ["--no-strict", "--module-only"]),
            ("zero3-dp2-model-hidden-changed", z3d2, "hidden", []),
            ("zero3-dp2-model-extra-layer", z3d2, "extra", []),
            ("zero3-dp2-model-removed-layer-no-optim", z3d2, "removed", ["--no-load-optim"]),
            ("zero0-dp1-model-hidden-changed", "z0-dp1-fp32", "hidden", []),
            ("zero1-dp2-bf16-model-removed-layer", "z1-dp2-bf16", "removed", []),
            ("pp2-model-hidden-changed", "pp2-fp32", "hidden", [])]:
        desc = {"hidden": "hidden size 128 -> 192", "extra": "an extra Linear layer (4 -> 5 blocks)",
                "removed": "a layer removed (4 -> 3 blocks)", "renamed": "module renamed blocks -> trunk"}[model]
        case(id, "failure", "model_mismatch", lay, lay_text(lay),
             f"model at load: {desc}" + (f"; load flags {' '.join(flags)}" if flags else ""),
             args={"model": model}, flags=flags)
    # ------------------------------------------------------------ optimizer changed
    for id, lay, opt, desc in [
            ("zero2-dp1-adamw-saved-sgd-load", z2, "sgd", "AdamW -> SGD(momentum)"),
            ("zero0-dp1-adamw-saved-sgd-load", "z0-dp1-fp32", "sgd", "AdamW -> SGD(momentum)"),
            ("zero2-dp1-sgd-saved-adamw-load", "sgd-z2-dp1-fp32", "adamw", "SGD(momentum) -> AdamW"),
            ("zero0-dp1-param-groups-changed", "z0-dp1-fp32", "adamw2groups", "1 param group -> 2 (decay/no-decay)"),
            ("zero2-dp1-param-groups-changed", z2, "adamw2groups", "1 param group -> 2 (decay/no-decay)"),
            ("zero3-dp2-param-groups-changed", z3d2, "adamw2groups", "1 param group -> 2 (decay/no-decay)"),
            ("zero1-dp2-bf16-param-groups-changed", "z1-dp2-bf16", "adamw2groups", "1 param group -> 2")]:
        case(id, "failure", "optimizer_mismatch", lay, lay_text(lay), f"optimizer at load: {desc}",
             args={"optimizer": opt})
    # ------------------------------------------------------------ ds_version rewritten
    for id, lay, fn, f, v in [
            ("zero2-dp1-model-states-ds-version-older", z2, "rewrite_key", MS, "0.9.0"),
            ("zero2-dp1-model-states-ds-version-newer", z2, "rewrite_key", MS, "0.99.0"),
            ("zero3-dp2-model-states-ds-version-older", z3d2, "rewrite_key", "zero_pp_rank_*_model_states.pt", "0.9.0"),
            ("zero1-dp1-optim-ds-version-older", "z1-dp1-fp32", "rewrite_optim_key", OPT.format(r=0), "0.3.0"),
            ("zero1-dp1-optim-ds-version-removed", "z1-dp1-fp32", "rewrite_optim_key", OPT.format(r=0), None),
            ("zero2-dp1-optim-ds-version-newer", z2, "rewrite_optim_key", OPT.format(r=0), "0.99.0"),
            ("zero1-dp2-bf16-optim-ds-version-removed", "z1-dp2-bf16", "rewrite_optim_key", BOPT.format(r=0), None)]:
        where = "model states" if fn == "rewrite_key" else "optimizer_state_dict of the ZeRO shard"
        case(id, "failure", "version_incompatible", lay, lay_text(lay),
             f"ds_version in {where} {'removed' if v is None else 'rewritten to ' + repr(v)} (torch.load/torch.save)",
             inject=[(fn, f"{T}/{f}", "ds_version", v)])
    # ------------------------------------------------------------ plain torch.load (weights_only default)
    for id, lay, f in [("torch-load-zero2-optim-shard", z2, OPT.format(r=0)),
                       ("torch-load-zero2-model-states", z2, MS),
                       ("torch-load-zero3-model-states", z3d2, Z3MS.format(r=0)),
                       ("torch-load-zero1-bf16-optim-shard", "z1-dp2-bf16", BOPT.format(r=0)),
                       ("torch-load-pp2-layer-file", "pp2-fp32", "layer_00-model_states.pt")]:
        case(id, "failure", "unsafe_load_blocked", lay, lay_text(lay),
             f"plain torch.load({T}/{f}) with torch's default weights_only", run="torch_load", file=f"{T}/{f}")
    case("zero2-dp1-load-torch-force-weights-only", "failure", "unsafe_load_blocked", z2, lay_text(z2),
         "healthy checkpoint; TORCH_FORCE_WEIGHTS_ONLY_LOAD=1 in the environment", env={"TORCH_FORCE_WEIGHTS_ONLY_LOAD": "1"})
    # ------------------------------------------------------------ offline tools on broken checkpoints
    for id, lay, run, inj, cat in [
            ("zero_to_fp32-zero2-dp2-missing-shard", z2d2, "zero_to_fp32", ("delete", f"{T}/{OPT.format(r=1)}"), "missing_file"),
            ("zero_to_fp32-zero2-dp2-truncated-shard", z2d2, "zero_to_fp32", ("truncate_half", f"{T}/{OPT.format(r=1)}"), "corrupt_file"),
            ("zero_to_fp32-zero3-dp2-model-states-deleted", z3d2, "zero_to_fp32", ("delete", f"{T}/{Z3MS.format(r=1)}"), "missing_file"),
            ("zero_to_fp32-zero2-latest-deleted", z2, "zero_to_fp32", ("delete", "latest"), "missing_file"),
            ("ds_to_universal-zero2-dp2-missing-shard", z2d2, "ds_to_universal", ("delete", f"{T}/{OPT.format(r=1)}"), "missing_file"),
            ("ds_to_universal-zero2-dp2-truncated-shard", z2d2, "ds_to_universal", ("truncate_half", f"{T}/{OPT.format(r=0)}"), "corrupt_file"),
            ("ds_to_universal-zero3-dp2-model-states-deleted", z3d2, "ds_to_universal", ("delete", f"{T}/{Z3MS.format(r=0)}"), "missing_file")]:
        case(id, "failure", cat, lay, lay_text(lay), f"{run} after: {inj[0]} {inj[1]}", run=run, inject=[inj],
             flags=INJ if run == "ds_to_universal" and LAYOUTS[lay]["stage"] < 3 else [])
    case("ds_to_universal-zero2-dp2-without-inject-missing-state", "failure", "known_bug", z2d2, lay_text(z2d2),
         "healthy checkpoint; ds_to_universal without --inject_missing_state", run="ds_to_universal",
         note="DeepSpeed's engine does not write universal_checkpoint_info for non-Megatron clients")
    for name in ("tp2-z1-fp32", "pp2-z1-fp32"):
        case(f"zero_to_fp32-{name}-unsupported", "failure", "parallelism_mismatch", name, lay_text(name),
             "healthy checkpoint; zero_to_fp32 on a model-/pipeline-parallel checkpoint", run="zero_to_fp32")
    case("zero_to_fp32-zero0-checkpoint", "failure", "zero_stage_mismatch", "z0-dp1-fp32", lay_text("z0-dp1-fp32"),
         "zero_to_fp32 run on a stage-0 (non-ZeRO) checkpoint", run="zero_to_fp32")
    case("ds_to_universal-zero0-checkpoint", "failure", "zero_stage_mismatch", "z0-dp2-fp32", lay_text("z0-dp2-fp32"),
         "ds_to_universal run on a stage-0 (non-ZeRO) checkpoint", run="ds_to_universal")
    case("zero2-dp2-load-universal-unconverted", "failure", "config_mismatch", z2d2, lay_text(z2d2),
         'checkpoint.load_universal=true but the checkpoint was never converted', flags=["--universal"])
    # ------------------------------------------------------------ precision switched
    for id, lay, prec in [("zero1-dp2-bf16-saved-fp32-load", "z1-dp2-bf16", "fp32"),
                          ("zero2-dp2-fp32-saved-bf16-load", z2d2, "bf16"),
                          ("zero3-dp2-bf16-saved-fp32-load", "z3-dp2-bf16", "fp32"),
                          ("zero0-dp2-bf16-saved-fp32-load", "z0-dp2-bf16", "fp32"),
                          ("zero0-dp2-fp32-saved-bf16-load", "z0-dp2-fp32", "bf16")]:
        case(id, "failure", "config_mismatch", lay, lay_text(lay), f"bf16 {'off' if prec == 'fp32' else 'on'} at load",
             args={"precision": prec})
    case("zero2-dp1-bf16-saved-fp16-load", "negative", "unknown", "z2-dp1-bf16", lay_text("z2-dp1-bf16"),
         "fp16 enabled at load: the CPU accelerator rejects fp16 in deepspeed.initialize, before any checkpoint IO",
         args={"precision": "fp16"})
    # ------------------------------------------------------------ one job log: the save and the failing load
    # A job script that trains and saves, then runs a second step (validation, a resume with another
    # config), writes both to one log (slurm-%j.out); DeepSpeed's save lines name the files it wrote.
    case("job-zero3-train-then-stage2-load", "failure", "zero_stage_mismatch", "z3-dp2-fp32",
         "one job: ZeRO-3 dp 2 training saves, then a step with a stage-2 config loads the checkpoint",
         "ds_config zero_optimization.stage 3 at save, 2 at load; both steps in one job log",
         pre=[dict(run="train")], record_pre=True, args={"stage": 2})
    case("job-zero0-train-then-stage2-load", "failure", "zero_stage_mismatch", "z0-dp2-fp32",
         "one job: stage-0 (no ZeRO) dp 2 training saves, then a step with a stage-2 config loads the checkpoint",
         "ds_config zero_optimization.stage 0 at save, 2 at load; both steps in one job log",
         pre=[dict(run="train")], record_pre=True, args={"stage": 2})
    case("job-ds-to-universal-output-slash-then-load-universal", "failure", "known_bug", "z2-dp2-fp32",
         "one job: ds_to_universal of a healthy ZeRO-2 dp 2 checkpoint, then a 1-rank resume with load_universal",
         "--output_folder given with a trailing slash (global_step3_universal/): ds_to_universal writes "
         "latest_universal, empty, inside the universal folder instead of beside it; both steps in one job log",
         pre=[dict(run="cmd", argv=["{py}", "-m", "deepspeed.checkpoint.ds_to_universal", "--input_folder",
                                    f"{{ckpt}}/{T}", "--output_folder", f"{{ckpt}}/{T}_universal/",
                                    "--inject_missing_state"])],
         record_pre=True, args={"nproc": 1}, flags=["--universal"], rule="DS-B108")
    case("job-zero2-train-then-load-missing-tag", "failure", "missing_file", "z2-dp2-fp32",
         "one job: ZeRO-2 dp 2 training saves, then a step loads a tag that was never saved",
         "load_checkpoint(tag='global_step99'); both steps in one job log",
         pre=[dict(run="train")], record_pre=True, tag="global_step99")
    # ------------------------------------------------------------ memory
    case("big-zero2-load-rlimit-as", "failure", "out_of_memory", "big-z2-dp1-fp32",
         "ZeRO-2 dp 1, 6.3M-param model (~100 MB of checkpoint files)",
         "RLIMIT_AS set to current VmSize + 64 MiB right before load_checkpoint (real allocation failure)",
         flags=["--rlimit-as-extra-mb", "64"])
    case("zero2-dp2-load-sigkill", "failure", "out_of_memory", z2d2, lay_text(z2d2),
         "worker killed with SIGKILL during load (simulates the kernel OOM killer)", flags=["--sigkill-on-load"],
         what=r"Signal 9 \(SIGKILL\)")
    # ------------------------------------------------------------ known limitation
    case("zero3-reload-into-same-engine", "failure", "known_bug", "z3-dp2-fp32",
         "ZeRO-3 dp 2: load_checkpoint on the same engine right after save_checkpoint",
         "documented ZeRO-3 limitation (engine.module is partitioned after save)", run="train",
         load_dir="fresh", flags=["--load-after-save"], any_exit=True)
    # ------------------------------------------------------------ negatives: not checkpoint failures
    for mode, n, desc in [("shape", 1, "wrong input feature size in forward"),
                          ("oom", 1, "a 10**13-byte tensor allocated in forward (fails immediately)"),
                          ("raise-before-collective", 2, "rank 1 raises before the first collective"),
                          ("early-exit", 2, "rank 1 leaves the loop early; rank 0 blocks in all_reduce"),]:
        case(f"negative-{mode}", "negative", "unknown", z2, f"ZeRO-2 training, {n} rank(s)", desc, run="negative",
             mode=mode, args={"nproc": n})
    case("negative-teardown-sigabrt-after-resume", "negative", "unknown", z2d2,
         f"{lay_text(z2d2)}: healthy resume on 2 ranks; load and the next step succeeded",
         "none injected: rank 0 aborted at interpreter exit ('terminate called without an active exception', "
         "SIGABRT) after a successful resume", run="load",
         captured=dict(log="cases/negative-teardown-sigabrt-after-resume.log", exit_code=1,
                       command="python -m torch.distributed.run --nproc_per_node=2 corpus/workers/load.py --stage 2 "
                               "--precision fp32 --load-dir /tmp/ds-triage-corpus/resume-z2-dp2-fp32"),
         note="intermittent, seen once in one full generation run; captured from the resume-z2-dp2-fp32 run of the full "
              "generation and kept as recorded (the generator does not re-run captured entries)")
    case("negative-import-deepspeed-triton-no-driver", "negative", "unknown", None,
         "DeepSpeed 0.15.4 on torch 2.6.0 (with the triton 3.2.0 that torch 2.6 installs), a CPU machine: "
         "`import deepspeed`", "none injected: DeepSpeed < 0.16 imports its triton inference kernels at "
         "`import deepspeed` whenever triton imports, and triton finds no GPU driver (RuntimeError: 0 active drivers)",
         run="cmd", argv=["{py}", "-c", "import torch, deepspeed; print('torch', torch.__version__, 'deepspeed', deepspeed.__version__)"],
         env={"DS_ACCELERATOR": "cpu"}, pair="ds0.15.4-torch2.6.0",
         captured=dict(log="releases/ds0.15.4-torch2.6.0/cases/negative-import-deepspeed-triton-no-driver.log",
                       exit_code=1,
                       command="DS_ACCELERATOR=cpu python -c \"import torch, deepspeed; print('torch', torch.__version__, "
                               "'deepspeed', deepspeed.__version__)\""),
         note="not a checkpoint-loading failure: the import fails before any checkpoint IO. The output of the "
              "pair venv's import check in its first build (releases.ensure_venv, before releases.REMOVE uninstalled "
              "triton), kept as recorded; the venv as built now has no triton, so the generator cannot re-run it")
    case("negative-store-timeout", "negative", "unknown", None, "rank 0 of 2 started alone (no torchrun)",
         "MASTER_PORT/WORLD_SIZE set by hand, the second rank never starts; 10 s init timeout",
         run="cmd", argv=["{py}", "corpus/workers/negatives.py", "--mode", "store-timeout", "--init-timeout", "10"],
         env={"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29531"})
    case("negative-launcher-missing-script", "negative", "unknown", None, "torchrun with a script path that does not exist",
         "typo in the script path", run="cmd", what="can't open file",
         argv=["{py}", "-m", "torch.distributed.run", "--nproc_per_node=2", "corpus/workers/trian.py"])
    case("negative-launcher-bad-args", "negative", "unknown", None, "torchrun with an invalid --nproc_per_node",
         "--nproc_per_node=two", run="cmd",
         argv=["{py}", "-m", "torch.distributed.run", "--nproc_per_node=two", "corpus/workers/train_save.py"])
    case("negative-worker-bad-args", "negative", "unknown", None, "training script given an unknown option",
         "--zero-stage 2 (the script takes --stage)", run="cmd", what="error: ",
         argv=["{py}", "-m", "torch.distributed.run", "--nproc_per_node=1", "corpus/workers/train_save.py",
               "--zero-stage", "2", "--save-dir", "{ckpt}"])
    case("negative-import-error", "negative", "unknown", None, "training script with a stale import",
         "imports a class that does not exist in this DeepSpeed", run="cmd",
         argv=["{py}", "-m", "torch.distributed.run", "--nproc_per_node=2", "corpus/workers/train_import_error.py"])
    # ------------------------------------------------------------ clean runs at every layout
    for name, lay in LAYOUTS.items():
        if name.startswith("killed"):
            continue
        case(f"train-{name}", "clean", None, name, f"{lay_text(name)}: train 3 steps + save", "none (healthy run)",
             run="base")
        if not lay.get("launch"):   # a one-process framework layout has its healthy loads in its own table
            case(f"resume-{name}", "clean", None, name, f"{lay_text(name)}: resume from the saved checkpoint",
                 "none (healthy run)")
    for name in ZLAYS:
        case(f"zero_to_fp32-{name}", "clean", None, name, f"{lay_text(name)}: zero_to_fp32 conversion",
             "none (healthy run)", run="zero_to_fp32")
    for name in ["z1-dp2-fp32", "z2-dp2-fp32", "z3-dp2-fp32", "z2-dp2-bf16", "z3-dp2-bf16", "tp2-z1-fp32",
                 "pp2-z1-fp32", "groups-z3-dp2-fp32"]:
        case(f"ds_to_universal-{name}", "clean", None, name, f"{lay_text(name)}: ds_to_universal conversion",
             "none (healthy run)", run="ds_to_universal", flags=INJ if LAYOUTS[name]["stage"] < 3 else [])
    for name in ["z1-dp2-fp32", "z2-dp2-fp32", "z3-dp2-fp32", "z2-dp2-bf16"]:
        case(f"resume-universal-{name}-on-dp1", "clean", None, name,
             f"{lay_text(name)}: converted with ds_to_universal, resumed on 1 rank with load_universal",
             "none (healthy run; the supported way to change dp)",
             pre=[dict(run="ds_to_universal", flags=INJ if LAYOUTS[name]["stage"] < 3 else [])],
             args={"nproc": 1}, flags=["--universal"])
    z3d1 = "z3-dp1-fp32"
    case("zero3-dp1-latest-deleted-load-tag-no-optim", "failure", "known_bug", z3d1, lay_text(z3d1),
         "deleted the `latest` file; load_checkpoint(tag='global_step3', load_optimizer_states=False): the tag "
         "directory is complete, but ZeRO-3's no-optimizer load reads the weights through zero_to_fp32 without "
         "the tag", inject=[("delete", "latest")], tag=T, flags=["--no-load-optim"], rule="DS-B001")
    groups = "groups-z3-dp2-fp32"
    case(f"resume-universal-{groups}-converted-by-project-release-on-dp1", "clean", None, groups,
         f"{lay_text(groups)}, two optimizer param groups: converted with the project's DeepSpeed (ds_to_universal "
         "of 0.19.8, also on a release pair), resumed on 1 rank with load_universal",
         "none (healthy run on 0.19.8; on an older release pair: a newer converter's universal checkpoint, "
         "loaded by the older release)",
         pre=[dict(run="cmd", argv=["{project_py}", "-m", "deepspeed.checkpoint.ds_to_universal", "--input_folder",
                                    f"{{ckpt}}/{T}", "--output_folder", f"{{ckpt}}/{T}_universal"])],
         args={"nproc": 1}, flags=["--universal"])
    case("train-long-z2-dp2-fp32", "clean", None, z2d2, "ZeRO-2 dp 2 fp32: 400 steps, checkpoint every 100",
         "none (healthy run; source sample for corpus/clean_chatter.py)", run="train", load_dir="long",
         args={"steps": 400}, flags=["--save-every", "100"])
    case("resume-z2-dp1-fp32-as-unprivileged-user", "clean", None, z2, f"{lay_text(z2)}: resumed as uid 65534",
         "none (control for the permission cases)", user="nobody")
