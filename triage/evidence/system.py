"""Who reads and where: `id`, `whoami`, `namei -l`, `findmnt`, `mount` / /proc/mounts; the host's
memory: `free`, `nvidia-smi`, and the kernel's OOM killer in `dmesg`. Each parser takes the block's
lines and returns (facts, claimed line indices), or None when the block is not its kind."""

from __future__ import annotations

import re

ID = re.compile(r"^uid=(?P<uid>\d+)\((?P<user>[^)]*)\) gid=(?P<gid>\d+)\((?P<group>[^)]*)\)(?: groups=(?P<groups>\S*))?")
ID_GROUP = re.compile(r"(?<!\d)(\d+)\(([^()]*)\)")
NAMEI_HEAD = re.compile(r"^f: (?P<path>.+)$")
NAMEI_ROW = re.compile(r"^\s*(?P<mode>[-dlcbps][-rwxsStT]{9}) (?P<owner>\S+)\s+(?P<group>\S+)\s+(?P<name>.+)$")
FINDMNT_HEAD = re.compile(r"^TARGET\s+SOURCE\s+FSTYPE\s+OPTIONS\s*$")
MOUNT = re.compile(r"^(?P<source>\S+) on (?P<target>\S+) type (?P<fstype>\S+) \((?P<options>[^)]*)\)$")
PROC_MOUNT = re.compile(r"^(?P<source>\S+) (?P<target>/\S*) (?P<fstype>[\w.]+) (?P<options>\S+) \d+ \d+$")
FREE_HEAD = re.compile(r"^\s+total\s+used\s+free\s+shared\s+buff/cache\s+available\s*$")
FREE_MEM = re.compile(r"^Mem:\s+(?P<total>[\d.,]+[KMGTPi]*)\s+(?P<used>[\d.,]+[KMGTPi]*)\s+(?P<free>[\d.,]+[KMGTPi]*)")
SMI_HEAD = re.compile(r"NVIDIA-SMI \d+(?:\.\d+)*")
SMI_MEMORY = re.compile(r"(?<!\d)(?P<used>\d+)MiB\s*/\s*(?P<total>\d+)MiB")
# The kernel's OOM report (mm/oom_kill.c): dump_header's "%s invoked oom-killer: gfp_mask=..." opens it,
# __oom_kill_process's "%s: Killed process %d (%s) total-vm:..." closes it, its message "Out of memory" or
# "Memory cgroup out of memory" (a cgroup's limit, not the host's memory; kernels before 4.19 print the
# kill without it). The lines between (call trace, memory stats, the task table) are the same report.
OOM_START = re.compile(r"(?<!\S)\S+ invoked oom-killer:")
OOM_KILLED = re.compile(r"(?:(?P<scope>Memory cgroup out of memory|Out of memory)(?: \([^()]*\))?: )?Killed process "
                        r"(?P<pid>\d+) \((?P<comm>[^()]*)\)(?P<vm> total-vm:)?")
# mm/memcontrol.c mem_cgroup_print_oom_context: the "oom-kill:constraint=..." line goes on with
# ",oom_memcg=PATH" when a cgroup's limit was hit, ",global_oom" when the host's memory ran out
OOM_MEMCG = re.compile(r",oom_memcg=(?P<memcg>[^,\s]+)")
OOM_SPAN = 2000  # lines from a report's first line to its kill: a task table of that many processes
NFS_TYPES = ("nfs", "nfs4", "cifs", "smb3", "fuse.sshfs", "lustre", "gpfs", "beegfs")
UNIT_SUFFIX = re.compile(r"[KMGTP]i?$")


def identity(lines: list[str], command: str = ""):
    """`id [USER]`, or `whoami` when the command line says so (a bare name has no shape of its own)."""
    for i, line in enumerate(lines):
        m = ID.match(line.strip())
        if m:
            groups = [int(g) for g, _ in ID_GROUP.findall(m["groups"] or "")]
            names = [n for _, n in ID_GROUP.findall(m["groups"] or "")]
            return {"uid": int(m["uid"]), "user": m["user"], "gid": int(m["gid"]), "group": m["group"],
                    "groups": groups, "group_names": names}, [i]
    body = [i for i, line in enumerate(lines) if line.strip()]
    if command.split()[:1] == ["whoami"] and len(body) == 1:
        return {"user": lines[body[0]].strip(), "uid": None}, body
    return None


