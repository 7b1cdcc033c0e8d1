"""Baseline checkpoint layouts: each is trained and saved once, then copied per scenario."""

TAG = "global_step3"   # every baseline trains 3 steps

# name -> worker options.  nproc = dp * tp * pipe.  sub: where the DeepSpeed save dir sits
# inside the layout root (HF Trainer nesting: <output_dir>/checkpoint-3/global_step3).
LAYOUTS = {}
for _st in (0, 1, 2, 3):
    for _dp in (1, 2):
        LAYOUTS[f"z{_st}-dp{_dp}-fp32"] = dict(stage=_st, dp=_dp, precision="fp32")
    LAYOUTS[f"z{_st}-dp2-bf16"] = dict(stage=_st, dp=2, precision="bf16")
LAYOUTS["z1-dp1-bf16"] = dict(stage=1, dp=1, precision="bf16")
LAYOUTS["z2-dp1-bf16"] = dict(stage=2, dp=1, precision="bf16")
LAYOUTS["z3-dp1-bf16"] = dict(stage=3, dp=1, precision="bf16")
LAYOUTS["pp2-fp32"] = dict(stage=0, dp=1, pipe=2, precision="fp32")
LAYOUTS["pp2-z1-fp32"] = dict(stage=1, dp=1, pipe=2, precision="fp32")
LAYOUTS["tp2-z1-fp32"] = dict(stage=1, dp=1, tp=2, precision="fp32")
LAYOUTS["tp2-z0-fp32"] = dict(stage=0, dp=1, tp=2, precision="fp32")
LAYOUTS["hf-z2-dp2-fp32"] = dict(stage=2, dp=2, precision="fp32", sub="checkpoint-3")
LAYOUTS["hf-z3-dp2-bf16"] = dict(stage=3, dp=2, precision="bf16", sub="checkpoint-3")
LAYOUTS["big-z2-dp1-fp32"] = dict(stage=2, dp=1, precision="fp32", model="big")
LAYOUTS["sgd-z2-dp1-fp32"] = dict(stage=2, dp=1, precision="fp32", optimizer="sgd")
LAYOUTS["ds-adamw-z0-dp1-fp32"] = dict(stage=0, dp=1, precision="fp32", optimizer="ds_adamw")
# two optimizer param groups (weight decay on weights only): ZeRO-3 keeps one flat fp32 partition per group
LAYOUTS["groups-z3-dp2-fp32"] = dict(stage=3, dp=2, precision="fp32", optimizer="adamw2groups")
# saver SIGKILLed after its first file (model states) -> tag dir without optimizer shard, no `latest`
LAYOUTS["killed-save-z2-dp1-fp32"] = dict(stage=2, dp=1, precision="fp32", kill_after_saves=1)

# Framework layouts (issue 18): `worker` (corpus/workers/fw_*.py) trains and saves, then loads, through
# the framework's own API (transformers Trainer, accelerate, PEFT / from_pretrained); `launch: python`
# runs it as one plain process; `packages` are the framework packages whose versions the manifest records.
_TRAINER = dict(worker="fw_trainer.py", framework="transformers Trainer", packages=["transformers", "accelerate"])
LAYOUTS["trainer-z2-dp2-fp32"] = dict(stage=2, dp=2, precision="fp32", **_TRAINER)
LAYOUTS["trainer-z3-dp2-fp32"] = dict(stage=3, dp=2, precision="fp32", **_TRAINER)
LAYOUTS["trainer-z2-dp2-bf16"] = dict(stage=2, dp=2, precision="bf16", **_TRAINER)
_ACCELERATE = dict(worker="fw_accelerate.py", framework="accelerate", packages=["accelerate", "transformers"])
LAYOUTS["accelerate-z2-dp2-fp32"] = dict(stage=2, dp=2, precision="fp32", **_ACCELERATE)
LAYOUTS["accelerate-z3-dp2-fp32"] = dict(stage=3, dp=2, precision="fp32", **_ACCELERATE)
LAYOUTS["accelerate-z2-dp1-fp32"] = dict(stage=2, dp=1, precision="fp32", **_ACCELERATE)
LAYOUTS["accelerate-z2-dp2-bf16"] = dict(stage=2, dp=2, precision="bf16", **_ACCELERATE)
# save_state killed after DeepSpeed's first file (as killed-save-z2-dp1-fp32 for a direct save)
LAYOUTS["killed-save-accelerate-z2-dp1-fp32"] = dict(stage=2, dp=1, precision="fp32", kill_after_saves=1, **_ACCELERATE)
# TRL's SFTTrainer: a transformers Trainer subclass with its own dataset preparation and config
_TRL = dict(worker="fw_trl.py", framework="TRL SFTTrainer", packages=["trl", "transformers", "accelerate", "datasets"])
LAYOUTS["trl-z2-dp2-fp32"] = dict(stage=2, dp=2, precision="fp32", **_TRL)
LAYOUTS["trl-z3-dp2-fp32"] = dict(stage=3, dp=2, precision="fp32", **_TRL)
LAYOUTS["pretrained"] = dict(worker="fw_pretrained.py", launch="python", framework="transformers + PEFT",
                             packages=["transformers", "peft", "safetensors"])

WORKER_KEYS = ("stage", "precision", "model", "optimizer", "tp", "pipe", "steps")


def nproc(lay):
    return lay.get("dp", 1) * lay.get("tp", 1) * max(lay.get("pipe", 0), 1)


def worker_args(lay, overrides=None):
    """CLI options for train_save.py / load.py from a layout, with load-time overrides."""
    opts = {k: lay[k] for k in WORKER_KEYS if k in lay}
    opts.update({k: v for k, v in (overrides or {}).items() if k in WORKER_KEYS})
    out = []
    for k in WORKER_KEYS:
        if k in opts and not (k in ("tp", "pipe") and not opts[k]) and not (k == "model" and opts[k] == "base") \
                and not (k == "optimizer" and opts[k] == "adamw"):
            out += [f"--{k}", str(opts[k])]
    return out


def script(lay, kind):
    """The worker that saves (kind "train") or loads (kind "load") this layout."""
    return lay.get("worker") or {"train": "train_save.py", "load": "load.py"}[kind]


def describe(lay):
    d = {"stage": lay["stage"], "dp": lay.get("dp", 1), "precision": lay["precision"]} if "stage" in lay else {}
    if lay.get("framework"):
        d["framework"] = lay["framework"]
    for k in ("tp", "pipe"):
        if lay.get(k):
            d["pp" if k == "pipe" else k] = lay[k]
    if lay.get("sub"):
        d["nesting"] = "hf_trainer"
    for k in ("model", "optimizer"):
        if lay.get(k):
            d[k] = lay[k]
    return d
