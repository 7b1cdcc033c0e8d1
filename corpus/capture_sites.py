"""Capture real tracebacks for load-path raise sites no corpus case reaches.

    python -m corpus.capture_sites --list
    python -m corpus.capture_sites [--only NAME] [--work DIR]

Each capture runs real DeepSpeed code (DS_ACCELERATOR=cpu, gloo) in a subprocess and prints
its untouched combined stdout+stderr, so the inline `log:` examples of the DS-*2xx rules can
be re-captured on another DeepSpeed / torch release. Two kinds:

* load: a tiny model (~70-100k parameters) is trained and saved with real DeepSpeed, then
  `engine.load_checkpoint` is called under torchrun with the setting that makes it fail.
* direct: a site that no deepspeed.initialize() + load_checkpoint() run can reach on this
  machine (AutoEP, NVMe offload, ...) is reached by calling the raising DeepSpeed function
  itself with the inputs that trigger its condition; the docstring of each says which.

The same file is the torchrun worker (`--worker save|load`) and the direct caller (`--direct NAME`).
"""
import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from corpus import generate

REPO = Path(__file__).resolve().parent.parent
PY = str(REPO / ".venv" / "bin" / "python") if (REPO / ".venv" / "bin" / "python").exists() else sys.executable
WORK = "/tmp/ds-triage-capture-sites"


# ---- subprocess plumbing -----------------------------------------------------------------

def env():
    e = dict(os.environ)
    e.update(DS_ACCELERATOR="cpu", PYTHONUNBUFFERED="1", TORCH_EXTENSIONS_DIR=str(generate.EXT_CACHE))
    e["PATH"] = f"{Path(PY).parent}:{e.get('PATH', '')}"
    e.pop("PYTHONPATH", None)
    return e


def run(cmd):
    """Run cmd in the repo; return (exit code, combined output)."""
    p = subprocess.run(cmd, cwd=REPO, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       stdin=subprocess.DEVNULL, timeout=900)
    return p.returncode, p.stdout.decode(errors="replace")


def torchrun(nproc, *args):
    return [PY, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}", "-m", "corpus.capture_sites"] + list(args)


def worker_cmd(nproc, kind, *args):
    return torchrun(nproc, "--worker", kind, *args)


DIRECT_NPROC = {"autoep-uc-uneven-split": 2}   # direct calls that need several ranks


def direct_cmd(name):
    if name in DIRECT_NPROC:
        return torchrun(DIRECT_NPROC[name], "--direct", name)
    return [PY, "-m", "corpus.capture_sites", "--direct", name]


def prepare(work, name, nproc, *save_args):
    """Train + save a baseline checkpoint once (reused); returns its directory."""
    d = Path(work) / name
    if not (d / "latest").exists():
        shutil.rmtree(d, ignore_errors=True)
        rc, out = run(worker_cmd(nproc, "save", "--dir", str(d), *save_args))
        if rc != 0:
            raise SystemExit(f"baseline {name} failed to save:\n{out}")
    return d


def copy_ckpt(src, work, name):
    dst = Path(work) / name
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    return dst


# ---- the torchrun worker -----------------------------------------------------------------

