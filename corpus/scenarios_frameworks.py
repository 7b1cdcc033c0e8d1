"""Framework scenarios (issue 18, point 1): checkpoints saved and loaded through the frameworks
people resume with (transformers Trainer, accelerate, PEFT, from_pretrained, Lightning) rather than
engine.load_checkpoint directly. Workers: corpus/workers/fw_*.py; layouts: layouts.py. Needs the
`frameworks` extra in the venv that runs the workers (CORPUS_VENV, see corpus/NOTES.md).
"""
from corpus.layouts import TAG as T

CK = "checkpoint-3"   # the Trainer saves every 3 steps: <output_dir>/checkpoint-3/global_step3
OPT1 = "zero_pp_rank_1_mp_rank_00_optim_states.pt"
TRAINER = "transformers Trainer: trainer.train(resume_from_checkpoint=...)"
LIGHTNING_CONVERT = ("import sys; from lightning.pytorch.utilities.deepspeed import convert_zero_checkpoint_to_fp32_state_dict; "
                     "convert_zero_checkpoint_to_fp32_state_dict(sys.argv[1], sys.argv[2])")
LIGHTNING = ["{py}", "-m", "torch.distributed.run", "--nproc_per_node=2", "corpus/workers/fw_lightning.py",
             "--stage", "2", "--load-dir", "{ckpt}/last.ckpt"]


