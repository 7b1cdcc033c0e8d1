"""Issue 42, item 5: a 0.19.8 / torch 2.13 load-path site counts as covered only when a rule
describes its own failure; the sites no rule describes are exactly those with no checkpoint cause."""

import pytest

from triage.kb.coverage import coverage, rules_covering

# (package, file, function, start of the message, or of the source line of a bare raise) -> why no
# rule describes it. A site missing here and covered by no rule fails the test: write its rule.
NO_CHECKPOINT_CAUSE = {
    ("deepspeed", "runtime/engine.py", "DeepSpeedEngine.load_moe_state_dict", "Expert checkpoint file is corrupt: key"):
        "AutoEP folded expert file without the fused key: a foreign file or another module prefix; needs several devices to tell",
    ("deepspeed", "runtime/engine.py", "DeepSpeedEngine.load_moe_state_dict", "Expert checkpoint file is corrupt: expected 2D"):
        "as above: the expert tensor's layout, not reproducible without an AutoEP run",
    ("deepspeed", "checkpoint/ds_to_universal.py", "_consolidate_zero3_autoep_expert_states", "Missing optimizer state"):
        "an AutoEP ZeRO-3 rank without optimizer state for one expert: cause not established without an AutoEP run",
    ("deepspeed", "runtime/pipe/engine.py", "PipelineEngine.load_module_state_dict", "custom_load_fn not supported"):
        "an API argument of the caller (custom_load_fn with a PipelineEngine)",
    ("deepspeed", "inference/engine.py", "InferenceEngine._load_checkpoint", "pipeline parallelism is currently"):
        "a PipelineModule given to init_inference: the model object, before any file is read",
    ("deepspeed", "utils/zero_to_fp32.py", "convert_zero_checkpoint_to_state_dict", "raise"):
        "re-raises the ImportError of a missing safetensors package",
    ("deepspeed", "checkpoint/autoep_affine.py", "extract_autoep_rank_tensor", "target_map must be"):
        "an argument type check inside DeepSpeed (a programming error)",
    ("deepspeed", "checkpoint/reshape_meg_2d.py", "meg_2d_parallel_map.add_data", "assert type(data) is list"):
        "an argument type check inside DeepSpeed (a programming error)",
    ("deepspeed", "checkpoint/reshape_utils.py", "merge_state_list", "{_key_list_to_string(key_list)}"):
        "its message is a key list with no words of its own for a rule to name",
    ("deepspeed", "checkpoint/reshape_utils.py", "merge_state", "key_list = {key_list_string}"):
        "its message is a key list with no words of its own for a rule to name",
    ("torch", "nn/modules/module.py", "Module._load_from_state_dict", "module_load returned one of self or other"):
        "a tensor subclass's module_load override (code, not the checkpoint)",
    ("torch", "serialization.py", "_check_seekable.raise_err_msg", "raise e"):
        "re-raises the seek error unchanged when it has no args; DS-C202 names the form with torch's text",
    ("torch", "serialization.py", "load", "Only one of `TORCH_FORCE_WEIGHTS_ONLY_LOAD`"):
        "two environment variables set at once",
    ("torch", "serialization.py", "load", "Can not safely load weights when explicit pickle_module"):
        "torch.load's arguments (pickle_module with weights_only)",
    ("torch", "serialization.py", "load", "Loading safetensors file with dict map_location"):
        "torch.load's arguments (map_location type)",
    ("torch", "serialization.py", "load", "Loading safetensors file with callable map_location"):
        "torch.load's arguments (map_location type)",
    ("torch", "serialization.py", "load", "Attempting to load a safetensors file but safetensors is not"):
        "a package missing from the environment",
    ("torch", "serialization.py", "load", "f must be a file path in order to use the mmap"):
        "torch.load's arguments (mmap on a file object)",
    ("torch", "serialization.py", "load", "_get_wo_message(str(e))"):
        "wraps the restricted unpickler's error: each cause is covered at its own site (DS-U001, DS-X002, DS-X004)",
    ("torch", "serialization.py", "_legacy_load", "{f.name} is a zip archive"):
        "unreachable from torch.load: a zip file takes the zip path before _legacy_load",
    ("torch", "serialization.py", "_load.load_tensor", "This is a debug assert"):
        "only with TORCH_SERIALIZATION_DEBUG set (a debugging aid)",
    ("torch", "_weights_only_unpickler.py", "Unpickler.load", "Expected bytes, got"):
        "unreachable: a file's read() returns bytes",
    ("torch", "_weights_only_unpickler.py", "Unpickler.load", "negative argument"):
        "unreachable: the memo index is read unsigned",
}

