"""The code around DeepSpeed that loads, resumes and converts checkpoints: what the site catalogue
reads beyond the installed DeepSpeed and torch (issue 42, item 1).

`DEEPSPEED_LEGACY` names the load path of the releases before 0.10 (ZeRO stage 1 and 2 had their
own files, the optimizers an `FP16_` prefix); it joins triage.kb.sites.SCOPES wherever DeepSpeed
is read, so every release is read alike. `PYPI` and `REPOSITORIES` are read only by
triage.kb.site_history_build (from PyPI's files, and from repository snapshots) into
triage/kb/site_history.json: none of them is installed or imported here.
Scopes are (package, file glob, regex full-matched against the qualified or the bare function
name; None = the whole file), as in triage.kb.sites.SCOPES; for a repository the package is the
project's name and the glob is relative to the repository root.
"""

from __future__ import annotations

_OLD_ZERO = (r"load_state_dict|_rigid_load_state_dict|_elastic_load_state_dict|_load_\w+|_restore_\w+"
             r"|_retrieve_\w+|refresh_fp32_params|_get_\w+_without_padding|_partition_base_optimizer_state")

DEEPSPEED_LEGACY: tuple[tuple[str, str, str | None], ...] = (
    ("deepspeed", "runtime/zero/stage1.py", rf"FP16_DeepSpeedZeroOptimizer_Stage1\.({_OLD_ZERO})"),
    ("deepspeed", "runtime/zero/stage2.py", rf"FP16_DeepSpeedZeroOptimizer\.({_OLD_ZERO})"),
    ("deepspeed", "runtime/zero/stage3.py", rf"FP16_DeepSpeedZeroOptimizer_Stage3\.({_OLD_ZERO})"),
)

# The inference loaders (checkpoints.json descriptors, per-model key lookups): every release.
DEEPSPEED_INFERENCE: tuple[tuple[str, str, str | None], ...] = (
    ("deepspeed", "inference/engine.py",
     r"InferenceEngine\.(_load_checkpoint|_get_all_ckpt_names|_get_ckpt_name|load_model_with_checkpoint)"),
    ("deepspeed", "module_inject/load_checkpoint.py", None),
)

_TRL_RESUME = (r"\w+\.(_load_from_checkpoint|_load_optimizer_and_scheduler|_load_rng_state|_load_model_hook"
               r"|_load_best_model)")
_TRL_VALUE_HEAD = r"\w+\.(from_pretrained|_get_checkpoint_from_hub|add_and_load_reward_modeling_adapter|post_init)"

# import name -> (releases read, scopes). Wheels for these (pure Python), read with `ast`.
PYPI: dict[str, tuple[tuple[str, ...], tuple[tuple[str, str, str | None], ...]]] = {
    "transformers": (("4.30.2", "4.40.2", "4.46.3", "4.57.6", "5.25.0"), (
        ("transformers", "trainer.py",
         r"Trainer\.(_load_from_checkpoint|_load_rng_state|_load_optimizer_and_scheduler|_load_best_model"
         r"|_load_callback_state|_load_scaler|_issue_warnings_after_load)"),
        ("transformers", "integrations/deepspeed.py", None),
        ("transformers", "deepspeed.py", None),  # before 4.31
        ("transformers", "modeling_utils.py",
         r"load_state_dict|load_sharded_checkpoint|_load_state_dict_into_model|_load_state_dict_into_meta_model"
         r"|PreTrainedModel\._load_pretrained_model|_find_missing_and_unexpected_keys|_find_mismatched_keys"),
    )),
    "accelerate": (("0.20.3", "0.27.2", "0.34.2", "1.5.2", "1.10.1", "1.16.0"), (
        ("accelerate", "accelerator.py", r"Accelerator\.load_state"),
        ("accelerate", "checkpointing.py", r"load_accelerator_state|load_custom_state"),
        ("accelerate", "utils/deepspeed.py", None),
    )),
    "safetensors": (("0.3.3", "0.4.5", "0.6.2", "0.7.0"), (
        ("safetensors", "torch.py", None),  # the Python layer; the Rust core's messages are no Python
    )),
    "pytorch_lightning": (("1.9.5", "2.2.5", "2.5.0"), (
        ("pytorch_lightning", "strategies/deepspeed.py", None),  # the strategy, its checks and its loads
        ("pytorch_lightning", "utilities/deepspeed.py", None),  # its ZeRO-to-fp32 converter
    )),
    "peft": (("0.6.2", "0.10.0", "0.13.2"), (
        ("peft", "utils/save_and_load.py", r"load_peft_weights|set_peft_model_state_dict|_find_mismatched_keys"),
        ("peft", "peft_model.py", r"PeftModel\.(from_pretrained|load_adapter)"),
    )),
    # TRL resumes through the transformers Trainer; its own part: the trainers' resume hooks, the
    # value-head models' loading (moved under experimental/ in 0.29) and the diffusion pipelines'.
    "trl": (("0.7.11", "0.9.6", "0.12.2", "0.19.1", "0.29.1", "1.16.0"), (
        ("trl", "trainer/*.py", _TRL_RESUME),
        ("trl", "experimental/*/*.py", _TRL_RESUME),
        ("trl", "models/modeling_base.py", _TRL_VALUE_HEAD),
        ("trl", "models/modeling_value_head.py", _TRL_VALUE_HEAD),
        ("trl", "experimental/ppo/modeling_value_head.py", _TRL_VALUE_HEAD),
        ("trl", "models/modeling_sd_base.py", r"\w+\.load_checkpoint"),
    )),
    # Lightning's DeepSpeed strategy loads through Fabric's from 2.0: its checks of the checkpoint
    # folder and the state, the strategy's load, and Fabric's own load of a checkpoint file.
    "lightning_fabric": (("1.9.5", "2.2.5", "2.5.0", "2.6.6"), (
        ("lightning_fabric", "strategies/deepspeed.py", None),
        ("lightning_fabric", "strategies/strategy.py",
         r"Strategy\.(load_checkpoint|load_module_state_dict|_load_checkpoint)"),
        ("lightning_fabric", "utilities/load.py", r"_lazy_load|_load_distributed_checkpoint|_move_state_into"),
        ("lightning_fabric", "fabric.py", r"Fabric\.(load|load_raw)"),
    )),
}
# The PyPI name of a project whose import name differs.
PYPI_NAMES = {"pytorch_lightning": "pytorch-lightning", "lightning_fabric": "lightning-fabric"}

# project -> (GitHub repository, scopes), read from one snapshot each.
REPOSITORIES: dict[str, tuple[str, tuple[tuple[str, str, str | None], ...]]] = {
    "megatron-deepspeed": ("microsoft/Megatron-DeepSpeed", (
        ("megatron-deepspeed", "megatron/checkpointing.py", None),
        ("megatron-deepspeed", "tools/convert_checkpoint/*.py", None),
        ("megatron-deepspeed", "tools/checkpoint_*.py", None),
    )),
    "megatron-lm": ("NVIDIA/Megatron-LM", (
        ("megatron-lm", "megatron/training/checkpointing.py", None),
        ("megatron-lm", "megatron/checkpointing.py", None),  # before megatron/training/
        ("megatron-lm", "megatron/core/dist_checkpointing/*.py", None),
        ("megatron-lm", "megatron/core/dist_checkpointing/strategies/*.py", None),
    )),
    "gpt-neox": ("EleutherAI/gpt-neox", (
        ("gpt-neox", "megatron/checkpointing.py", None),
        ("gpt-neox", "tools/ckpts/*.py", None),
    )),
}