def frameworks(case, lay_text):
    tz2, tz3, tb16, acc, pre = ("trainer-z2-dp2-fp32", "trainer-z3-dp2-fp32", "trainer-z2-dp2-bf16",
                                "accelerate-z2-dp2-fp32", "pretrained")
    # ------------------------------------------------------------ transformers Trainer + DeepSpeed config
    case("trainer-zero2-saved-stage3-resume", "failure", "zero_stage_mismatch", tz2, lay_text(tz2),
         "resume_from_checkpoint=True with zero_optimization.stage 3 in the DeepSpeed config", args={"stage": 3})
    case("trainer-zero3-saved-stage2-resume", "failure", "zero_stage_mismatch", tz3, lay_text(tz3),
         "resume_from_checkpoint=True with zero_optimization.stage 2 in the DeepSpeed config", args={"stage": 2})
    case("trainer-dp2-saved-resume-dp1", "failure", "parallelism_mismatch", tz2, lay_text(tz2),
         "resume_from_checkpoint=True on 1 rank (world size 2 -> 1)", args={"nproc": 1})
    case("trainer-bf16-saved-fp32-resume", "failure", "config_mismatch", tb16, lay_text(tb16),
         "resume_from_checkpoint=True with bf16 off (TrainingArguments and DeepSpeed config)",
         args={"precision": "fp32"})
    case("trainer-trainer-state-deleted", "failure", "missing_file", tz2, lay_text(tz2),
         f"deleted {CK}/trainer_state.json; resume_from_checkpoint='{CK}'",
         inject=[("delete", f"{CK}/trainer_state.json")], load_dir=CK)
    case("trainer-trainer-state-deleted-resume-true", "failure", "missing_file", tz2, lay_text(tz2),
         f"deleted {CK}/trainer_state.json; resume_from_checkpoint=True",
         inject=[("delete", f"{CK}/trainer_state.json")])
    resume_faults(case, "trainer", tz2, lay_text(tz2), trainer_state=False)
    # ------------------------------------------------------------ accelerate save_state / load_state
    case("accelerate-zero2-saved-stage3-load", "failure", "zero_stage_mismatch", acc, lay_text(acc),
         "accelerator.load_state with zero_stage 3 in the DeepSpeed plugin", args={"stage": 3})
    case("accelerate-optim-shard-deleted", "failure", "missing_file", acc, lay_text(acc),
         f"deleted pytorch_model/{OPT1}", inject=[("delete", f"pytorch_model/{OPT1}")])
    case("accelerate-pytorch-model-dir-deleted", "failure", "missing_file", acc, lay_text(acc),
         "deleted pytorch_model/ (the DeepSpeed tag directory save_state writes)",
         inject=[("delete", "pytorch_model")])
    case("accelerate-scheduler-deleted", "failure", "missing_file", acc, lay_text(acc),
         "deleted scheduler.bin", inject=[("delete", "scheduler.bin")])
    case("accelerate-random-states-deleted", "clean", None, acc, lay_text(acc),
         "deleted random_states_0.pkl", inject=[("delete", "random_states_0.pkl")],
         note="loads without error or warning: accelerate skips a missing RNG state file (logged at INFO only)")
    acc3 = "accelerate-z3-dp2-fp32"
    case("accelerate-zero3-saved-stage2-load", "failure", "zero_stage_mismatch", acc3, lay_text(acc3),
         "accelerator.load_state with zero_stage 2 in the DeepSpeed plugin", args={"stage": 2})
    case("accelerate-dp2-saved-load-dp1", "failure", "parallelism_mismatch", acc, lay_text(acc),
         "accelerator.load_state on 1 rank (world size 2 -> 1)", args={"nproc": 1})
    case("accelerate-zero3-dp2-saved-load-dp1", "failure", "parallelism_mismatch", acc3, lay_text(acc3),
         "accelerator.load_state on 1 rank (world size 2 -> 1)", args={"nproc": 1})
    case("accelerate-model-states-deleted", "failure", "missing_file", acc, lay_text(acc),
         "deleted pytorch_model/mp_rank_00_model_states.pt", inject=[("delete", "pytorch_model/mp_rank_00_model_states.pt")])
    case("accelerate-optim-shard-truncated", "failure", "corrupt_file", acc, lay_text(acc),
         f"pytorch_model/{OPT1} truncated to half its size", inject=[("truncate_half", f"pytorch_model/{OPT1}")])
    case("accelerate-state-from-other-run", "failure", "model_mismatch", acc, lay_text(acc),
         "load_state of another run's save_state: the model has hidden size 96, the checkpoint 64",
         args={"model": "hidden"})
    case("accelerate-zero3-optim-shard-deleted", "failure", "missing_file", acc3, lay_text(acc3),
         f"deleted pytorch_model/{OPT1}", inject=[("delete", f"pytorch_model/{OPT1}")])
    case("accelerate-model-states-truncated", "failure", "corrupt_file", acc, lay_text(acc),
         "pytorch_model/mp_rank_00_model_states.pt truncated to half its size",
         inject=[("truncate_half", "pytorch_model/mp_rank_00_model_states.pt")])
    case("accelerate-scheduler-truncated", "failure", "corrupt_file", acc, lay_text(acc),
         "scheduler.bin truncated to half its size", inject=[("truncate_half", "scheduler.bin")])
    case("accelerate-load-dir-missing", "failure", "missing_file", acc, lay_text(acc),
         "accelerator.load_state of a directory that does not exist (a mistyped path)",
         load_dir="checkpoints/step_3")
    # the rest of the matrix direct loads and the Trainer have: precision, permissions, the optimizer
    case("accelerate-fp32-saved-bf16-load", "failure", "config_mismatch", acc, lay_text(acc),
         "accelerator.load_state with mixed_precision bf16 (bf16 on in the DeepSpeed plugin)", args={"precision": "bf16"})
    case("accelerate-zero3-fp32-saved-bf16-load", "failure", "config_mismatch", acc3, lay_text(acc3),
         "accelerator.load_state with mixed_precision bf16 (bf16 on in the DeepSpeed plugin)", args={"precision": "bf16"})
    case("accelerate-optim-shard-unreadable", "failure", "permission_denied", acc, lay_text(acc),
         f"chmod 000 pytorch_model/{OPT1}; loaded as uid 65534",
         inject=[("chmod", f"pytorch_model/{OPT1}", 0)], user="nobody")
    case("accelerate-pytorch-model-dir-unreadable", "failure", "permission_denied", acc, lay_text(acc),
         "chmod 700 pytorch_model/ (owner root); loaded as uid 65534",
         inject=[("chmod", "pytorch_model", 0o700)], user="nobody")
    case("accelerate-scheduler-unreadable", "failure", "permission_denied", acc, lay_text(acc),
         "chmod 000 scheduler.bin; loaded as uid 65534", inject=[("chmod", "scheduler.bin", 0)], user="nobody")
    case("accelerate-adamw-saved-sgd-load", "failure", "optimizer_mismatch", acc, lay_text(acc),
         "accelerator.load_state with SGD(momentum) prepared in place of the AdamW that was saved",
         args={"optimizer": "sgd"})
    case("accelerate-zero3-optim-shard-truncated", "failure", "corrupt_file", acc3, lay_text(acc3),
         f"pytorch_model/{OPT1} truncated to half its size", inject=[("truncate_half", f"pytorch_model/{OPT1}")])
    # ZeRO-3's own files (one model-states file a rank, partitioned parameters)
    z3ms = "pytorch_model/zero_pp_rank_0_mp_rank_00_model_states.pt"
    case("accelerate-zero3-model-states-deleted", "failure", "missing_file", acc3, lay_text(acc3),
         f"deleted {z3ms}", inject=[("delete", z3ms)])
    case("accelerate-zero3-model-states-truncated", "failure", "corrupt_file", acc3, lay_text(acc3),
         f"{z3ms} truncated to half its size", inject=[("truncate_half", z3ms)])
    case("accelerate-zero3-state-from-other-run", "failure", "model_mismatch", acc3, lay_text(acc3),
         "load_state of another run's save_state: the model has hidden size 96, the checkpoint 64",
         args={"model": "hidden"})
    # the other direction of the world-size and precision changes: a job grown from 1 rank to 2, bf16 off
    acc1, accb = "accelerate-z2-dp1-fp32", "accelerate-z2-dp2-bf16"
    case("accelerate-dp1-saved-load-dp2", "failure", "parallelism_mismatch", acc1, lay_text(acc1),
         "accelerator.load_state on 2 ranks (world size 1 -> 2)", args={"nproc": 2})
    case("accelerate-bf16-saved-fp32-load", "failure", "config_mismatch", accb, lay_text(accb),
         "accelerator.load_state with mixed_precision no (bf16 off in the DeepSpeed plugin)", args={"precision": "fp32"})
    # the path and interrupted-save cells of the direct matrix (zero2-dp1-load-parent-dir,
    # zero2-dp1-load-global-step-dir-explicit-tag, killed-save-zero2-load-explicit-tag): accelerate always
    # passes its tag, so each fails where a direct load with tag=None returns quietly
    case("accelerate-load-tag-dir", "failure", "missing_file", acc, lay_text(acc),
         "accelerator.load_state given pytorch_model/ (the DeepSpeed tag dir inside the checkpoint) for the "
         "checkpoint dir", load_dir="pytorch_model")
    case("accelerate-load-parent-dir", "failure", "missing_file", acc, lay_text(acc),
         "accelerator.load_state given the dir above the checkpoint dir", load_dir="..")
    killed = "killed-save-accelerate-z2-dp1-fp32"
    case("accelerate-killed-save-load", "failure", "partial_checkpoint", killed,
         "accelerate, ZeRO-2, dp 1; save_state SIGKILLed after DeepSpeed wrote the model states file",
         "save interrupted (simulated preemption): no optimizer shard, `latest`, scheduler.bin or RNG state; "
         "accelerator.load_state of it")
    # the direct matrix's remaining cells that accelerate's load_state reaches with these layouts, chosen
    # before any was run: same-size damage (zeros, random bytes), an unreadable model-states file, a layer
    # added or removed since the save, torch's forced weights_only. Not mirrored (no accelerate layout or
    # worker hook for them): ZeRO-1's ds_version check, param groups, SGD saved, universal, a killed load.
    ms = "pytorch_model/mp_rank_00_model_states.pt"
    for id, lay, f, fn in [("accelerate-optim-shard-zeroed", acc, f"pytorch_model/{OPT1}", "zero_fill"),
                           ("accelerate-optim-shard-random", acc, f"pytorch_model/{OPT1}", "random_fill"),
                           ("accelerate-zero3-optim-shard-zeroed", acc3, f"pytorch_model/{OPT1}", "zero_fill"),
                           ("accelerate-model-states-zeroed", acc, ms, "zero_fill"),
                           ("accelerate-model-states-random", acc, ms, "random_fill")]:
        what = {"zero_fill": "overwritten with zero bytes (same size)", "random_fill": "overwritten with random bytes (same size)"}[fn]
        case(id, "failure", "corrupt_file", lay, lay_text(lay), f"{f} {what}", inject=[(fn, f)])
    case("accelerate-model-states-unreadable", "failure", "permission_denied", acc, lay_text(acc),
         f"chmod 000 {ms}; loaded as uid 65534", inject=[("chmod", ms, 0)], user="nobody")
    case("accelerate-model-extra-layer", "failure", "model_mismatch", acc, lay_text(acc),
         "accelerator.load_state into the model with a third decoder layer (2 saved)", args={"model": "layers3"})
    case("accelerate-model-removed-layer", "failure", "model_mismatch", acc, lay_text(acc),
         "accelerator.load_state into the model with one decoder layer (2 saved)", args={"model": "layers1"})
    case("accelerate-load-torch-force-weights-only", "failure", "unsafe_load_blocked", acc, lay_text(acc),
         "healthy checkpoint; TORCH_FORCE_WEIGHTS_ONLY_LOAD=1 in the environment",
         env={"TORCH_FORCE_WEIGHTS_ONLY_LOAD": "1"})
    # ------------------------------------------------------------ TRL SFTTrainer + DeepSpeed config
    t2, t3 = "trl-z2-dp2-fp32", "trl-z3-dp2-fp32"
    case("trl-zero2-saved-stage3-resume", "failure", "zero_stage_mismatch", t2, lay_text(t2),
         "SFTTrainer resume_from_checkpoint=True with zero_optimization.stage 3 in the DeepSpeed config",
         args={"stage": 3})
    case("trl-zero3-saved-stage2-resume", "failure", "zero_stage_mismatch", t3, lay_text(t3),
         "SFTTrainer resume_from_checkpoint=True with zero_optimization.stage 2 in the DeepSpeed config",
         args={"stage": 2})
    case("trl-dp2-saved-resume-dp1", "failure", "parallelism_mismatch", t2, lay_text(t2),
         "SFTTrainer resume_from_checkpoint=True on 1 rank (world size 2 -> 1)", args={"nproc": 1})
    case("trl-zero3-dp2-saved-resume-dp1", "failure", "parallelism_mismatch", t3, lay_text(t3),
         "SFTTrainer resume_from_checkpoint=True on 1 rank (world size 2 -> 1)", args={"nproc": 1})
    resume_faults(case, "trl", t2, lay_text(t2))
    case("trl-optim-shard-truncated", "failure", "corrupt_file", t2, lay_text(t2),
         f"{CK}/{T}/{OPT1} truncated to half its size", inject=[("truncate_half", f"{CK}/{T}/{OPT1}")])
    # ------------------------------------------------------------ PEFT adapters
    case("peft-adapter-into-other-size-base", "failure", "model_mismatch", pre, lay_text(pre),
         "LoRA adapter of a hidden-64 model loaded with PeftModel.from_pretrained into a hidden-96 base",
         load_dir="adapter", args={"model": "hidden"}, flags=["--load-as", "adapter"])
    case("peft-full-model-loaded-as-adapter", "failure", "missing_file", pre, lay_text(pre),
         "a full save_pretrained model dir given to PeftModel.from_pretrained as the adapter",
         load_dir="model", flags=["--load-as", "adapter"])
    case("peft-adapter-load", "clean", None, pre, f"{lay_text(pre)}: LoRA adapter loaded into its base model",
         "none (healthy run)", load_dir="adapter", flags=["--load-as", "adapter"])
    # ------------------------------------------------------------ safetensors through from_pretrained
    case("pretrained-model-load", "clean", None, pre, f"{lay_text(pre)}: from_pretrained of the saved model",
         "none (healthy run)", load_dir="model")
    for id, inj, what in [
            ("safetensors-truncated", ("truncate_half", "model/model.safetensors"), "truncated to half its size"),
            ("safetensors-header-json-damaged", ("overwrite_bytes", "model/model.safetensors", 8, "00" * 16),
             "the first 16 bytes of its JSON header overwritten with zero bytes"),
            ("safetensors-header-size-damaged", ("overwrite_bytes", "model/model.safetensors", 0, "0000000000010000"),
             "its 8-byte header length overwritten with 2**40")]:
        case(id, "failure", "corrupt_file", pre, lay_text(pre),
             f"model/model.safetensors {what}; AutoModelForCausalLM.from_pretrained", inject=[inj], load_dir="model")
    # ------------------------------------------------------------ Lightning's ZeRO converter (runs on CPU)
    # Lightning's DeepSpeedStrategy cannot save on CPU (below), but its converter
    # (convert_zero_checkpoint_to_fp32_state_dict, what Lightning's docs give to get the weights
    # out of a DeepSpeed dir) runs anywhere: here on checkpoints DeepSpeed saved directly.
    for id, lay, inj, given, category, what in [
            ("lightning-convert-tag-dir-given", "z2-dp2-fp32", [], f"{{ckpt}}/{T}", "missing_file",
             f"the tag dir ({T}) given where the dir holding `latest` is expected"),
            ("lightning-convert-latest-deleted", "z2-dp2-fp32", [("delete", "latest")], "{ckpt}", "missing_file",
             "deleted latest"),
            ("lightning-convert-optim-shard-deleted", "z2-dp2-fp32", [("delete", f"{T}/{OPT1}")], "{ckpt}",
             "missing_file", f"deleted {T}/{OPT1}"),
            ("lightning-convert-optim-shard-truncated", "z2-dp2-fp32", [("truncate_half", f"{T}/{OPT1}")], "{ckpt}",
             "corrupt_file", f"{T}/{OPT1} truncated to half its size"),
            ("lightning-convert-zero3-rank0-model-states-deleted", "z3-dp2-fp32",
             [("delete", f"{T}/zero_pp_rank_0_mp_rank_00_model_states.pt")], "{ckpt}", "missing_file",
             f"deleted {T}/zero_pp_rank_0_mp_rank_00_model_states.pt (DeepSpeed's part reads the other rank's; "
             "Lightning's own step then opens rank 0's)"),
            ("lightning-convert-zero0-checkpoint", "z0-dp1-fp32", [], "{ckpt}", "zero_stage_mismatch",
             "a stage-0 (non-ZeRO) checkpoint given to the ZeRO converter")]:
        case(id, "failure", category, lay, lay_text(lay),
             f"{what}; Lightning's convert_zero_checkpoint_to_fp32_state_dict", run="cmd", inject=inj,
             argv=["{py}", "-c", LIGHTNING_CONVERT, given, "{ckpt}/lightning_model.pt"], packages=["lightning"])
    # ------------------------------------------------------------ Lightning DeepSpeedStrategy
    case("lightning-deepspeed-resume-on-cpu", "negative", "unknown", None,
         "Lightning Trainer(strategy=DeepSpeedStrategy(stage=2)) on 2 CPU ranks, fit(ckpt_path=...)",
         "none injected: Lightning refuses DeepSpeedStrategy on a CPU accelerator before any checkpoint IO",
         run="cmd", argv=LIGHTNING, packages=["lightning"],
         note="Lightning's DeepSpeedStrategy (and Fabric's) requires CUDA: no Lightning checkpoint can be saved or "
              "resumed with DeepSpeed on this CPU-only machine")


