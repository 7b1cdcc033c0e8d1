"""Build and run the real commands (torchrun / python -m ...) for a scenario; capture output."""
import os
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from corpus import layouts as L

REPO = Path(__file__).resolve().parent.parent
# The venv whose python runs every worker: the project's .venv, or CORPUS_VENV (e.g. one with the
# `frameworks` extra, so that transformers / accelerate / peft never enter the project's own venv).
VENV = Path(os.environ.get("CORPUS_VENV") or REPO / ".venv")
VENV_BIN = VENV / "bin"
PY = str(VENV_BIN / "python")
TORCHRUN = [PY, "-m", "torch.distributed.run"]
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def use_venv(venv):
    """Run the workers with another venv's python (a release pair's, corpus/releases.py)."""
    global VENV, VENV_BIN, PY, TORCHRUN
    VENV = Path(venv)
    VENV_BIN = VENV / "bin"
    PY = str(VENV_BIN / "python")
    TORCHRUN = [PY, "-m", "torch.distributed.run"]


# A private torch JIT-extension cache (DeepSpeed builds its shm comm op on first use): sharing
# ~/.cache/torch_extensions with other tools that use different build flags forces rebuilds.
EXT_DIR = {"path": None}


def base_env():
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}:{env.get('PATH', '')}"
    env["DS_ACCELERATOR"] = "cpu"
    env["PYTHONUNBUFFERED"] = "1"
    env["HF_HUB_OFFLINE"] = "1"   # the framework workers build their models from a config: no hub
    env.pop("PYTHONPATH", None)
    if EXT_DIR["path"]:
        env["TORCH_EXTENSIONS_DIR"] = EXT_DIR["path"]
    return env


def torchrun(nproc, script, args):
    return TORCHRUN + [f"--nproc_per_node={nproc}", f"corpus/workers/{script}"] + list(args)


def launch(lay, nproc, script, args):
    """torchrun, or one plain process for a layout with `launch: python` (no DeepSpeed)."""
    if lay.get("launch") == "python":
        return [PY, f"corpus/workers/{script}"] + list(args)
    return torchrun(nproc, script, args)


def build_command(sc, lay, ckpt):
    """sc: scenario dict; lay: layout dict; ckpt: the DeepSpeed save dir (holds `latest`)."""
    run = sc.get("run", "load")
    over = sc.get("args", {})
    n = over.get("nproc", L.nproc(lay))
    load_dir = os.path.normpath(os.path.join(ckpt, sc.get("load_dir", "")))
    tag = sc.get("tag")
    if run == "load":
        cmd = launch(lay, n, L.script(lay, "load"), L.worker_args(lay, over) + ["--load-dir", load_dir])
        cmd += ["--tag", tag] if tag else []
    elif run == "train":
        cmd = launch(lay, n, L.script(lay, "train"), L.worker_args(lay, over) + ["--save-dir", load_dir])
    elif run == "negative":
        cmd = torchrun(n, "negatives.py", L.worker_args(lay, over) + ["--mode", sc["mode"]])
    elif run == "zero_to_fp32":
        cmd = [PY, "-m", "deepspeed.utils.zero_to_fp32", load_dir, os.path.join(ckpt, "fp32_out")]
        cmd += ["--tag", tag] if tag else []
    elif run == "ds_to_universal":
        cmd = [PY, "-m", "deepspeed.checkpoint.ds_to_universal",
               "--input_folder", os.path.join(load_dir, tag or L.TAG),
               "--output_folder", os.path.join(ckpt, (tag or L.TAG) + "_universal")]
    elif run == "torch_load":
        cmd = [PY, "corpus/workers/plain_load.py", os.path.join(ckpt, sc["file"])]
    elif run == "cmd":  # {project_py}: the project's own DeepSpeed, also on a release pair (a newer converter)
        cmd = [a.format(py=PY, ckpt=ckpt, project_py=str(REPO / ".venv" / "bin" / "python")) for a in sc["argv"]]
    else:
        raise ValueError(run)
    cmd += list(sc.get("flags", []))
    return (NOBODY + cmd) if sc.get("user") == "nobody" else cmd


def display(cmd, env_extra):
    """Command as a user would type it (venv python shown as `python`)."""
    parts = [f"{k}={v}" for k, v in sorted(env_extra.items())]
    parts += ["python" if a == PY else a for a in cmd]
    return " ".join(shlex.quote(p) for p in parts)


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def failure(what: str, rc, log_path, lines: int = 25) -> str:
    """`what` exited `rc`, with the end of its log: a test's session directory, and the log in
    it, is gone by the time CI prints the failure."""
    try:
        tail = [l for l in Path(log_path).read_text(errors="replace").splitlines() if l.strip()][-lines:]
    except OSError:
        tail = ["(the log could not be read)"]
    return f"{what} exited {rc}; {log_path} ends:\n" + "\n".join(tail)


def run(cmd, env_extra, log_path, timeout=600):
    """Run and capture; torchrun gets a free rendezvous port (PET_MASTER_PORT, so the command is
    unchanged): another torchrun on the machine holding 29500 made runs fail with EADDRINUSE."""
    env = base_env()
    env.update(env_extra)
    for attempt in range(3):
        env.setdefault("PET_MASTER_PORT", str(free_port()))
        with open(log_path, "wb") as f:
            try:
                rc = subprocess.run(cmd, cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, timeout=timeout).returncode
            except subprocess.TimeoutExpired:
                return "timeout"
        if rc == 0 or b"EADDRINUSE" not in Path(log_path).read_bytes() or "PET_MASTER_PORT" in env_extra:
            return rc
        env.pop("PET_MASTER_PORT")   # the port was taken between choosing and binding it: another one
    return rc


# ---- unprivileged-user support -------------------------------------------------------

def ensure_traversable(paths):
    """chmod o+x on every directory above `paths` (and o+r on the files) so uid 65534 can
    run the interpreter and scripts.  Prints each change made to this machine."""
    changed = []
    for p in paths:
        p = Path(p).resolve()
        for d in [p] + list(p.parents):
            if d.is_dir():
                mode = d.stat().st_mode
                if not mode & stat.S_IXOTH:
                    os.chmod(d, mode | stat.S_IXOTH | (stat.S_IROTH if d == p else 0))
                    changed.append(str(d))
    for c in changed:
        print(f"  [perm setup] chmod o+x {c}", file=sys.stderr)


def nobody_env(work):
    """A HOME and a copy of root's torch extension build cache the unprivileged user can use."""
    home, ext = Path(work) / "_nobody_home", Path(work) / "_nobody_torch_ext"
    if not ext.exists():
        src = Path(EXT_DIR["path"] or Path.home() / ".cache/torch_extensions/py311_cpu")
        shutil.copytree(src, ext) if src.exists() else ext.mkdir(parents=True)
    home.mkdir(parents=True, exist_ok=True)
    for p in (home, ext):
        subprocess.run(["chown", "-R", "65534:65534", str(p)], check=True)
    ensure_traversable([Path(PY).resolve().parent.parent, VENV_BIN.parent, REPO / "corpus", work])
    return {"HOME": str(home), "TORCH_EXTENSIONS_DIR": str(ext)}
