"""Fault injection: each function mutates a copied checkpoint directory in place.

Every function takes the checkpoint root (the --load/save dir) and a glob relative to it,
and returns a short description of what it touched (used in the generator's console output).
"""
import glob
import os
import random
import shutil


def _match(root, pattern):
    paths = sorted(glob.glob(os.path.join(root, pattern)))
    if not paths:
        raise FileNotFoundError(f"fault pattern {pattern!r} matched nothing under {root}")
    return paths


def _rel(root, paths):
    return ", ".join(os.path.relpath(p, root) for p in paths)


def delete(root, pattern):
    paths = _match(root, pattern)
    for p in paths:
        shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
    return f"deleted {_rel(root, paths)}"


def truncate_half(root, pattern):
    paths = _match(root, pattern)
    for p in paths:
        os.truncate(p, os.path.getsize(p) // 2)
    return f"truncated to half {_rel(root, paths)}"


def zero_fill(root, pattern):
    paths = _match(root, pattern)
    for p in paths:
        size = os.path.getsize(p)
        with open(p, "wb") as f:
            f.write(b"\0" * size)
    return f"zero-filled {_rel(root, paths)}"


def random_fill(root, pattern, seed=0):
    paths = _match(root, pattern)
    rng = random.Random(seed)
    for p in paths:
        size = os.path.getsize(p)
        with open(p, "wb") as f:
            f.write(rng.randbytes(size))
    return f"overwrote with random bytes {_rel(root, paths)}"


def overwrite_bytes(root, pattern, offset, hex_bytes):
    """Overwrite len(hex_bytes)/2 bytes at `offset` in place (the size stays): a damaged header."""
    paths = _match(root, pattern)
    data = bytes.fromhex(hex_bytes)
    for p in paths:
        with open(p, "r+b") as f:
            f.seek(offset)
            f.write(data)
    return f"overwrote {len(data)} bytes at offset {offset} of {_rel(root, paths)} with {hex_bytes}"


def chmod(root, pattern, mode):
    paths = _match(root, pattern)
    for p in paths:
        os.chmod(p, mode)
    return f"chmod {oct(mode)} {_rel(root, paths)}"


def make_world_readable(root, pattern="."):
    """Give the unprivileged loading user read access to the whole copy first."""
    for dirpath, dirnames, filenames in os.walk(root):
        os.chmod(dirpath, 0o755)
        for f in filenames:
            os.chmod(os.path.join(dirpath, f), 0o644)
    return "chmod -R a+rX"


def write_file(root, pattern, text):
    path = os.path.join(root, pattern)
    with open(path, "w") as f:
        f.write(text)
    return f"wrote {text!r} to {pattern}"


def _rewrite(root, pattern, key, value, inside=None):
    """torch.load (weights_only=False: our own trusted file) -> set/delete one key -> torch.save.

    inside names a nested dict to edit instead of the top level (e.g. optimizer_state_dict).
    """
    import torch
    paths = _match(root, pattern)
    for p in paths:
        sd = torch.load(p, map_location="cpu", weights_only=False)
        target = sd[inside] if inside else sd
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value
        torch.save(sd, p)
    return paths


def rewrite_key(root, pattern, key, value):
    paths = _rewrite(root, pattern, key, value)
    return f"set {key}={value!r} in {_rel(root, paths)}"


def rewrite_optim_key(root, pattern, key, value):
    paths = _rewrite(root, pattern, key, value, inside="optimizer_state_dict")
    return f"set optimizer_state_dict[{key!r}]={value!r} in {_rel(root, paths)}"


def swap(root, a, b):
    """Exchange two files (two ranks' optimizer shards): DeepSpeed loads the result without a word."""
    pa, pb = _match(root, a), _match(root, b)
    if len(pa) != 1 or len(pb) != 1 or pa == pb:
        raise ValueError(f"swap needs two distinct files, got {a!r} -> {pa}, {b!r} -> {pb}")
    tmp = pa[0] + ".swap"
    os.rename(pa[0], tmp)
    os.rename(pb[0], pa[0])
    os.rename(tmp, pb[0])
    return f"swapped {_rel(root, pa)} and {_rel(root, pb)}"


def copy_over(root, src, dst):
    """Copy one file over another (a rank's optimizer shard taken from another save's tag)."""
    (source,) = _match(root, src)
    shutil.copyfile(source, os.path.join(root, dst))
    return f"copied {src} over {dst}"


def apply(root, steps):
    """steps: list of (function_name, pattern, *extra_args)."""
    done = []
    for name, *args in steps:
        done.append(globals()[name](root, *args))
    return "; ".join(done)
