"""What the loading job is set up with: stage, degrees, precision, pipeline, its ds_config, its
model and optimizer, its DeepSpeed release.

In order: the command line (--stage, --world-size, --config), then what the failing job's own
log printed (`triage`): DeepSpeed's engine configuration and distributed-groups summary at INFO
level, the PipelineEngine's start-up, DeepSpeed's version banner, and the launch command a job
script echoed (`set -x`; the library's default WARNING level prints none of DeepSpeed's lines).
What the checkpoint itself says is the saved side, never the load's: the probes compare the
two. Each value keeps where it came from (`sources`), and the probes say it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from triage.errors import BadInput
from triage.logs.inputs import json_object, read_file

MAX_CONFIG_BYTES = 4 * 1024 * 1024

# DeepSpeed's `DeepSpeedEngine configuration:` dump and its optimizer banner.
LOG_STAGE = (re.compile(r"zero_optimization_stage \.+ (\d)\b"), re.compile(r"Creating \S+ ZeRO stage (\d) optimizer"))
# [ \t]*, not \s*: under MULTILINE \s crosses lines, and on a run of blank lines every line
# start would scan the rest of the run (quadratic).
LOG_WORLD = (re.compile(r"^[ \t]*world_size \.+ (\d+)[ \t]*$", re.M), re.compile(r"Config mesh_device \S+ world_size = (\d+)"))
# ZeRO's refusal names the load's data-parallel size: a framework's log may print nothing else (read
# after the engine configuration and the launch command)
LOG_DP_REFUSED = re.compile(r"used a DP world size of \d+ but the current world size is (\d+)")
LOG_OPTIMIZER = (re.compile(r"DeepSpeed Basic Optimizer = ([A-Za-z_][\w.]*)"),)
# engine._configure_distributed_model's "distributed groups summary"
LOG_DP = (re.compile(r"\bself\.dp_world_size=(\d+)"),)
LOG_MP = (re.compile(r"\bself\.mp_world_size=(\d+)"),)
# deepspeed.initialize's banner: the release the loading job ran
LOG_DS_VERSION = (re.compile(r"DeepSpeed info: version=(\d[\w.+-]*?),"),)
# The engine configuration's precision lines (0.19: `bfloat16_config .... enabled=True`; older
# releases printed `bfloat16_enabled .... True` / `fp16_enabled .... True`).
LOG_BF16 = re.compile(r"\b(?:bfloat16_config \.+ enabled=|bfloat16_enabled \.+ )(True|False)\b")
LOG_FP16 = re.compile(r"\b(?:float16_config \.+ enabled=|fp16_enabled \.+ )(True|False)\b")
LOG_ENGINE = re.compile(r"DeepSpeedEngine configuration:")
# ZeRO-1/2 flattens each param group of the optimizer it wraps (stage_1_and_2.py __init__)
LOG_GROUP = re.compile(r"Flattening param group (\d+) on ")
# PipelineEngine.__init__ (deepspeed/runtime/pipe/engine.py) after the engine's own start-up, and
# PipelineModule's topology (printed before deepspeed.initialize): the load runs a pipeline engine.
LOG_PIPE_ENGINE = re.compile(r"is_pipe_partitioned=|\bRANK=\d+ STAGE=\d+ LAYERS=\d+")
TOPOLOGY_PIPE = re.compile(r"pipe=(\d+)")  # each rank's pipeline stage in the topology
LOG_TOPOLOGY = re.compile(r"Using topology: \{([^{}\n]*)\}")  # no brace inside: linear on a run of "{"
# A launch command echoed into the job's log (bash -x, srun --verbose, a job script's echo).
LOG_LAUNCH = re.compile(r"(?:\btorchrun\b|\btorch\.distributed\.(?:run|launch)\b|(?:^|[\s/])deepspeed\s)[^\n]*")
LAUNCH_NPROC = re.compile(r"--(?:nproc[_-]per[_-]node|num_gpus|num-gpus)[= ](\d+)\b")
LAUNCH_NNODES = re.compile(r"--(?:nnodes|num_nodes|num-nodes)[= ](\d+)(?![:\d])")
# A checkpoint load in the log: load_checkpoint in a traceback or a job's print, the checkpoint
# engine opening a file (0.9+ "[Torch] Begin Load checkpoint from", older "loading checkpoint:"),
# the missing-`latest` warning, a Trainer's or Lightning's resume. A training run's log (saves only)
# shows none of them.
LOG_LOADS = re.compile(r"load_checkpoint|[Ll]oad(?:ing)? checkpoint|Unable to find latest file|resume_from_checkpoint"
                       r"|Restoring states from the checkpoint")
# Anything of DeepSpeed in a log: its name (banner, frames, logger, launcher) or its checkpoint's
# files. A log with none of it (a from_pretrained or PEFT load, a run that never used DeepSpeed)
# did not need DeepSpeed's engine state from the dir it read.
LOG_DEEPSPEED = re.compile(r"(?i)deepspeed|_(?:model|optim)_states\.pt|global_step\d|zero_to_fp32")
# The bare assert of state_dict_factory.check_ckpt_list: the engine globbed the tag dir for
# model-states files named for its own stage and found none.
LOG_NO_MODEL_STATES = re.compile(r"in check_ckpt_list\n(?:[^\n]*\n){0,4}?[^\n]*\bAssertionError[ \t]*$", re.M)
# The optimizer shard a ZeRO load could not open: its name says the engine's precision (bf16_ or not).
LOG_WANTED_SHARD = re.compile(r"No such file or directory: '[^'\n]*?/(bf16_)?zero_pp_rank_\d+_mp_rank_\d+_optim_states\.pt'")
# The tag a framework passes to load_checkpoint, from its frame: accelerate's load_state passes
# "pytorch_model" (its first model's), transformers' deepspeed_load_checkpoint none (`latest`'s).
LOG_ACCELERATE_LOAD = re.compile(r'accelerate/accelerator\.py", line \d+, in load_state\b')
LOG_TRANSFORMERS_LOAD = re.compile(r'transformers/(?:integrations/)?deepspeed\.py", line \d+, in deepspeed_load_checkpoint\b')
# A path the failing load could not find, as the message names it: any FileNotFoundError, accelerate's
# load_state, PEFT's adapter config lookup (its dir, then the file name).
LOG_MISSING_PATH = (re.compile(r"No such file or directory: '([^'\n]{1,4096})'"),
                    re.compile(r"Tried to find (\S{1,4096}) but folder does not exist"),
                    re.compile(r"Can't find '([\w.-]{1,255})' at '([^'\n]{1,4096})'"))
MAX_MISSING_PATHS = 4
# zero_to_fp32 (deepspeed/utils/zero_to_fp32.py) read the checkpoint: its banner, or a frame of it.
LOG_ZERO_TO_FP32 = re.compile(r"Processing zero checkpoint '|zero_to_fp32\.py\", line \d")
# engine.load_checkpoint's warning names the dir it was given: the load dir.
LOG_LOAD_DIR = (re.compile(r"Unable to find latest file at (\S+)/latest\b"),)
# The checkpoint engine names each file it opens (0.9+: "[Torch] Loading/Begin Load checkpoint from";
# before: "rank: N loading checkpoint: "): its directory is the tag the job loaded.
LOG_LOAD_TAG = (re.compile(r"(?:\[Torch\] (?:Begin Load|Loading) checkpoint from|loading checkpoint:) "
                           r"\S*?/([^/\s]+)/[\w.-]*_states\.pt"),)


@dataclass
class Target:
    stage: int | None = None
    world_size: int | None = None
    config: dict | None = None
    config_path: str | None = None
    model: object = None  # triage.probe.model_file.ModelShapes from --model
    model_path: str | None = None
    optimizer: str | None = None  # --optimizer NAME (AdamW, SGD, ...)
    param_groups: int | None = None  # --param-groups N
    model_claims: object = None  # triage.probe.log_facts.ModelClaims: what torch's load error said
    load_dir: str | None = None  # the dir the job passes to load_checkpoint (--load-dir, the log, triage's --ckpt)
    load_tag: str | None = None  # the tag the job loaded, when the log's checkpoint engine named a file of it
    log_path: str | None = None  # triage: the log file the facts "the log, line N" were read from ('-': stdin)
    dp: int | None = None  # the load's data-parallel degree
    mp: int | None = None  # the load's model-parallel (tensor) degree: DeepSpeed's mp_world_size
    pipeline: bool | None = None  # the load runs a PipelineEngine
    pp: int | None = None  # the load's pipeline stages
    precision: str | None = None  # fp32, bf16 or fp16
    ds_version: str | None = None  # the DeepSpeed release the loading job ran (--deepspeed-version, the log)
    torch_version: str | None = None  # the torch release the loading job runs (--torch-version)
    reader: str | None = None  # "zero_to_fp32" when the log shows that converter reading the checkpoint
    deepspeed_in_log: bool | None = None  # the log shows DeepSpeed at all (LOG_DEEPSPEED); None: no log
    loads_latest: bool = False  # the job passed load_checkpoint no tag: DeepSpeed read `latest` (a framework's frame)
    no_model_states: bool = False  # the load found no model-states file of its stage's naming in the tag (the log)
    bf16_naming: bool | None = None  # the optimizer shard name the load wanted has the bf16_ prefix (the log)
    missing_paths: list[tuple[str, str]] = field(default_factory=list)  # (a path the load did not find, its source)
    without_deepspeed: bool = False  # triage: the job did not go through DeepSpeed (no trace of it, no rule fired)
    sources: dict[str, str] = field(default_factory=dict)  # "stage" -> "--stage" / "--config" / "the log, line N"

    def describe(self, name: str) -> str:
        value = getattr(self, name)
        return f"{value} ({self.sources.get(name, '?')})"


def read_config(path: str) -> dict:
    """The user's ds_config (JSON, as DeepSpeed reads it); BadInput when it cannot be used."""
    try:
        data = read_file(path, MAX_CONFIG_BYTES + 1, what="a ds_config file")
    except BadInput as exc:
        raise BadInput(f"--config: {exc.message}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise BadInput(f"--config {path}: larger than {MAX_CONFIG_BYTES} bytes; not a ds_config file")
    return json_object(data, f"--config {path}", "a ds_config")


def config_stage(config: dict | None) -> int | None:
    zero = (config or {}).get("zero_optimization")
    stage = zero.get("stage", 0) if isinstance(zero, dict) else (0 if config is not None else None)
    return stage if isinstance(stage, int) and not isinstance(stage, bool) else None


def config_precision(config: dict | None) -> str | None:
    """fp16, bf16 or fp32 as a ds_config sets it (None without a config)."""
    if config is None:
        return None
    for name, keys in (("bf16", ("bf16", "bfloat16")), ("fp16", ("fp16",))):
        for key in keys:
            section = config.get(key)
            if isinstance(section, dict) and section.get("enabled") in (True, "true", "True"):
                return name
    return "fp32"


def _config_settings(target: Target, config: dict, source: str) -> None:
    """What a whole ds_config says beyond the stage: precision, pipeline stages, tensor parallel."""
    for name, value in (("precision", config_precision(config)), ("pp", _int_at(config, "pipeline", "stages")),
                        ("mp", _int_at(config, "tensor_parallel", "autotp_size"))):
        if value is not None and getattr(target, name) is None:
            setattr(target, name, value)
            target.sources[name] = source


def _int_at(config: dict, section: str, key: str) -> int | None:
    value = config.get(section, {}).get(key) if isinstance(config.get(section), dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def given_releases(target: Target, ds_version: str | None, torch_version: str | None) -> Target:
    """--deepspeed-version / --torch-version: the loading job's releases beat the log's and this host's."""
    for name, value, option in (("ds_version", ds_version, "--deepspeed-version"),
                                ("torch_version", torch_version, "--torch-version")):
        if value:
            setattr(target, name, value)
            target.sources[name] = option
    return target


def from_args(stage: int | None, world_size: int | None, config_path: str | None, log_text: str | None = None, *,
              model: str | None = None, optimizer: str | None = None, param_groups: int | None = None,
              load_dir: str | None = None) -> Target:
    target = Target()
    if config_path:
        target.config, target.config_path = read_config(config_path), config_path
    if model:
        from triage.probe.model_file import read_model

        target.model, target.model_path = read_model(model), model
        target.sources["model"] = "--model"
    if optimizer:
        target.optimizer, target.sources["optimizer"] = optimizer.strip(), "--optimizer"
    if param_groups is not None:
        target.param_groups, target.sources["param_groups"] = param_groups, "--param-groups"
    if stage is not None:
        target.stage, target.sources["stage"] = stage, "--stage"
    elif target.config is not None and config_stage(target.config) is not None:
        target.stage, target.sources["stage"] = config_stage(target.config), "--config"
    if target.config is not None:
        _config_settings(target, target.config, "--config")
    if load_dir is not None:
        target.load_dir, target.sources["load_dir"] = load_dir, "--load-dir"
    if world_size is not None:
        target.world_size, target.sources["world_size"] = world_size, "--world-size"
    if log_text is not None:
        target.deepspeed_in_log = LOG_DEEPSPEED.search(log_text) is not None
    if log_text:
        _from_log(target, log_text)
    return target


def _from_log(target: Target, whole: str) -> None:
    from triage.probe.log_facts import model_claims, user_config
    from triage.logs.runs import failing_run_start

    # the failing run's own settings: a job log can hold an earlier run with others
    start = failing_run_start(whole)
    skipped, text = whole.count("\n", 0, start), whole[start:]
    if target.config is None:
        config, line = user_config(text)
        line += skipped
        if config is not None:
            target.config, target.sources["config"] = config, f"the log, line {line}"
            if target.stage is None and config_stage(config) is not None:
                target.stage, target.sources["stage"] = config_stage(config), f"the log, line {line}"
            _config_settings(target, config, f"the log, line {line}")
    target.model_claims = model_claims(text) or None
    if target.model_claims is not None:
        target.model_claims.line += skipped  # a line of the whole log, as every other source says
    for name, patterns, kind in (("stage", LOG_STAGE, int), ("world_size", LOG_WORLD, int),
                                 ("optimizer", LOG_OPTIMIZER, str), ("load_dir", LOG_LOAD_DIR, str),
                                 ("load_tag", LOG_LOAD_TAG, str), ("dp", LOG_DP, int), ("mp", LOG_MP, int),
                                 ("ds_version", LOG_DS_VERSION, str)):
        if getattr(target, name) is not None:
            continue
        for pattern in patterns:
            m = pattern.search(text)
            if m:
                line = skipped + text.count("\n", 0, m.start()) + 1
                setattr(target, name, kind(m.group(1)))
                target.sources[name] = f"the log, line {line}"
                break
    _world_from_groups(target)
    _precision_from_log(target, text, skipped)
    _groups_from_log(target, text, skipped)
    _pipeline_from_log(target, whole, text, skipped)
    _launch_from_log(target, whole)
    refused = LOG_DP_REFUSED.search(text)
    if refused and target.world_size is None:
        target.world_size, target.sources["world_size"] = int(refused.group(1)), _line(text, refused.start(), skipped)
    _lookups_from_log(target, text, skipped)
    reader = LOG_ZERO_TO_FP32.search(text)
    if reader and target.reader is None:
        target.reader, target.sources["reader"] = "zero_to_fp32", _line(text, reader.start(), skipped)


def _line(text: str, offset: int, skipped: int) -> str:
    return f"the log, line {skipped + text.count(chr(10), 0, offset) + 1}"


def _precision_from_log(target: Target, text: str, skipped: int) -> None:
    """The engine configuration's bf16 and fp16 lines (both printed in one dump)."""
    if target.precision is not None:
        return
    bf16, fp16 = LOG_BF16.search(text), LOG_FP16.search(text)
    if bf16 and fp16:
        target.precision = "bf16" if bf16.group(1) == "True" else "fp16" if fp16.group(1) == "True" else "fp32"
        target.sources["precision"] = _line(text, min(bf16.start(), fp16.start()), skipped)


def _world_from_groups(target: Target) -> None:
    """DeepSpeed's printed `world_size` is its data-parallel size: with model or pipeline
    parallelism the ranks are dp x mp (mp_world_size counts the pipeline stages too), which the
    distributed-groups summary gives."""
    printed = target.sources.get("world_size", "")
    if target.dp is None or target.mp is None or not printed.startswith("the log"):
        return
    if target.world_size == target.dp and target.mp > 1:
        target.world_size = target.dp * target.mp
        target.sources["world_size"] = f"{target.sources['dp']} and {target.sources['mp'].removeprefix('the log, ')}"


def _groups_from_log(target: Target, text: str, skipped: int) -> None:
    """The param groups of the load's optimizer: ZeRO-1/2 flattens each, numbered from 0."""
    if target.param_groups is not None:
        return
    groups = [(int(m.group(1)), m.start()) for m in LOG_GROUP.finditer(text)]
    if groups:
        target.param_groups = max(n for n, _ in groups) + 1
        target.sources["param_groups"] = _line(text, groups[0][1], skipped)


def _lookups_from_log(target: Target, text: str, skipped: int) -> None:
    """What the failing load looked for, where the log does not print its settings (a framework's
    job leaves DeepSpeed's logger at WARNING): the tag its framework passes, whether the model-states
    glob came back empty, the optimizer shard name (its precision) it could not open."""
    accelerate, transformers = LOG_ACCELERATE_LOAD.search(text), LOG_TRANSFORMERS_LOAD.search(text)
    if accelerate and target.load_tag is None:
        target.load_tag, target.sources["load_tag"] = "pytorch_model", _line(text, accelerate.start(), skipped)
    elif transformers and target.load_tag is None:
        target.loads_latest, target.sources["loads_latest"] = True, _line(text, transformers.start(), skipped)
    empty = LOG_NO_MODEL_STATES.search(text)
    if empty:
        target.no_model_states, target.sources["no_model_states"] = True, _line(text, empty.start(), skipped)
    for pattern in LOG_MISSING_PATH:
        for m in pattern.finditer(text):
            path = f"{m.group(2)}/{m.group(1)}" if pattern.groups == 2 else m.group(1)
            if path not in {p for p, _ in target.missing_paths} and len(target.missing_paths) < MAX_MISSING_PATHS:
                target.missing_paths.append((path, _line(text, m.start(), skipped)))
    wanted = LOG_WANTED_SHARD.search(text)
    if wanted and target.precision is None:
        target.bf16_naming, target.sources["bf16_naming"] = bool(wanted.group(1)), _line(text, wanted.start(), skipped)


def _pipeline_from_log(target: Target, whole: str, text: str, skipped: int) -> None:
    """A PipelineEngine's start-up lines say the load runs one; the engine's own configuration dump
    without them says it does not (both are INFO lines of the same start-up)."""
    if target.pipeline is not None:
        return
    pipe = LOG_PIPE_ENGINE.search(text)
    engine = LOG_ENGINE.search(text)
    if pipe:
        target.pipeline, target.sources["pipeline"] = True, _line(text, pipe.start(), skipped)
        # PipelineModule prints its topology before deepspeed.initialize, so before this run's start
        topology = None
        for topology in LOG_TOPOLOGY.finditer(whole, 0, len(whole) - len(text) + pipe.start()):
            pass
        stages = [int(n) for n in TOPOLOGY_PIPE.findall(topology.group(1))] if topology else []
        if stages and target.pp is None:
            target.pp = max(stages) + 1
            target.sources["pp"] = f"the log, line {whole.count(chr(10), 0, topology.start()) + 1}"
    elif engine:
        target.pipeline, target.sources["pipeline"] = False, _line(text, engine.start(), skipped)


def _launch_from_log(target: Target, whole: str) -> None:
    """The world size of the launch command the job's log echoes, when DeepSpeed printed none."""
    if target.world_size is not None:
        return
    for m in LOG_LAUNCH.finditer(whole):
        nproc = LAUNCH_NPROC.search(m.group(0))
        if nproc:
            nodes = LAUNCH_NNODES.search(m.group(0))
            target.world_size = int(nproc.group(1)) * (int(nodes.group(1)) if nodes else 1)
            target.sources["world_size"] = f"the launch command, line {whole.count(chr(10), 0, m.start()) + 1}"
