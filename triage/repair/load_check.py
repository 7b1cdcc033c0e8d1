"""The real DeepSpeed load that verifies a repair; one process per rank under torchrun.

    python -m torch.distributed.run --standalone --nproc_per_node N -m triage.repair.load_check SPEC RESULT

SPEC is a JSON file (triage/repair/real_load.py writes it): the model factory (MODULE:FUNCTION,
returning an nn.Module, a (module, optimizer) pair, or a dict with `model` and optionally
`optimizer` and `batch`; or none, and `twin`: the saved param_shapes to build a stand-in from),
the ds_config, and what to load:

* resume:       engine.load_checkpoint(load_dir, tag)                       (model + optimizer state)
* module-only:  engine.load_checkpoint(load_dir, tag, load_module_only=True)
* universal:    the same as resume, the config having checkpoint.load_universal = true
* state-dict:   model.load_state_dict(<consolidated fp32 files>, strict=True), then deepspeed.initialize

With a `batch` (a tuple of tensors; model(*batch) returns the loss) one training step follows
the load: optimizer state that loads but cannot step (another optimizer class) fails there, as
it would in the job. With `reraise` a failure also propagates, so the output holds the traceback
as the job would print it (`probe --reproduce` classifies it). Each rank writes RESULT.<rank> (JSON: ok, error, load_path, global_steps, checksum). The checksum is
the sum of |param| over the whole (gathered) model, so a test can tell loaded weights from a fresh
init. This is the one module of ds-triage that imports torch and deepspeed.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback


def build(factory: str | None, twin: list | None = None, optimizer: str | None = None) -> tuple:
    """(model, optimizer or None, batch or None) from what the factory returns (or the twin of
    the saved param_shapes when there is no factory: triage/repair/twin.py, its optimizer the
    class `optimizer` names)."""
    if factory is None:
        from triage.repair import twin as twin_model

        made = twin_model.build(twin, optimizer)
    else:
        module_name, _, function = factory.partition(":")
        sys.path.insert(0, os.getcwd())
        made = getattr(importlib.import_module(module_name), function)()
    if isinstance(made, dict):
        return made["model"], made.get("optimizer"), made.get("batch")
    if isinstance(made, tuple):
        return made[0], made[1], None
    return made, None, None


def read_state_dict(path: str) -> dict:
    import torch

    names = sorted(os.listdir(path))
    state = {}
    for name in names:
        full = os.path.join(path, name)
        if name.endswith(".safetensors"):
            from safetensors.torch import load_file

            state.update(load_file(full))
        elif name.endswith(".bin"):
            state.update(torch.load(full, map_location="cpu", weights_only=True))
    return state


def checksum(engine) -> float:
    import deepspeed

    params = list(engine.module.parameters())
    if engine.zero_optimization_partition_weights():
        with deepspeed.zero.GatheredParameters(params, modifier_rank=None):
            return float(sum(p.detach().float().abs().sum() for p in params))
    return float(sum(p.detach().float().abs().sum() for p in params))


def check(spec: dict) -> dict:
    import deepspeed
    import torch

    if spec.get("reraise"):  # `probe --reproduce`: DeepSpeed's INFO lines too, as most jobs print them
        _info_logging()
    deepspeed.init_distributed(dist_backend="gloo")
    torch.manual_seed(0)
    model, optimizer, batch = build(spec["factory"], spec.get("twin"), spec.get("optimizer"))
    config = spec["config"]
    notes = []
    parameters = None
    if "optimizer" in config and spec["factory"] is None:
        # the ds_config names the optimizer: DeepSpeed builds it, over the saved param groups
        parameters, optimizer = [{"params": g["params"]} for g in optimizer.param_groups], None
    elif optimizer is None and "optimizer" not in config:
        from triage.repair.twin import make_optimizer

        optimizer = make_optimizer(spec.get("optimizer"), model.parameters())
        notes.append(f"optimizer: torch.optim.{type(optimizer).__name__} (the factory returned none and the "
                     "ds_config names none)")
    mode = spec["mode"]
    if mode == "state-dict":
        model.load_state_dict(read_state_dict(spec["state_dict"]), strict=True)
    engine, *_ = deepspeed.initialize(model=model, optimizer=optimizer, config=config,
                                      model_parameters=parameters if parameters is not None else
                                      None if optimizer is not None else model.parameters())
    result = {"ok": True, "load_path": None, "global_steps": None, "notes": notes,
              "optimizer": type(engine.optimizer).__name__ if engine.optimizer is not None else None}
    if mode != "state-dict":
        load_path, _ = engine.load_checkpoint(spec["load_dir"], tag=spec["tag"], load_module_only=mode == "module-only")
        if load_path is None:
            return dict(result, ok=False, error="load_checkpoint returned (None, None): nothing was loaded "
                        "(no `latest` and no tag?)")
        result.update(load_path=load_path, global_steps=engine.global_steps)
    result["checksum"] = checksum(engine)
    if batch is not None:
        loss = engine(*batch)
        engine.backward(loss)
        engine.step()
        result["step_loss"] = float(loss)
    return result


def _info_logging() -> None:
    import logging

    from deepspeed.utils import logger

    logger.setLevel(logging.INFO)
    for handler in logger.handlers:
        handler.setLevel(logging.INFO)


def main(argv: list[str]) -> int:
    spec_path, result_path = argv
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    try:
        result = check(spec)
    except BaseException as exc:  # noqa: BLE001 - every failure is the verdict, reported to the parent
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        where = f"{os.path.basename(frame.filename)}:{frame.lineno} in {frame.name}"
        result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000].rstrip(": ") + f" (at {where})",
                  "traceback": traceback.format_exc()[-4000:]}
        if spec.get("reraise"):
            _write(result_path, result)
            raise  # `probe --reproduce`: the traceback as the job would print it, for the classifier
    _write(result_path, result)
    _teardown()
    return 0 if result["ok"] else 1


def _teardown() -> None:
    """Leave the process group before exiting: gloo torn down by interpreter exit instead can
    abort a rank (SIGABRT) after it has already reported."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        try:  # no barrier: after a failure the other ranks may be stuck in another collective
            dist.destroy_process_group()
        except Exception:  # noqa: BLE001 - the result is written; a failed teardown changes nothing
            pass


def _write(result_path: str, result: dict) -> None:
    rank = os.environ.get("RANK", "0")
    with open(f"{result_path}.{rank}", "w", encoding="utf-8") as f:
        json.dump(result, f)


if __name__ == "__main__":
    code = main(sys.argv[1:])
    if code == 0:
        # This rank's load passed and its verdict is written: the interpreter's own teardown (torch's and
        # gloo's destructors) would add about 2 s to every load and change nothing. A failing rank exits
        # the slow way: torchrun stops the other ranks as soon as one fails, before they print their error.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    raise SystemExit(code)
