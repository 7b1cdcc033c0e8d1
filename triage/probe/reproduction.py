"""The load `--reproduce` runs, set up from every fact the target has (triage/probe/target.py),
and the command that runs the same reproduction again.

The ds_config is the target's (--config, else the one the log printed), else the one saved in
the checkpoint with its train_batch_size fitted to the world size; the target's ZeRO stage
(--stage, or the log's) is then written into it, so a stage change is reproduced, not the saved
stage. The world size is the target's, else as saved. Without --model-factory the model is a
stand-in with the saved parameters (triage/repair/twin.py), changed as the target says the job's
model was: the shapes of --model, the shapes and names torch's load error gave in the log, the
number of param groups of --param-groups; its optimizer is the target's class (--optimizer, the
log's) unless the ds_config names one. Each change is listed with where it came from.
"""

from __future__ import annotations

import copy
import json
import os
import shlex
from dataclasses import dataclass, field

from triage.probe.target import config_stage
from triage.repair.engine_config import fit_world_size

MAX_SHOWN_CONFIG = 2000  # characters of the ds_config shown in the text report (the JSON has it whole)


@dataclass
class Setup:
    load_dir: str
    tag: str | None
    world_size: int
    world_source: str
    config: dict
    config_source: str
    changes: list[str] = field(default_factory=list)  # what was changed in the base config, and why
    twin: list[dict] | None = None  # the stand-in's param groups (name -> shape); None with --model-factory
    model: str = ""  # how the model is built
    model_changes: list[str] = field(default_factory=list)
    optimizer: str | None = None  # the torch.optim class built when neither the factory nor the config names one
    optimizer_source: str = ""

    @property
    def stage(self) -> int | None:
        return config_stage(self.config)

    def describe(self) -> list[str]:
        """The report's lines: where, on how many ranks, with which ds_config and model."""
        where = f"loaded {self.load_dir}" + (f", tag {self.tag}" if self.tag else " (tag from `latest`)")
        config = json.dumps(self.config, separators=(",", ":"), sort_keys=True)
        if len(config) > MAX_SHOWN_CONFIG:
            config = config[:MAX_SHOWN_CONFIG] + f"... ({len(config)} characters; --json has it whole)"
        lines = [f"{where} on {self.world_size} rank(s) ({self.world_source}), ZeRO stage {self.stage}",
                 f"ds_config: {self.config_source}" + (f"; {'; '.join(self.changes)}" if self.changes else ""),
                 f"ds_config loaded: {config}",
                 f"model: {self.model}" + (f"; {'; '.join(self.model_changes)}" if self.model_changes else "")]
        if self.optimizer:
            lines.append(f"optimizer: torch.optim.{self.optimizer} ({self.optimizer_source}), unless the ds_config "
                         "names one")
        return lines

    def to_json(self) -> dict:
        return {"load_dir": self.load_dir, "tag": self.tag, "world_size": self.world_size,
                "world_size_source": self.world_source, "stage": self.stage, "config": self.config,
                "config_source": self.config_source, "config_changes": self.changes, "model": self.model,
                "model_changes": self.model_changes, "optimizer": self.optimizer}


def setup(ctx, layout, meta, factory: str | None) -> Setup | str:
    """The reproduction's set-up, or why there is none (an inconclusive probe's summary)."""
    target = ctx.target
    world, world_source = _world_size(ctx, layout)
    config, config_source, changes = _config(ctx, layout, world)
    load_dir = target.load_dir or ctx.ckpt.root
    tag = None if ctx.ckpt.tag_source == "latest" else ctx.ckpt.tag  # as the job would: `latest` decides
    s = Setup(load_dir, tag, world, world_source, config, config_source, changes)
    if target.optimizer:
        s.optimizer = target.optimizer.rsplit(".", 1)[-1]
        s.optimizer_source = target.sources.get("optimizer", "--optimizer")
    if factory:
        s.model = f"--model-factory {factory}"
        return s
    saved = [{k: list(v) for k, v in g.items()} for g in (meta.param_group_shapes or [])] if meta else []
    if not any(saved):
        return "no param_shapes saved to build a model from; name yours with --model-factory MODULE:FUNCTION"
    s.twin, s.model_changes = _twin(saved, target)
    count = sum(map(len, s.twin))
    s.model = (f"a stand-in with the {count} saved parameters (param_shapes)" if not s.model_changes else
               f"a stand-in with {count} parameters: the saved ones (param_shapes), changed as the target says")
    claims = target.model_claims
    if not target.model and not (claims and (claims.sizes or claims.unexpected or claims.missing)):
        s.model += "; a changed model is not reproduced without --model, the log's load error or --model-factory"
    return s


def _world_size(ctx, layout) -> tuple[int, str]:
    if ctx.target.world_size:
        return ctx.target.world_size, ctx.target.sources.get("world_size", "--world-size")
    return layout.world_size or 1, "as saved" if layout.world_size else "no saved degree: 1"


