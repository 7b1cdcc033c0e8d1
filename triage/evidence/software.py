"""The loading job's software and settings: `pip show`, `pip list`, `ds_report`, a printed release
(`python -c "import deepspeed; print(deepspeed.__version__)"`), and a ds_config, HF Trainer or
accelerate config (JSON or YAML). Parsers return (facts, claimed line indices) or None."""

from __future__ import annotations

import copy
import json
import re

PIP_SHOW = re.compile(r"^Name: (?P<name>\S+)\s*$")
PIP_VERSION = re.compile(r"^Version: (?P<version>\S+)\s*$")
PIP_LIST_HEAD = re.compile(r"^Package\s+Version\s*")
PIP_LIST_ROW = re.compile(r"^(?P<name>[A-Za-z0-9][\w.\-]*)\s+(?P<version>\d[\w.+!\-]*)(?:\s+\S.*)?$")
DS_REPORT = re.compile(r"^(?P<what>deepspeed info|torch version|deepspeed install path|torch cuda version)"
                       r"\s*\.{2,}\s*(?P<value>.+)$")
RELEASE = re.compile(r"^v?\d+\.\d+(?:\.\d+)?(?:[+.\-][\w.+]*|[a-z][\w.+]*)?$")
PIP_FIELD = re.compile(r"^(?:Summary|Home-page|Author|Author-email|License|Location|Editable project location|"
                               r"Requires|Required-by|Metadata-Version|Classifier|Project-URL):")
TORCH_VERSION = re.compile(r"\btorch\.__version__")
ACCELERATE_YAML = re.compile(r"^distributed_type:[ \t]*\S", re.M)
ACCELERATE_KEYS = ("compute_environment", "distributed_type")  # every config accelerate writes has both
TRAINER_ARGS = ("output_dir", "per_device_train_batch_size", "deepspeed")  # TrainingArguments.to_dict()
TRAINER_STATE = ("global_step", "log_history", "best_model_checkpoint")  # TrainerState.save_to_json
PACKAGES = {"deepspeed": "ds_version", "torch": "torch_version", "transformers": "transformers_version",
            "accelerate": "accelerate_version"}
DS_KEYS = ("zero_optimization", "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
           "bf16", "fp16", "optimizer", "scheduler")


def pip_show(lines: list[str], command: str = ""):
    facts, claimed, name = {}, [], None
    for i, line in enumerate(lines):
        m = PIP_SHOW.match(line)
        if m:
            name = m["name"].lower()
            claimed.append(i)
        elif name and PIP_VERSION.match(line):
            if name in PACKAGES:
                facts[PACKAGES[name]] = PIP_VERSION.match(line)["version"]
            claimed.append(i)
        elif name and PIP_FIELD.match(line):
            claimed.append(i)
    return (facts, claimed) if name else None


def pip_list(lines: list[str], command: str = ""):
    head = next((i for i, line in enumerate(lines) if PIP_LIST_HEAD.match(line)), None)
    if head is None or head + 1 >= len(lines) or not lines[head + 1].startswith("---"):
        return None
    facts, claimed = {}, [head, head + 1]
    for i in range(head + 2, len(lines)):
        m = PIP_LIST_ROW.match(lines[i])
        if not m:
            break
        claimed.append(i)
        if m["name"].lower() in PACKAGES:
            facts[PACKAGES[m["name"].lower()]] = m["version"]
    return facts, claimed


def ds_report(lines: list[str], command: str = ""):
    facts, claimed = {}, []
    for i, line in enumerate(lines):
        m = DS_REPORT.match(line.strip())
        if m:
            claimed.append(i)
            value = m["value"].strip()
            if m["what"] == "deepspeed info":
                facts["ds_version"] = value.split(",")[0].split()[0]
            elif m["what"] == "torch version":
                facts["torch_version"] = value.split()[0]
    if not facts or not any("op report" in line or "DeepSpeed general environment info" in line for line in lines):
        return None
    return facts, list(range(len(lines)))  # the op table is all of it


def release(lines: list[str], command: str = ""):
    """A bare release number: deepspeed's unless the command printed another package's."""
    body = [i for i, line in enumerate(lines) if line.strip()]
    if len(body) != 1 or not RELEASE.match(lines[body[0]].strip()):
        return None
    package = "torch" if TORCH_VERSION.search(command) else "deepspeed"
    return {PACKAGES[package]: lines[body[0]].strip()}, body


