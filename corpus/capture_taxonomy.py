"""Capture real output for the failure classes of issue 17's taxonomy (version skew between a
framework and DeepSpeed, the frameworks' own checkpoint checks, zero_to_fp32 of another release).

    python -m corpus.capture_taxonomy --list
    python -m corpus.capture_taxonomy NAME [--work DIR]

Each capture calls the real library function that raises, with the input that makes it raise
(a keyword the installed release does not take, a folder without a DeepSpeed checkpoint ...), in
a subprocess, and prints its untouched combined stdout+stderr: the inline `log:` examples of the
rules that cite this file. The framework captures need transformers / lightning importable
(`pip install -e '.[frameworks]'`, or PYTHONPATH at a `pip install --target` folder); the
zero_to_fp32 captures of older releases take that release's zero_to_fp32.py (`--script`, from
`pip download --no-deps deepspeed==X`), copied into the checkpoint as DeepSpeed's save does.
"""
import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from corpus.capture_sites import _single_process_dist, prepare

WORK = "/tmp/ds-triage-capture-taxonomy"


def _engine(stage=2):
    import torch
    import deepspeed
    from corpus.workers.common import build_model, ds_config, set_ds_log_level
    set_ds_log_level()
    _single_process_dist()
    model = build_model("base")
    cfg = ds_config(argparse.Namespace(stage=stage, precision="fp32", optimizer="adamw"))
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=torch.optim.AdamW(model.parameters()), config=cfg)
    return engine


# ---- direct calls (run in a subprocess by main) ------------------------------------------

def direct_load_checkpoint_unknown_kwarg(ckpt):
    """engine.load_checkpoint(dir, weights_only=True): a caller written for another DeepSpeed
    release passes a keyword the installed DeepSpeedEngine.load_checkpoint does not take."""
    _engine().load_checkpoint(ckpt, weights_only=True)


def direct_hf_deepspeed_init_resume_kwarg(ckpt):
    """transformers.integrations.deepspeed.deepspeed_init(trainer, n, resume_from_checkpoint=...):
    a Trainer copy from transformers < 4.27 calls the installed transformers' deepspeed_init."""
    from transformers.integrations.deepspeed import deepspeed_init
    deepspeed_init(None, num_training_steps=10, resume_from_checkpoint=ckpt)


def direct_hf_resume_dir_without_global_step(ckpt):
    """transformers' deepspeed_load_checkpoint(engine, <run output dir>): the folder holds weights
    and no global_step* (the Trainer resumes from there)."""
    from transformers.integrations.deepspeed import deepspeed_load_checkpoint
    out = Path(ckpt).parent / "run-output"
    out.mkdir(exist_ok=True)
    (out / "config.json").write_text("{}")
    deepspeed_load_checkpoint(_engine(), str(out))


def direct_lightning_subfolder(ckpt):
    """Lightning's DeepSpeed strategy validates ckpt_path: here the inner `checkpoint` tag folder
    of a real DeepSpeed checkpoint laid out as Lightning saves it (tag `checkpoint`) is passed
    instead of the .ckpt folder."""
    from lightning.fabric.strategies.deepspeed import _validate_checkpoint_directory
    d = Path(ckpt).parent / "epoch=3-step=30.ckpt"
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(ckpt, d)
    (d / (d / "latest").read_text().strip()).rename(d / "checkpoint")
    (d / "latest").write_text("checkpoint")
    _validate_checkpoint_directory(d / "checkpoint")


def direct_lightning_plain_file(ckpt):
    """Lightning's DeepSpeed strategy validates ckpt_path: here a single torch.save'd .ckpt file
    (what a run without the DeepSpeed strategy writes)."""
    import torch
    from lightning.fabric.strategies.deepspeed import _validate_checkpoint_directory
    f = Path(ckpt).parent / "epoch=1.ckpt"
    torch.save({"state_dict": {}}, f)
    _validate_checkpoint_directory(f)


def direct_inference_checkpoint_wrong_type(ckpt):
    """deepspeed.init_inference(model, checkpoint=[...]): a caller passes a checkpoint description
    in a form the installed DeepSpeedInferenceConfig does not accept."""
    import deepspeed
    from corpus.workers.common import build_model
    _single_process_dist()
    deepspeed.init_inference(build_model("base"), checkpoint=[str(Path(ckpt) / "model.pt")])


