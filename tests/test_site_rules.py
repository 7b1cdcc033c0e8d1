"""Rules for what the site catalogue finds around DeepSpeed (issue 42, item 3): the load, resume and
convert sites of Megatron-DeepSpeed, Megatron-LM, GPT-NeoX, transformers, accelerate, safetensors,
Lightning, PEFT and TRL are covered by the rule that explains their failure (strictly: the rule
names the site's message), and an example that could not be captured here is the site's own
template, values filled in, never a thread's text."""

import pytest

from triage.kb import site_history
from triage.kb.coverage import rules_covering
from triage.kb.messages import fold, pieces
from triage.kb.model import compile_rule
from triage.kb.sites import Site

# (project, file, function, words of the message, rules that must cover every such site)
COVERED = [
    ("megatron-deepspeed", "megatron/checkpointing.py", "check_checkpoint_args._compare", "value from checkpoint",
     {"DS-M302", "DS-P301"}),
    ("megatron-lm", "megatron/training/checkpointing.py", "check_checkpoint_args._compare", "value from checkpoint",
     {"DS-M302", "DS-P301"}),
    ("gpt-neox", "megatron/checkpointing.py", "check_checkpoint_args", "currently set argument",
     {"DS-M302", "DS-P301"}),
    ("megatron-deepspeed", "megatron/checkpointing.py", "load_checkpoint", "Unable to load rng state", {"DS-H301"}),
    ("megatron-lm", "megatron/training/checkpointing.py", "load_checkpoint", "Unable to load rng state", {"DS-H301"}),
    ("gpt-neox", "megatron/checkpointing.py", "load_checkpoint", "Specify --no-load-rng", {"DS-H301"}),
    ("megatron-deepspeed", "megatron/checkpointing.py", "load_checkpoint", "Specify --no-load-optim", {"DS-H004"}),
    ("megatron-lm", "megatron/training/checkpointing.py", "load_checkpoint", "Specify --no-load-optim", {"DS-H004"}),
    ("megatron-deepspeed", "megatron/checkpointing.py", "load_checkpoint", "A metadata file exists", {"DS-H302"}),
    ("megatron-lm", "megatron/training/checkpointing.py", "load_checkpoint", "A metadata file exists", {"DS-H302"}),
    ("gpt-neox", "megatron/checkpointing.py", "load_checkpoint", "Unable to load iteration", {"DS-H302"}),
    ("megatron-deepspeed", "megatron/checkpointing.py", "read_metadata", "metadata file", {"DS-X302"}),
    ("megatron-lm", "megatron/training/checkpointing.py", "read_metadata", "metadata file", {"DS-X302"}),
    ("megatron-deepspeed", "megatron/checkpointing.py", "set_checkpoint_version", "versions do not match", {"DS-V305"}),
    ("megatron-lm", "megatron/training/checkpointing.py", "fix_query_key_value_ordering", "Invalid checkpoint version",
     {"DS-V305"}),
    ("megatron-lm", "megatron/core/dist_checkpointing/validation.py", "verify_checkpoint", "does not exist",
     {"DS-F306"}),
    ("megatron-lm", "megatron/core/dist_checkpointing/strategies/common.py", "load_common", "does not exist",
     {"DS-F306"}),
    ("megatron-lm", "megatron/training/checkpointing.py", "load_checkpoint", "No checkpoint found", {"DS-F306"}),
    ("gpt-neox", "megatron/checkpointing.py", "load_checkpoint", "for iteration", {"DS-F306"}),
    ("megatron-lm", "megatron/core/dist_checkpointing/validation.py", "verify_checkpoint", "is not a distributed",
     {"DS-C301"}),
    ("megatron-lm", "megatron/training/checkpointing.py", "_load_global_dist_base_checkpoint", "Detected load",
     {"DS-C301"}),
    ("megatron-lm", "megatron/training/checkpointing.py", "load_checkpoint", "not supported for DistributedOptimizer",
     {"DS-P301"}),
    ("megatron-lm", "megatron/training/checkpointing.py", "load_checkpoint", "Fully parallel load", {"DS-C301"}),
    ("megatron-lm", "megatron/core/dist_checkpointing/validation.py", "maybe_report_missing_and_unexpected_keys",
     "missing in the provided", {"DS-M303"}),
    ("megatron-lm", "megatron/core/dist_checkpointing/validation.py", "_verify_integrity_manifest_impl",
     "verification failed", {"DS-X303"}),
    ("megatron-deepspeed", "tools/convert_checkpoint/deepspeed_checkpoint.py", "DeepSpeedCheckpoint._sanity_check", "",
     {"DS-F103"}),  # bare asserts of Megatron-DeepSpeed's copy of DeepSpeedCheckpoint: named by their frame
    ("megatron-deepspeed", "tools/convert_checkpoint/deepspeed_checkpoint.py",
     "DeepSpeedCheckpoint.get_transformer_state", "", {"DS-P102"}),
    ("transformers", "trainer.py", "Trainer._load_from_checkpoint", "Can't find a valid checkpoint", {"DS-F307"}),
    ("transformers", "trainer.py", "Trainer._load_from_checkpoint", "only supported when using PyTorch FSDP",
     {"DS-C303"}),
    ("transformers", "modeling_utils.py", "load_sharded_checkpoint", "Can't find a checkpoint index", {"DS-F307"}),
    ("transformers", "modeling_utils.py", "load_state_dict", "git-lfs", {"DS-X004"}),
    ("transformers", "modeling_utils.py", "load_sharded_checkpoint", "Error(s) in loading", {"DS-M001"}),
    ("transformers", "modeling_utils.py", "PreTrainedModel._load_pretrained_model", "Error(s) in loading", {"DS-M001"}),
    ("transformers", "integrations/deepspeed.py", "deepspeed_load_checkpoint", "Can't find a valid", {"DS-F304"}),
    ("transformers", "integrations/deepspeed.py", "deepspeed_load_checkpoint", "failed to resume", {"DS-F004"}),
    ("transformers", "deepspeed.py", "deepspeed_load_checkpoint", "failed to resume", {"DS-F004"}),
    ("accelerate", "accelerator.py", "Accelerator.load_state", "but folder does not exist", {"DS-F305"}),
    ("accelerate", "accelerator.py", "Accelerator.load_state", "Number of custom checkpoints", {"DS-C302"}),
    ("safetensors", "torch.py", "load_model", "Error(s) in loading", {"DS-M001"}),
    ("pytorch_lightning", "utilities/deepspeed.py", "ds_checkpoint_dir", "doesn't exist", {"DS-F101"}),
    ("pytorch_lightning", "utilities/deepspeed.py", "ds_checkpoint_dir", "Unable to find 'latest'", {"DS-F102"}),
    ("pytorch_lightning", "strategies/deepspeed.py", "DeepSpeedStrategy.load_checkpoint",
     "unable to load the checkpoint", {"DS-F004"}),
    ("lightning_fabric", "strategies/deepspeed.py", "_validate_checkpoint_directory", "", {"DS-F304"}),
    ("peft", "utils/save_and_load.py", "load_peft_weights", "Can't find weights", {"DS-F308"}),
    ("trl", "models/modeling_base.py", "PreTrainedModelWrapper.add_and_load_reward_modeling_adapter",
     "Could not find adapter", {"DS-F308"}),
]