def megatron_like(hidden=64, layers=2):
    """A GPT-style block stack whose parameter names follow Megatron-LM's (attention.query_key_value,
    attention.dense, mlp.dense_h_to_4h, mlp.dense_4h_to_h), which MegatronSDLoader's merge/split needs."""
    import torch.nn as nn
    import torch

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.query_key_value = nn.Linear(hidden, 3 * hidden)
            self.dense = nn.Linear(hidden, hidden)

        def forward(self, x):
            q, k, v = self.query_key_value(x).chunk(3, dim=-1)
            return self.dense(torch.softmax(q @ k.transpose(-1, -2), -1) @ v)

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.dense_h_to_4h = nn.Linear(hidden, 4 * hidden)
            self.dense_4h_to_h = nn.Linear(4 * hidden, hidden)

        def forward(self, x):
            return self.dense_4h_to_h(torch.relu(self.dense_h_to_4h(x)))

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention, self.mlp = Attention(), MLP()

        def forward(self, x):
            x = x + self.attention(x)
            return x + self.mlp(x)

    class GPTLike(nn.Module):
        def __init__(self):
            super().__init__()
            self.hidden = hidden
            self.layers = nn.ModuleList(Layer() for _ in range(layers))
            self.head = nn.Linear(hidden, 8)

        def forward(self, x, y):
            x = x.unsqueeze(1)
            for layer in self.layers:
                x = layer(x)
            return nn.functional.cross_entropy(self.head(x[:, 0]).float(), y)

    return GPTLike()


def worker(argv):
    import torch
    import deepspeed
    from corpus.workers.common import SimpleMPU, batch, build_model, ds_config, log, set_ds_log_level

    p = argparse.ArgumentParser()
    p.add_argument("kind", choices=["save", "load"])
    p.add_argument("--dir", required=True)
    p.add_argument("--stage", type=int, default=0)
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--megatron", action="store_true", help="Megatron-style parameter names")
    p.add_argument("--client-model-key", action="store_true", help="save_checkpoint(client_state={'model': None})")
    p.add_argument("--extra-optimizer-param", action="store_true",
                   help="the optimizer also holds a parameter that is not in the model")
    p.add_argument("--post-hook-returns", action="store_true",
                   help="a load_state_dict post hook that returns its incompatible_keys")
    p.add_argument("--zero3-elastic", action="store_true",
                   help='zero_optimization.elastic_checkpoint true + optimizer built with elastic_checkpoint=True')
    p.add_argument("--grad-clip", action="store_true", help='save with "gradient_clipping": 1.0')
    p.add_argument("--no-grad-norm", action="store_true",
                   help='zero_optimization.compute_grad_norm false (with gradient_clipping 0, as it requires)')
    a = p.parse_args(argv)

    set_ds_log_level()
    deepspeed.init_distributed(dist_backend="gloo")
    torch.manual_seed(1234 if a.kind == "save" else 999)
    mpu = SimpleMPU(a.tp) if a.tp > 1 else None
    model = megatron_like() if a.megatron else build_model("base")
    params = list(model.parameters())
    if a.extra_optimizer_param:
        # e.g. a learnable loss weight kept outside the model, optimized with it
        params.append(torch.nn.Parameter(torch.ones(1)))
    opt = torch.optim.AdamW(params, lr=1e-3)
    cfg = ds_config(argparse.Namespace(stage=a.stage, precision="fp32", optimizer="adamw"))
    if a.zero3_elastic:
        cfg["zero_optimization"]["elastic_checkpoint"] = True
    if a.grad_clip:
        cfg["gradient_clipping"] = 1.0
    if a.no_grad_norm:
        cfg["gradient_clipping"] = 0.0
        cfg["zero_optimization"]["compute_grad_norm"] = False
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=cfg, mpu=mpu)
    if a.zero3_elastic:
        # deepspeed.initialize() in 0.14-0.19 does not pass elastic_checkpoint to the ZeRO-3
        # optimizer (it only warns); a DeepSpeedZeroOptimizer_Stage3 built with
        # elastic_checkpoint=True (the flag's documented meaning) holds this:
        engine.optimizer.elastic_checkpoint = True
    if a.kind == "save":
        for step in range(3):
            x, y = batch(engine, model.hidden, seed=step + 100 * engine.global_rank)
            loss = engine(x, y)
            engine.backward(loss)
            engine.step()
        engine.save_checkpoint(a.dir, client_state={"model": None} if a.client_model_key else {})
        log(f"saved checkpoint to {a.dir}")
        return
    if a.post_hook_returns:
        engine.module.register_load_state_dict_post_hook(lambda module, incompatible_keys: incompatible_keys)
    log(f"loading checkpoint from {a.dir}")
    load_path, _ = engine.load_checkpoint(a.dir)
    log(f"load_checkpoint returned {load_path}")