def config(lines: list[str], command: str = ""):
    """A ds_config (JSON), a Trainer's TrainingArguments JSON (`args.to_json_string()`), a checkpoint's
    trainer_state.json, or an accelerate config (YAML, or the JSON `accelerate config default` writes).
    facts["config"] is the ds_config the load runs with, as far as the paste shows it, else None: a
    stage or precision the paste does not show is never assumed (a missing zero_optimization would
    read as stage 0)."""
    text = "\n".join(lines).strip()
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            return None
        facts = _json_config(data) if isinstance(data, dict) else None
    else:
        facts = _accelerate(text) if ACCELERATE_YAML.search(text) else None
    return (facts, list(range(len(lines)))) if facts is not None else None


def _json_config(data: dict) -> dict | None:
    if all(k in data for k in TRAINER_STATE):  # its train_batch_size is the Trainer's, not DeepSpeed's
        return {"config": None, "source": "trainer_state.json", "global_step": data.get("global_step")}
    if all(k in data for k in TRAINER_ARGS):
        return _trainer(data)
    if all(k in data for k in ACCELERATE_KEYS):
        return _accelerate_settings(data)
    if isinstance(data.get("deepspeed"), dict):
        data = data["deepspeed"]
    if any(k in data for k in DS_KEYS):
        return {"config": data, "source": "ds_config"}
    return None


def _trainer(args: dict) -> dict:
    """TrainingArguments: its `deepspeed` is the ds_config (a dict, or a path the paste does not show).
    Its "auto" precision is the Trainer's bf16/fp16, as HfTrainerDeepSpeedConfig.trainer_config_process
    fills it (fill_match: only "auto" is replaced; a section the config lacks stays absent)."""
    ds = args.get("deepspeed")
    facts: dict = {"config": None, "source": "TrainingArguments", "config_file": ds if isinstance(ds, str) else None}
    if isinstance(ds, dict):
        config = copy.deepcopy(ds)
        for name in ("fp16", "bf16"):
            section = config.get(name)
            if isinstance(section, dict) and section.get("enabled") == "auto":
                section["enabled"] = bool(args.get(name) or args.get(f"{name}_full_eval"))
        facts["config"] = config
    elif ds is None:
        facts["deepspeed"] = False  # the Trainer runs without DeepSpeed
    return facts


def _accelerate(text: str) -> dict | None:
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    return _accelerate_settings(data) if isinstance(data, dict) and all(k in data for k in ACCELERATE_KEYS) else None


def _accelerate_settings(data: dict) -> dict:
    """accelerate's config as the ds_config its DeepSpeedPlugin builds (accelerate/utils/dataclasses.py:
    zero_stage, offload devices and gradient_accumulation_steps; set_mixed_precision turns bf16 and fp8
    into bf16.enabled, fp16 into fp16.enabled). With a deepspeed_config_file the settings are that
    file's, which the paste does not show."""
    facts: dict = {"config": None, "source": "accelerate", "distributed_type": data.get("distributed_type")}
    section = data.get("deepspeed_config")
    if data.get("distributed_type") != "DEEPSPEED" or not isinstance(section, dict):
        return facts
    if section.get("deepspeed_config_file") not in (None, "none"):
        facts["config_file"] = section["deepspeed_config_file"]
        return facts
    stage = section.get("zero_stage")
    if not isinstance(stage, int) or isinstance(stage, bool):
        return facts
    zero: dict = {"stage": stage}
    for key, name in (("offload_optimizer_device", "offload_optimizer"), ("offload_param_device", "offload_param")):
        if isinstance(section.get(key), str):
            zero[name] = {"device": section[key]}
    config: dict = {"zero_optimization": zero}
    if isinstance(section.get("gradient_accumulation_steps"), int):
        config["gradient_accumulation_steps"] = section["gradient_accumulation_steps"]
    precision = {"bf16": "bf16", "fp8": "bf16", "fp16": "fp16"}.get(data.get("mixed_precision"))
    if precision:
        config[precision] = {"enabled": True}
    facts["config"] = config
    return facts