def namei(lines: list[str], command: str = ""):
    """`namei -l PATH`: the mode and owner of every component from / down."""
    head = next((i for i, line in enumerate(lines) if NAMEI_HEAD.match(line)), None)
    if head is None:
        return None
    path = NAMEI_HEAD.match(lines[head])["path"]
    chain, claimed, current = [], [head], ""
    for i in range(head + 1, len(lines)):
        m = NAMEI_ROW.match(lines[i])
        if not m:
            break
        name = m["name"].split(" -> ", 1)[0]
        current = "/" if name == "/" else (current.rstrip("/") + "/" + name)
        chain.append({"path": current, "mode": m["mode"], "owner": m["owner"], "group": m["group"]})
        claimed.append(i)
    return ({"path": path, "chain": chain}, claimed) if chain else None


def mounts(lines: list[str], command: str = ""):
    """`findmnt [-T PATH]`, `mount`, or /proc/mounts: each mount's point, type and options."""
    found, claimed = [], []
    header = any(FINDMNT_HEAD.match(line) for line in lines)
    for i, line in enumerate(lines):
        if FINDMNT_HEAD.match(line):
            claimed.append(i)
            continue
        m = MOUNT.match(line) or PROC_MOUNT.match(line)
        if m is None and header:
            words = line.replace("├─", " ").replace("└─", " ").replace("│", " ").split()
            if len(words) == 4 and words[0].startswith("/"):
                found.append({"target": words[0], "source": words[1], "fstype": words[2], "options": words[3]})
                claimed.append(i)
            continue
        if m:
            found.append({k: m[k] for k in ("target", "source", "fstype", "options")})
            claimed.append(i)
    if not found:
        return None
    for mount in found:
        mount["network"] = mount["fstype"] in NFS_TYPES
    return {"mounts": found}, claimed


def memory(lines: list[str], command: str = ""):
    """`free [-g|-m|-h]`: the host's total memory (in the units the command printed)."""
    head = next((i for i, line in enumerate(lines) if FREE_HEAD.match(line)), None)
    if head is None:
        return None
    for i in range(head + 1, min(head + 3, len(lines))):
        m = FREE_MEM.match(lines[i])
        if m:
            unit = _free_unit(command, m["total"])
            claimed = [head] + [j for j in range(head + 1, min(head + 3, len(lines))) if lines[j].strip()]
            return {"host_memory": m["total"], "unit": unit, "free": m["free"]}, claimed
    return None


def _free_unit(command: str, total: str) -> str:
    if UNIT_SUFFIX.search(total):
        return "as shown"
    for flag, unit in (("-g", "GiB"), ("-m", "MiB"), ("-k", "KiB"), ("-b", "bytes")):
        if flag in command.split():
            return unit
    return "KiB" if not command else "as shown"


def gpus(lines: list[str], command: str = ""):
    """`nvidia-smi`: each GPU's memory used / total (MiB)."""
    if not any(SMI_HEAD.search(line) for line in lines[:5]):
        return None
    found = [{"used_mib": int(m["used"]), "total_mib": int(m["total"])}
             for line in lines for m in [SMI_MEMORY.search(line)] if m]
    return {"gpus": found}, list(range(len(lines)))


def oom_kills(lines: list[str], command: str = ""):
    """The kernel's OOM killer (`dmesg`, `dmesg -T`, `journalctl -k`, or grepped): which process it
    killed, and whether a cgroup's memory limit or the host's memory ran out. Every line of a report
    is claimed, so its call trace and memory stats are not read as the job's log."""
    kills, claimed, start, memcg = [], set(), None, None
    for i, line in enumerate(lines):
        if OOM_START.search(line):
            start = i
        m = OOM_MEMCG.search(line)
        memcg = m["memcg"] if m else memcg
        m = OOM_KILLED.search(line)
        if m is None or not (m["scope"] or m["vm"]):  # the kernel's words beside it, not any "Killed process"
            continue
        cgroup = memcg is not None or (m["scope"] or "").startswith("Memory cgroup")
        limit = f"memory cgroup {memcg or ''}".rstrip() if cgroup else "host" if m["scope"] else None
        kills.append({"pid": m["pid"], "process": m["comm"], "line": line.strip(), "limit": limit})
        first = start if start is not None and i - start <= OOM_SPAN else i
        claimed.update(range(first, i + 1))
        start = memcg = None
    return ({"oom_kills": kills}, sorted(claimed)) if kills else None