# ---- direct calls ------------------------------------------------------------------------

def _single_process_dist():
    """One gloo process, unless torchrun already set up the ranks."""
    if "RANK" not in os.environ:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ.get("MASTER_PORT", "29531"),
                          RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1")
    import deepspeed
    deepspeed.init_distributed(dist_backend="gloo")


def direct_sd_loader_json_path():
    """SDLoaderFactory.get_sd_loader_json(pathlib.Path(<json>), None): a Path is neither str nor dict."""
    import json
    import pathlib
    import tempfile
    from deepspeed.runtime.state_dict_factory import SDLoaderFactory
    d = tempfile.mkdtemp()
    f = pathlib.Path(d) / "checkpoint.json"
    f.write_text(json.dumps({"type": "Megatron", "version": 1.0, "checkpoints": ["mp_rank_00_model_states.pt"]}))
    SDLoaderFactory.get_sd_loader_json(f, None)


def direct_autoep_folded_ckpt_unfolded_runtime():
    """DeepSpeedEngine._validate_autoep_folding_checkpoint_metadata(state with the folding metadata key,
    folding_spec=None): a folded AutoEP+AutoTP checkpoint read by a runtime without folding."""
    from deepspeed.runtime.engine import DeepSpeedEngine
    from deepspeed.checkpoint.constants import FOLDING_METADATA_KEY
    DeepSpeedEngine._validate_autoep_folding_checkpoint_metadata({FOLDING_METADATA_KEY: {"version": 1}},
                                                                 folding_spec=None,
                                                                 family="routed_expert",
                                                                 zero_partition_group="edp",
                                                                 zero_partition_count=1)


def direct_autoep_unfolded_ckpt_folded_runtime():
    """DeepSpeedEngine._validate_autoep_folding_checkpoint_metadata(state without folding metadata,
    folding_spec with tp_size=2): a folded runtime reading a checkpoint saved without folding."""
    import types
    from deepspeed.runtime.engine import DeepSpeedEngine
    DeepSpeedEngine._validate_autoep_folding_checkpoint_metadata({"module": {}},
                                                                 folding_spec=types.SimpleNamespace(tp_size=2, ep_size=2,
                                                                                                    etp_size=1),
                                                                 family="routed_expert",
                                                                 zero_partition_group="edp",
                                                                 zero_partition_count=1)


def _expert_param(local_experts, group_name="ep_size_1"):
    import torch
    p = torch.nn.Parameter(torch.zeros(local_experts, 4))
    if group_name:
        p.ds_zero_partition_group_name = group_name
    return p


def direct_autoep_uc_missing_group():
    """DeepSpeedZeroOptimizer_Stage3._slice_autoep_universal_expert_param on a universal expert
    fragment ({'param': 4x4, 'is_expert_param': True}) for a target parameter without
    ds_zero_partition_group_name (not registered as an AutoEP expert parameter)."""
    import torch
    from deepspeed.runtime.zero.stage3 import DeepSpeedZeroOptimizer_Stage3
    from deepspeed.checkpoint.constants import PARAM, EP_IS_EXPERT_PARAM
    DeepSpeedZeroOptimizer_Stage3._slice_autoep_universal_expert_param(
        None, {PARAM: torch.zeros(4, 4), EP_IS_EXPERT_PARAM: True}, _expert_param(2, group_name=None))