def direct_inference_json_checkpoints_dict(ckpt):
    """InferenceEngine._load_checkpoint(<ds_model description whose 'checkpoints' is a dict>):
    the 'tp'/'non_tp' layout of another release's checkpoint json reaches sd_loader.load."""
    from types import SimpleNamespace
    from deepspeed.inference.engine import InferenceEngine
    from corpus.workers.common import build_model
    _single_process_dist()
    fake = SimpleNamespace(module=build_model("base"), checkpoint_engine=None, mpu=None,
                           _config=SimpleNamespace(tensor_parallel=SimpleNamespace(tp_size=1), dtype=None),
                           quantize_groups=1, mlp_extra_grouping=False)
    InferenceEngine._load_checkpoint(fake, {"type": "ds_model", "version": 1.0, "checkpoints":
                                            {"non_tp": ["non-tp.pt"], "tp": ["tp_00_00.pt"]}})


def direct_optimizer_state_from_weights_file(ckpt):
    """optimizer.load_state_dict(torch.load(<weights-only file>)): a resume hands the optimizer a
    file that holds the model's weights and no optimizer state (a weights-only release or export)."""
    import torch
    from corpus.workers.common import build_model
    model = build_model("base")
    weights = Path(ckpt).parent / "weights-only" / "pytorch_model.bin"
    weights.parent.mkdir(exist_ok=True)
    torch.save(model.state_dict(), weights)
    optimizer = torch.optim.AdamW(model.parameters())
    optimizer.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))


DIRECT = {
    "load-checkpoint-unknown-kwarg": direct_load_checkpoint_unknown_kwarg,
    "hf-deepspeed-init-resume-kwarg": direct_hf_deepspeed_init_resume_kwarg,
    "hf-resume-dir-without-global-step": direct_hf_resume_dir_without_global_step,
    "lightning-subfolder": direct_lightning_subfolder,
    "lightning-plain-file": direct_lightning_plain_file,
    "inference-checkpoint-wrong-type": direct_inference_checkpoint_wrong_type,
    "inference-json-checkpoints-dict": direct_inference_json_checkpoints_dict,
    "optimizer-state-from-weights-file": direct_optimizer_state_from_weights_file,
}


# ---- zero_to_fp32 runs -------------------------------------------------------------------

def z2f(work, stage, script, *args, user=None, env=None):
    """Run zero_to_fp32.py (the installed one, or --script of another release copied into the
    checkpoint as DeepSpeed's save does) on a fresh copy of a ZeRO-`stage` checkpoint."""
    d = Path(work) / f"z2f-stage{stage}"
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(prepare(work, f"_base_z{stage}", 1, "--stage", str(stage)), d)
    if script:
        shutil.copy(script, d / "zero_to_fp32.py")
    cmd = [sys.executable, "zero_to_fp32.py", ".", *args]
    if user:
        os.chmod(work, 0o755)
        cmd = ["setpriv", f"--reuid={user}", "--regid=65534", "--clear-groups"] + cmd
    return cmd, d, env


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("name", nargs="?")
    p.add_argument("--list", action="store_true")
    p.add_argument("--work", default=WORK)
    p.add_argument("--script", help="a zero_to_fp32.py of another release (z2f-* captures)")
    p.add_argument("--direct", help=argparse.SUPPRESS)
    p.add_argument("--ckpt", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    runs = {
        # old script (e.g. 0.9.5: `if zero_stage == 2`) on a ZeRO-1 checkpoint; torch >= 2.6 needs the env
        "z2f-old-script-stage1": lambda: z2f(a.work, 1, a.script, "pytorch_model.bin",
                                             env={"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}),
        # 0.15.x script (output_dir, no makedirs) given the old output *file* argument
        "z2f-output-file-argument": lambda: z2f(a.work, 2, a.script, "../model_fp32.bin",
                                                env={"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}),
        # a 0.15.x script under torch >= 2.6 without the env: weights_only refuses DeepSpeed's classes
        "z2f-old-script-weights-only": lambda: z2f(a.work, 2, a.script, "out"),
        # the installed script run by a user who cannot create the output folder
        "z2f-output-dir-not-writable": lambda: z2f(a.work, 2, None, "/root/fp32-out", user="nobody"),
    }
    if a.direct:
        DIRECT[a.direct](a.ckpt)
        return
    if a.list or not a.name:
        for name in list(DIRECT) + list(runs):
            print(name)
        return
    os.makedirs(a.work, exist_ok=True)
    e = dict(os.environ, DS_ACCELERATOR="cpu", PYTHONUNBUFFERED="1")
    if a.name in DIRECT:
        ckpt = prepare(a.work, "_base_z2", 1, "--stage", "2")
        cmd, cwd = [sys.executable, "-m", "corpus.capture_taxonomy", "--direct", a.name, "--ckpt", str(ckpt)], None
        e.setdefault("MASTER_PORT", "29541")
    else:
        cmd, cwd, extra = runs[a.name]()
        e.update(extra or {})
    out = subprocess.run(cmd, cwd=cwd, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, timeout=900)
    sys.stdout.write(out.stdout.decode(errors="replace"))
    print(f"# exit {out.returncode}", file=sys.stderr)


if __name__ == "__main__":
    main()
