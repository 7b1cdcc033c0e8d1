"""The loading job's software and settings: `pip show`, `pip list`, `ds_report`, a printed release
(`python -c "import deepspeed; print(deepspeed.__version__)"`), and a ds_config, HF Trainer or
accelerate config (JSON or YAML). Parsers return (facts, claimed line indices) or None."""

from __future__ import annotations

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
ACCELERATE = re.compile(r"^distributed_type:[ \t]*DEEPSPEED[ \t]*$", re.M)
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
    """A ds_config (JSON), a Trainer's TrainingArguments JSON naming one, or accelerate's YAML."""
    text = "\n".join(lines).strip()
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            return None
        if isinstance(data, dict) and isinstance(data.get("deepspeed"), dict):
            data = data["deepspeed"]
        if isinstance(data, dict) and any(k in data for k in DS_KEYS):
            return {"config": data}, list(range(len(lines)))
        return None
    if ACCELERATE.search(text) and "deepspeed_config:" in text:
        return _accelerate(text), list(range(len(lines)))
    return None


def _accelerate(text: str) -> dict:
    """accelerate's config: its deepspeed_config section as the ds_config settings it stands for."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return {"config": {}}
    section = data.get("deepspeed_config") if isinstance(data, dict) else None
    section = section if isinstance(section, dict) else {}
    config: dict = {}
    if isinstance(section.get("zero_stage"), int):
        config["zero_optimization"] = {"stage": section["zero_stage"]}
    precision = data.get("mixed_precision") if isinstance(data, dict) else None
    if precision in ("bf16", "fp16"):
        config[precision] = {"enabled": True}
    return {"config": config, "config_file": section.get("deepspeed_config_file")}