def direct_autoep_uc_local_experts():
    """DeepSpeedZeroOptimizer_Stage3._slice_autoep_universal_expert_param with a real expert-parallel
    group of size 1 (groups._create_expert_and_data_parallel(1), one gloo process): the universal
    fragment holds 4 experts (ep_num_experts 4), the target parameter has 2 local experts."""
    import torch
    _single_process_dist()
    from deepspeed.utils import groups
    from deepspeed.runtime.zero.stage3 import DeepSpeedZeroOptimizer_Stage3
    from deepspeed.checkpoint.constants import PARAM, EP_IS_EXPERT_PARAM, EP_NUM_EXPERTS
    groups._create_expert_and_data_parallel(1)
    DeepSpeedZeroOptimizer_Stage3._slice_autoep_universal_expert_param(
        None, {PARAM: torch.zeros(4, 4), EP_IS_EXPERT_PARAM: True, EP_NUM_EXPERTS: 4}, _expert_param(2))


def direct_autoep_uc_uneven_split():
    """Under torchrun with 2 ranks: an expert-parallel group of size 2
    (groups._create_expert_and_data_parallel(2)) and a universal expert fragment of 3 experts
    (ep_num_experts 3), which 2 EP ranks cannot split evenly."""
    import torch
    _single_process_dist()
    from deepspeed.utils import groups
    from deepspeed.runtime.zero.stage3 import DeepSpeedZeroOptimizer_Stage3
    from deepspeed.checkpoint.constants import PARAM, EP_IS_EXPERT_PARAM, EP_NUM_EXPERTS
    groups._create_expert_and_data_parallel(2)
    DeepSpeedZeroOptimizer_Stage3._slice_autoep_universal_expert_param(
        None, {PARAM: torch.zeros(3, 4), EP_IS_EXPERT_PARAM: True, EP_NUM_EXPERTS: 3}, _expert_param(2, "ep_size_2"))


def direct_autoep_uc_short_tensor():
    """As autoep-uc-local-experts, but the fragment's ep_num_experts (2) matches the target while
    its tensor holds only 1 expert row."""
    import torch
    _single_process_dist()
    from deepspeed.utils import groups
    from deepspeed.runtime.zero.stage3 import DeepSpeedZeroOptimizer_Stage3
    from deepspeed.checkpoint.constants import PARAM, EP_IS_EXPERT_PARAM, EP_NUM_EXPERTS
    groups._create_expert_and_data_parallel(1)
    DeepSpeedZeroOptimizer_Stage3._slice_autoep_universal_expert_param(
        None, {PARAM: torch.zeros(1, 4), EP_IS_EXPERT_PARAM: True, EP_NUM_EXPERTS: 2}, _expert_param(2))


def direct_autoep_uc_no_target():
    """DeepSpeedZeroOptimizer_Stage3.load_hp_checkpoint_state(folder, 'fp32', param=None) on a real
    expert fragment file <folder>/fp32.pt ({'param': ..., 'is_expert_param': True}); self is a
    stand-in holding only dp_process_group (None: the default group)."""
    import tempfile
    import types
    import torch
    _single_process_dist()
    from deepspeed.runtime.zero.stage3 import DeepSpeedZeroOptimizer_Stage3
    from deepspeed.checkpoint.constants import PARAM, EP_IS_EXPERT_PARAM
    folder = os.path.join(tempfile.mkdtemp(), "layers.0.experts.w1")
    os.makedirs(folder)
    torch.save({PARAM: torch.zeros(4, 4), EP_IS_EXPERT_PARAM: True}, os.path.join(folder, "fp32.pt"))
    DeepSpeedZeroOptimizer_Stage3.load_hp_checkpoint_state(types.SimpleNamespace(dp_process_group=None), folder,
                                                           "fp32")