def _sites(project, file, function, words):
    history = site_history.load()["packages"][project]
    return [site_history.as_site(project, e) for e in history["sites"]
            if e["file"] == file and e["function"] == function and words in (e["message"] or "")]


@pytest.mark.parametrize("project, file, function, words, expected", COVERED,
                         ids=[f"{p}:{fn}:{w[:24]}" for p, _, fn, w, _ in COVERED])
def test_the_site_is_covered_by_the_rule_of_its_cause(rules, project, file, function, words, expected):
    sites = _sites(project, file, function, words)
    assert sites, f"the catalogue lost {project}/{file} {function} ({words!r})"
    for site in sites:
        assert expected <= set(rules_covering(site, rules.rules)), (site.message, rules_covering(site, rules.rules))


def test_every_project_around_deepspeed_has_sites_a_rule_covers(rules):
    """Before issue 42's item 3 no rule named a Megatron, NeoX, transformers or accelerate site."""
    for project, data in site_history.load()["packages"].items():
        covered = [e for e in data["sites"] if rules_covering(site_history.as_site(project, e), rules.rules)]
        assert covered, f"no {project} site is covered by a rule"


def _logged(message="Unable to load rng state from checkpoint {}. Specify --no-load-rng, exiting ..."):
    return Site("megatron-lm", "megatron/training/checkpointing.py", "load_checkpoint", 10, "logged", "SystemExit",
                message, "print_rank_0(")


def _rule(pattern):
    return compile_rule({"id": "DS-K001", "category": "partial_checkpoint", "title": "t" * 10,
                         "signature": {"patterns": [pattern]},
                         "references": [{"source": "megatron-lm/megatron/training/checkpointing.py",
                                         "function": "load_checkpoint"}]})


@pytest.mark.parametrize("pattern, covers", [
    ({"line": r"Unable to load rng state from checkpoint \S"}, True),  # a printed line is named by a line
    ({"line": "/data/ckpt"}, False),  # words of a filled-in value only
    ({"line": "Unable to load optimizer"}, False),  # another message of the function
    ({"line": "."}, False),  # any text names no message
])
def test_a_message_logged_before_a_failure_is_named_by_a_line_pattern(pattern, covers):
    """Megatron prints why and calls sys.exit(): no exception carries the message, so a rule can name
    it only by the line the log shows (a raise site still needs its message or its raise line)."""
    assert (rules_covering(_logged(), [_rule(pattern)]) == ["DS-K001"]) is covers


def _template_examples(rules):
    return [(rule.id, example) for rule in rules.rules for example in rule.data["examples"]
            if example.get("source") == "template"]


def test_a_template_example_is_a_catalogued_site_s_message_filled_in(rules):
    """Each example marked `source: template` holds, in order, all the literal text of the message
    of a site the catalogue read from the source, and says where (its note)."""
    every = [pieces(site.message) for site, _ in site_history.every_site()]
    every = [p for p in every if p]
    examples = _template_examples(rules)
    assert len(examples) >= 10
    for rule_id, example in examples:
        text = fold(example["log"])
        assert example.get("note"), f"{rule_id}: a template example says which site it fills in"
        assert any(_in_order(parts, text) for parts in every), f"{rule_id}: {example['log'][:120]!r}: no site's"


def _in_order(parts, text):
    at = 0
    for part in parts:
        at = text.find(part, at)
        if at < 0:
            return False
        at += len(part)
    return True