# A site of each failure issue 42 found without its own rule, and the rule that now describes it.
OWN_RULE = [
    ("torch", "_validate_device", "Attempting to deserialize object on a", "DS-C205"),
    ("torch", "default_restore_location", "don't know how to restore", "DS-C205"),
    ("torch", "load", "Cannot use ``weights_only=True`` with TorchScript", "DS-U003"),
    ("torch", "_legacy_load.legacy_load", "Cannot use ``weights_only=True`` with files saved", "DS-U003"),
    ("torch", "Module.load_state_dict", "Expected state_dict to be dict-like", "DS-M008"),
    ("torch", "Module.load_state_dict", "Missing key(s) in state_dict", "DS-M001"),
    ("torch", "Module._load_from_state_dict", "size mismatch for", "DS-M001"),
    ("torch", "Module._load_from_state_dict", "While {action} the parameter named", "DS-H006"),
    ("torch", "Unpickler.load", "Can only append to lists", "DS-X002"),
    ("torch", "Unpickler._check_set_item_target", "Can only {opcode} for dict", "DS-X002"),
    ("deepspeed", "DeepSpeedEngine._load_zero_checkpoint", "Only stage3 support", "DS-C206"),
    ("deepspeed", "DeepSpeedZeroOptimizer._restore_step_from_elastic_checkpoint", "assert BASE_OPTIMIZER_STATE_STEP", "DS-B204"),
    ("deepspeed", "DeepSpeedEngine.load_moe_state_dict", "Expert checkpoint file not found", "DS-F001"),
    ("deepspeed", "SDLoaderBase.load", "assert os.path.exists(load_path)", "DS-F001"),
    ("deepspeed", "SDLoaderFactory.get_sd_loader", "{} checkpoint type is not supported", "DS-V302"),
    ("deepspeed", "MegatronSDLoader.split_state_dict", "assert value.shape[1] % num_to_split == 0", "DS-P002"),
    ("deepspeed", "get_model_3d_descriptor_from_metadata", "Checkpoint {CHECKPOINT_PARALLEL_DIMS} disagrees", "DS-X005"),
    ("deepspeed", "DeepSpeedZeroOptimizer_Stage3._rigid_load_state_dict", "AutoEP ZeRO-3 checkpoints can only", "DS-P103"),
    ("deepspeed", "_raise_if_stage3_autoep_universal_conversion", "Stage 3 universal checkpoint conversion", "DS-B104"),
    ("deepspeed", "plan_transfer", "source describes", "DS-P104"),
]


def _key(site):
    return site.package, site.file, site.function, site.message if site.message is not None else site.code


def _listed(site) -> bool:
    package, file, function, text = _key(site)
    return any((package, file, function) == entry[:3] and text.startswith(entry[3]) for entry in NO_CHECKPOINT_CAUSE)


def test_every_uncovered_site_has_no_checkpoint_cause(load_sites, rules):
    sites, _ = load_sites
    unexplained = [_key(site) for site, ids in coverage(sites, rules.rules) if not ids and not _listed(site)]
    assert not unexplained, f"{len(unexplained)} sites no rule describes: {unexplained[:10]}"


def test_each_listed_site_is_catalogued(load_sites):
    sites, _ = load_sites
    missing = [entry for entry in NO_CHECKPOINT_CAUSE
               if not any(_key(site)[:3] == entry[:3] and _key(site)[3].startswith(entry[3]) for site in sites)]
    assert not missing


@pytest.mark.parametrize("package, function, text, rule", OWN_RULE, ids=[f"{r}-{f}" for _, f, _, r in OWN_RULE])
def test_the_failure_has_its_own_rule(load_sites, rules, package, function, text, rule):
    sites, _ = load_sites
    site = next(s for s in sites if s.package == package and s.function == function and _key(s)[3].startswith(text))
    assert rule in rules_covering(site, rules.rules)