def direct_z3_uc_module_only_swapped():
    """DeepSpeedZeroOptimizer_Stage3.load_module_checkpoint_state_from_checkpoint_dir_stage3(ckpt, True)
    where subgroup 0's fp16 partition buffer is None, as the optimizer leaves it for subgroups whose
    parameters are offloaded to NVMe (offload_param.device nvme, beyond max_in_cpu); self is a
    stand-in holding fp16_groups / fp16_partitioned_groups_flat / fp32_partitioned_groups_flat."""
    import tempfile
    import types
    from deepspeed.runtime.zero.stage3 import DeepSpeedZeroOptimizer_Stage3
    stub = types.SimpleNamespace(fp16_groups=[[]], fp16_partitioned_groups_flat=[None],
                                 fp32_partitioned_groups_flat=[None])
    DeepSpeedZeroOptimizer_Stage3.load_module_checkpoint_state_from_checkpoint_dir_stage3(
        stub, tempfile.mkdtemp(), True)


def direct_torch_load_none():
    """torch.load(None, weights_only=False): the checkpoint path variable was never set."""
    import torch
    torch.load(None, weights_only=False)


def direct_torch_load_socket_stream():
    """torch.load(<socket stream>) of a real torch.save'd dict sent through a socket pair: a
    network stream (HTTP response, pipe-like reader) has no seek."""
    import io
    import socket
    import threading
    import torch
    buf = io.BytesIO()
    torch.save({"module": {"w": torch.zeros(2)}}, buf)
    a, b = socket.socketpair()
    threading.Thread(target=lambda: (a.sendall(buf.getvalue()), a.close()), daemon=True).start()
    torch.load(b.makefile("rb"), weights_only=False)


DIRECT = {
    "sd-loader-json-path": direct_sd_loader_json_path,
    "autoep-folded-ckpt-unfolded-runtime": direct_autoep_folded_ckpt_unfolded_runtime,
    "autoep-unfolded-ckpt-folded-runtime": direct_autoep_unfolded_ckpt_folded_runtime,
    "autoep-uc-missing-group": direct_autoep_uc_missing_group,
    "autoep-uc-local-experts": direct_autoep_uc_local_experts,
    "autoep-uc-uneven-split": direct_autoep_uc_uneven_split,
    "autoep-uc-short-tensor": direct_autoep_uc_short_tensor,
    "autoep-uc-no-target": direct_autoep_uc_no_target,
    "z3-uc-module-only-swapped": direct_z3_uc_module_only_swapped,
    "torch-load-none": direct_torch_load_none,
    "torch-load-socket-stream": direct_torch_load_socket_stream,
}


# ---- the load captures -------------------------------------------------------------------

def cap_mp_split(work):
    """TinyNet saved with model-parallel size 2 (stage 0), loaded with model-parallel size 3."""
    d = prepare(work, "_base_tp2", 2, "--tp", "2")
    return worker_cmd(3, "load", "--dir", str(copy_ckpt(d, work, "mp-split")), "--tp", "3")


def cap_mp_merge(work):
    """Megatron-style model saved with model-parallel size 3, loaded with model-parallel size 2."""
    d = prepare(work, "_base_megatron_tp3", 3, "--tp", "3", "--megatron")
    return worker_cmd(2, "load", "--dir", str(copy_ckpt(d, work, "mp-merge")), "--tp", "2", "--megatron")


def cap_module_key_both(work):
    """Saved with model-parallel size 2 and save_checkpoint(client_state={'model': None}) (a trainer
    that stores its own 'model' entry), loaded with model-parallel size 1."""
    d = prepare(work, "_base_tp2_client_model", 2, "--tp", "2", "--client-model-key")
    return worker_cmd(1, "load", "--dir", str(copy_ckpt(d, work, "module-key-both")))


def cap_module_key_neither(work):
    """TinyNet model-parallel-2 checkpoint whose mp_rank_XX files are rewritten the way a foreign
    exporter lays them out ({'model_state_dict': ..., 'mp_world_size': 2}), loaded with
    model-parallel size 1."""
    import torch
    d = copy_ckpt(prepare(work, "_base_tp2", 2, "--tp", "2"), work, "module-key-neither")
    tag = (d / "latest").read_text().strip()
    for f in sorted((d / tag).glob("mp_rank_*_model_states.pt")):
        sd = torch.load(f, weights_only=False)
        torch.save({"model_state_dict": sd["module"], "mp_world_size": sd["mp_world_size"]}, f)
    return worker_cmd(1, "load", "--dir", str(d))