def resume_faults(case, prefix, layout, text, trainer_state=True):
    """The faults of a Trainer checkpoint-N every trainer built on transformers' Trainer resumes the
    same way (the Trainer itself, TRL): its files or DeepSpeed's inside it deleted, another run's."""
    if trainer_state:
        case(f"{prefix}-trainer-state-deleted", "failure", "missing_file", layout, text,
             f"deleted {CK}/trainer_state.json; resume_from_checkpoint='{CK}'",
             inject=[("delete", f"{CK}/trainer_state.json")], load_dir=CK)
    case(f"{prefix}-optim-shard-deleted", "failure", "missing_file", layout, text,
         f"deleted {CK}/{T}/{OPT1}", inject=[("delete", f"{CK}/{T}/{OPT1}")])
    case(f"{prefix}-latest-deleted", "failure", "missing_file", layout, text,
         f"deleted {CK}/latest (DeepSpeed's pointer to {T})", inject=[("delete", f"{CK}/latest")])
    # what save_only_model leaves: the Trainer's files, none of DeepSpeed's (its tag dir, `latest`, the
    # recovery scripts its save copies in)
    case(f"{prefix}-global-step-dir-deleted", "failure", "partial_checkpoint", layout, text,
         f"deleted {CK}/{T}/, {CK}/latest and DeepSpeed's scripts in {CK} (the Trainer files stay: a "
         "weights-only checkpoint-N)",
         inject=[("delete", f"{CK}/{T}"), ("delete", f"{CK}/latest"), ("delete", f"{CK}/zero_to_*.py")])
    # a clean-up that removed the big tag dir of a whole save: `latest` still names it
    case(f"{prefix}-global-step-dir-deleted-latest-kept", "failure", "missing_file", layout, text,
         f"deleted {CK}/{T}/ only (`latest` still names it)", inject=[("delete", f"{CK}/{T}")])
    case(f"{prefix}-checkpoint-from-other-run", "failure", "model_mismatch", layout, text,
         f"resume from {CK} of another run: the model has hidden size 96, the checkpoint 64",
         args={"model": "hidden"})
