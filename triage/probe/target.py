"""What the loading job is set up with: stage, world size, its ds_config, its model and optimizer.

From the command line (--stage, --world-size, --config) first; `triage` also reads what the
failing job's own log printed (DeepSpeed's config dump at INFO level), so that a log plus a
checkpoint can tell apart what neither can alone. Each value keeps where it came from.
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
LOG_OPTIMIZER = (re.compile(r"DeepSpeed Basic Optimizer = ([A-Za-z_][\w.]*)"),)
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
    if load_dir is not None:
        target.load_dir, target.sources["load_dir"] = load_dir, "--load-dir"
    if world_size is not None:
        target.world_size, target.sources["world_size"] = world_size, "--world-size"
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
    target.model_claims = model_claims(text) or None
    if target.model_claims is not None:
        target.model_claims.line += skipped  # a line of the whole log, as every other source says
    for name, patterns, kind in (("stage", LOG_STAGE, int), ("world_size", LOG_WORLD, int),
                                 ("optimizer", LOG_OPTIMIZER, str), ("load_dir", LOG_LOAD_DIR, str),
                                 ("load_tag", LOG_LOAD_TAG, str)):
        if getattr(target, name) is not None:
            continue
        for pattern in patterns:
            m = pattern.search(text)
            if m:
                line = skipped + text.count("\n", 0, m.start()) + 1
                setattr(target, name, kind(m.group(1)))
                target.sources[name] = f"the log, line {line}"
                break