def cap_optimizer_param_not_in_model(work):
    """ZeRO-2 dp-2 checkpoint loaded by a dp-2 job whose optimizer also holds a parameter outside the
    model. The rank whose partition holds that parameter already fails in deepspeed.initialize
    (KeyError in _create_param_mapping; with dp 1 that is the only error); the other rank reaches
    load_checkpoint and raises in _get_zero_param_shapes."""
    d = prepare(work, "_base_z2_dp2", 2, "--stage", "2")
    return worker_cmd(2, "load", "--dir", str(copy_ckpt(d, work, "optimizer-param-not-in-model")), "--stage", "2",
                      "--extra-optimizer-param")


def cap_post_hook_returns(work):
    """ZeRO-2 checkpoint loaded into a model with a load_state_dict post hook that returns a value."""
    d = prepare(work, "_base_z2", 1, "--stage", "2")
    return worker_cmd(1, "load", "--dir", str(copy_ckpt(d, work, "post-hook-returns")), "--stage", "2",
                      "--post-hook-returns")


def cap_zero3_elastic(work):
    """ZeRO-3 checkpoint loaded with elastic_checkpoint set (config + optimizer flag, see worker)."""
    d = prepare(work, "_base_z3", 1, "--stage", "3")
    return worker_cmd(1, "load", "--dir", str(copy_ckpt(d, work, "zero3-elastic")), "--stage", "3",
                      "--zero3-elastic")


def cap_grad_clip_no_grad_norm(work):
    """ZeRO-2 checkpoint saved with gradient clipping loaded with zero_optimization.compute_grad_norm false."""
    d = prepare(work, "_base_z2_clip", 1, "--stage", "2", "--grad-clip")
    return worker_cmd(1, "load", "--dir", str(copy_ckpt(d, work, "grad-clip-no-grad-norm")), "--stage", "2",
                      "--no-grad-norm")


LOADS = {
    "mp-split": cap_mp_split,
    "mp-merge": cap_mp_merge,
    "module-key-both": cap_module_key_both,
    "module-key-neither": cap_module_key_neither,
    "optimizer-param-not-in-model": cap_optimizer_param_not_in_model,
    "post-hook-returns": cap_post_hook_returns,
    "zero3-elastic": cap_zero3_elastic,
    "grad-clip-no-grad-norm": cap_grad_clip_no_grad_norm,
}


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        return worker(sys.argv[2:])
    if len(sys.argv) > 2 and sys.argv[1] == "--direct":
        return DIRECT[sys.argv[2]]()
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", action="append", help="capture NAME (repeatable); default: all")
    p.add_argument("--list", action="store_true")
    p.add_argument("--work", default=WORK, help=f"checkpoints are made here (default {WORK})")
    a = p.parse_args()
    names = list(LOADS) + list(DIRECT)
    if a.list:
        for n in names:
            doc = (LOADS.get(n) or DIRECT[n]).__doc__
            print(f"{n:38s} {' '.join(doc.split())}")
        return
    unknown = set(a.only or []) - set(names)
    if unknown:
        raise SystemExit(f"unknown capture(s): {sorted(unknown)}; see --list")
    os.makedirs(a.work, exist_ok=True)
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    import deepspeed
    import torch
    print(f"# deepspeed {deepspeed.__version__} / torch {torch.__version__}")
    for n in a.only or names:
        cmd = LOADS[n](a.work) if n in LOADS else direct_cmd(n)
        rc, out = run(cmd)
        shown = " ".join("python" if c == PY else c for c in cmd)
        print(f"===== {n} (exit code {rc})\n$ DS_ACCELERATOR=cpu {shown}\n{out}", flush=True)


if __name__ == "__main__":
    main()