def _config(ctx, layout, world: int) -> tuple[dict, str, list[str]]:
    target = ctx.target
    changes: list[str] = []
    if target.config is not None:
        source = target.sources.get("config", "--config")
        config = copy.deepcopy(target.config)
        label = f"{target.config_path} ({source})" if target.config_path else source
    elif layout.ds_config is not None:
        config, label = copy.deepcopy(layout.ds_config), "the ds_config saved in the checkpoint"
        changes += fit_world_size(config, world, layout.world_size)
    else:
        stage = layout.stage if layout.stage is not None else 0
        config = {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": stage}}
        label = f"a minimal ds_config for ZeRO-{stage} (none given, printed or saved)"
    if target.stage is not None and config_stage(config) != target.stage:
        zero = config.get("zero_optimization")
        zero = dict(zero) if isinstance(zero, dict) else {}
        before = zero.get("stage", 0)
        zero["stage"] = target.stage
        config["zero_optimization"] = zero
        changes.append(f"zero_optimization.stage {before} -> {target.stage} ({target.sources.get('stage', '--stage')})")
    return config, label, changes


def _twin(saved: list[dict], target) -> tuple[list[dict], list[str]]:
    """The stand-in's param groups: the saved ones, with the target's model (--model, then the
    log's load error) and --param-groups applied."""
    groups = [dict(g) for g in saved]
    changes: list[str] = []
    if target.model is not None:
        shapes = {k: list(v) for k, v in target.model.shapes.items()}
        groups = [{k: shapes[k] for k in g if k in shapes} for g in groups]
        placed = {k for g in groups for k in g}
        groups[-1].update({k: v for k, v in shapes.items() if k not in placed})
        changes.append(f"the names and shapes of --model {target.model_path} ({len(shapes)} parameters)")
    elif target.model_claims:
        claims = target.model_claims
        resized = [n for n in claims.sizes if any(n in g for g in groups)]
        for g in groups:
            for name in resized:
                if name in g:
                    g[name] = list(claims.sizes[name][1])
            for name in claims.unexpected:
                g.pop(name, None)
        line = f"the log, line {claims.line}"
        if resized:
            changes.append(f"{len(resized)} shape(s) as the job's model had them ({line}: size mismatch)")
        dropped = [n for n in claims.unexpected if any(n in g for g in saved)]
        if dropped:
            changes.append(f"{len(dropped)} saved name(s) the job's model lacks left out ({line}: unexpected keys)")
        if claims.missing:
            changes.append(f"{len(claims.missing)} name(s) the job's model has and the checkpoint lacks not added "
                           f"(torch printed no shape for them; {line})")
    groups = [g for g in groups if g]
    if target.param_groups and target.param_groups != len(groups):
        names = [(k, v) for g in groups for k, v in g.items()]
        count = min(target.param_groups, len(names))
        size, extra = divmod(len(names), count)
        regrouped, start = [], 0
        for i in range(count):
            end = start + size + (1 if i < extra else 0)
            regrouped.append(dict(names[start:end]))
            start = end
        changes.append(f"{count} param group(s) ({target.sources.get('param_groups', '--param-groups')}), "
                       f"saved {len(groups)}")
        groups = regrouped
    return groups, changes


FACT_FLAGS = (("stage", "--stage"), ("world_size", "--world-size"), ("optimizer", "--optimizer"),
              ("param_groups", "--param-groups"), ("load_dir", "--load-dir"))


def rerun_command(ctx, world: int) -> str:
    """The command that runs this reproduction again: `triage --log` when facts came from a log
    file (it reads them again) plus the options given, else `probe` with every fact as an option."""
    target = ctx.target
    log = target.log_path
    if log and log != "-" and any(str(v).startswith("the log") for v in target.sources.values()):
        parts = ["ds-triage", "triage", "--log", log, "--ckpt", ctx.ckpt.given, "--reproduce"]
        facts = [(name, flag) for name, flag in FACT_FLAGS if target.sources.get(name) == flag]
    else:
        ckpt = ctx.ckpt.given
        if ctx.ckpt.tag_source == "log" and ctx.ckpt.root:  # the tag the log named, as a tag dir
            ckpt = os.path.join(ctx.ckpt.root, ctx.ckpt.tag)
        parts = ["ds-triage", "probe", ckpt, "--reproduce", "--world-size", str(world)]
        facts = [(name, flag) for name, flag in FACT_FLAGS if name != "world_size"
                 and target.sources.get(name) not in ("--ckpt", None)]
    for name, flag in facts:
        if getattr(target, name) is not None:
            parts += [flag, str(getattr(target, name))]
    for flag, value in (("--config", target.config_path), ("--model", target.model_path),
                        ("--model-factory", ctx.model_factory)):
        if value:
            parts += [flag, value]
    if ctx.trust_checkpoint:
        parts.append("--trust-checkpoint")
    if ctx.timeout:
        parts += ["--timeout", f"{ctx.timeout:g}"]
    return " ".join(shlex.quote(os.fspath(p)) for p in parts)
