"""Derive the one-line `what_happened` for the manifest from a real log (read-only)."""
import os
import re

EXC = re.compile(r"^(?:\[rank\d+\]: )?((?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Warning))"
                 r"(?::\s?(.*))?$")
FRAME = re.compile(r'^(?:\[rank\d+\]: )?\s*File "([^"]+)", line \d+, in (\S+)')
SIGNAL = re.compile(r"(Signal \d+ \(\w+\) received by PID \d+)")
NOISE = ("ChildFailedError", "FutureWarning", "UserWarning", "DeprecationWarning")
PEER = ("Connection closed by peer", "Connection reset by peer", "DistBackendError")


def _where(lines, i):
    for j in range(i - 1, max(i - 60, -1), -1):
        m = FRAME.match(lines[j])
        if m:
            return f"{os.path.splitext(os.path.basename(m.group(1)))[0]}.{m.group(2)}"
    return None


def _short(msg, n=160):
    msg = " ".join(msg.split())
    return msg if len(msg) <= n else msg[:n - 3] + "..."


def what_happened(text, exit_code, pattern=None):
    lines = text.splitlines()
    if pattern:
        for ln in lines:
            if re.search(pattern, ln):
                return _short(re.sub(r"^\[rank\d+\]: ", "", ln.strip()))
    found = []
    for i, ln in enumerate(lines):
        m = EXC.match(ln.strip()) if not ln.startswith(" ") else None
        if m and not any(x in ln for x in NOISE):
            found.append((i, m.group(1), m.group(2) or ""))
    real = [f for f in found if not any(p in f[1] + f[2] for p in PEER)] or found
    if real:
        i, exc, msg = real[0]
        if msg.rstrip().endswith(":") or not msg:
            nxt = [re.sub(r"^\[rank\d+\]: ", "", ln).strip() for ln in lines[i + 1:i + 3]]
            nxt = [n for n in nxt if n and not FRAME.match(n)]
            if nxt and not nxt[0].startswith(("E1", "W1", "I1", "[", "Traceback")):
                msg = f"{msg} {nxt[0]}".strip()
        where = _where(lines, i)
        return _short(f"{exc}{': ' + msg if msg else ''}" + (f" (in {where})" if where else ""))
    root = next((i for i, ln in enumerate(lines) if ln.startswith("Root Cause")), 0)
    for ln in lines[root:] + lines[:root]:
        m = SIGNAL.search(ln)
        if m:
            return m.group(1)
    warn = [ln for ln in lines if "[WARNING]" in ln]
    if warn:
        return _short("WARNING " + warn[0].split("]", 3)[-1].strip())
    for ln in lines:
        if "load_checkpoint returned" in ln:
            return _short(ln.split("] ", 1)[-1])
    tail = [ln for ln in lines if ln.strip()]
    return _short(tail[-1]) if tail else f"no output, exit code {exit_code}"
