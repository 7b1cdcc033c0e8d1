"""No command reads a byte of a file outside the checkpoint root (issue 40, "Done when").

A copy of a real DeepSpeed checkpoint (ZeRO-2 dp 2) plants every way out at once: an optimizer
shard and a framework file (scheduler.pt) hard-linked to a secret outside, `latest` symlinked to an
outside file, the model shard symlinked to its outside copy, a newer tag dir symlinked out, a
symlink loop, and a second tag whose only way out is the hard link (for `manifest`). Every command
that reads a checkpoint runs in this process under an audit hook (tests/hostile/audit.py:
`sys.addaudithook` sees every open(), os.open() included, and every directory listing): each path
it opens or lists is resolved, and must lie inside the root or on a short, explicit allow-list; no
path opened may be another name (a hard link) of a file outside. The secret's marker and its first
8 bytes must never be printed. Subprocesses are not audited: none of these commands starts one."""

from __future__ import annotations

import io
import os
import shutil
import sys
import sysconfig
from pathlib import Path

import pytest

from tests import probe_checkpoints as pc
from tests.hostile import audit
from tests.hostile import paths as hp

REPO = Path(__file__).resolve().parents[2]
LAYOUT = "z2-dp2-fp32"
LOG = REPO / "corpus" / "cases" / "job-zero2-dp2-saved-load-dp1-default-log-level.log"


def allowed_tops(root: Path) -> list[str]:
    """Where a command may read besides the root: the interpreter's stdlib and the venv's packages, the
    tool's own package data (triage/, rules/ beside it) and its cache of the compiled rules, the user's
    input (the log), the kernel's view of this process and of the host's memory and mounts (the memory
    and permission probes), and /dev/null. Temporary dirs and files the command itself creates
    (tempfile's audit events) are allowed too. (libc's own reads, such as /etc/passwd for a user name,
    are no Python open and are not seen.)"""
    paths = sysconfig.get_paths()
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ds-triage")
    return [str(root), sys.prefix, paths["stdlib"], paths["platstdlib"], paths["purelib"], paths["platlib"],
            str(REPO / "triage"), str(REPO / "rules"), cache, str(LOG), f"/proc/{os.getpid()}", "/proc/self",
            "/proc/meminfo", "/proc/mounts", "/sys/fs/cgroup", "/dev/null"]


def plant(p: hp.Planted) -> tuple[set[tuple[int, int]], bytes]:
    """Every way out at once; returns the inodes of the files outside, and the secret's first 8 bytes."""
    optim = p.tag_dir / "zero_pp_rank_1_mp_rank_00_optim_states.pt"
    optim.unlink()
    os.link(p.secret, optim)  # a hard link to the secret: no path check sees it
    os.link(p.secret, p.root / "scheduler.pt")  # a Trainer's file, which a resume reads too
    (p.outside / "latest").write_text(p.tag)  # reads like a real `latest`: only an audit sees it followed
    (p.root / "latest").unlink()
    (p.root / "latest").symlink_to(p.outside / "latest")
    model = p.tag_dir / "mp_rank_00_model_states.pt"
    model.unlink()
    model.symlink_to(p.outside / p.tag / model.name)  # a healthy copy outside: a follower prints nothing
    (p.root / "global_step9").symlink_to(p.outside / p.tag, target_is_directory=True)  # newer than the tag
    (p.tag_dir / "loop_optim_states.pt").symlink_to("loop_optim_states.pt")
    second = p.root / "global_step2"  # a tag with no manifest yet, whose only way out is the hard link
    second.mkdir()
    os.link(p.secret, second / optim.name)
    shutil.copy(p.outside / p.tag / model.name, second / model.name)
    return audit.inodes(p.outside), p.secret.read_bytes()[:8]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    from triage.cli import main

    p = hp.prepare(pc.baselines() / LAYOUT, Path(tmp_path_factory.mktemp("no-reads-outside")))
    assert main(["manifest", str(p.root), "-q"]) == 0  # a real manifest, so `verify` checks the tag against it
    return (p, *plant(p))


def commands(p: hp.Planted) -> list[list[str]]:
    root = str(p.root)
    repairs = [["repair", action, root, "--dry-run", "--json"]
               for action in ("latest", "fp32", "strip-optimizer", "config", "universal")]
    return [["probe", root, "--json"], ["probe", root, "--deep", "--json"],
            ["triage", "--log", str(LOG), "--ckpt", root, "--json"], ["verify", root, "--json"],
            ["verify", root, "--deep", "--json"], ["verify", root, "--sizes-only", "--json"],
            ["manifest", root, "--force"], ["manifest", root, "--tag", "global_step2", "--force"],
            ["probe", str(p.tag_dir), "--json"], ["chat", "--ckpt", root, "--history", "off"], *repairs]


class PipedLog(io.TextIOWrapper):
    """stdin with the log piped in: chat answers it as one conversation, probing --ckpt at once."""

    def isatty(self) -> bool:
        return False


def test_no_command_reads_outside_the_root(hostile, capsys, monkeypatch):
    from triage.cli import main

    p, outside_inodes, first8 = hostile
    tops = allowed_tops(p.root)
    imports = {os.path.realpath(entry) for entry in sys.path if entry}  # the import system lists these, no more
    leaks = []
    for argv in commands(p):
        if argv[0] == "chat":
            monkeypatch.setattr(sys, "stdin", PipedLog(io.BytesIO(LOG.read_bytes())))
        with audit.recording() as seen:
            code = main(argv)
        out = capsys.readouterr()
        text = out.out + out.err
        assert code != 70 and "Traceback" not in text, (argv, text[-2000:])
        for needle in (hp.MARKER, first8.hex(" "), first8.hex(), repr(first8)[2:-1]):
            assert needle not in text, f"{argv}: printed the outside file ({needle!r})"
        assert not [e for e in seen if e.event in audit.SPAWNS], f"{argv}: started a process this audit cannot see"
        made = [e.path for e in seen if e.event in audit.MADE]
        for e in seen:
            if e.inode in outside_inodes:
                leaks.append(f"{' '.join(argv[:2])}: {e.event} {e.path} (a name of a file outside the root)")
            elif e.path not in imports and not any(audit.under(e.path, top) for top in tops + made):
                leaks.append(f"{' '.join(argv[:2])}: {e.event} {e.path}")
    assert not leaks, "\n".join(sorted(set(leaks)))


def test_the_plants_are_live(hostile):
    """The audit is only as good as its plants: each one leads where the test says."""
    p, outside_inodes, first8 = hostile
    st = os.stat(p.tag_dir / "zero_pp_rank_1_mp_rank_00_optim_states.pt")
    assert st.st_nlink == 4 and (st.st_dev, st.st_ino) in outside_inodes  # the secret, this, scheduler.pt, step 2's
    assert os.path.realpath(p.root / "latest") == str(p.outside / "latest")
    assert (p.root / "global_step9").is_dir() and first8 == b"root:SEC"


@pytest.mark.parametrize("builder", ["latest_to_secret", "latest_hardlink_to_secret"])
def test_the_permission_probe_never_opens_what_latest_leads_to(tmp_path, builder):
    """Before: its read test opened `latest`'s target outside and read 4 bytes (nothing printed)."""
    from triage.probe import checks
    from triage.probe.context import ProbeContext

    p = hp.prepare(pc.baselines() / LAYOUT, tmp_path)
    getattr(hp, builder)(p)
    secret = audit.inodes(p.outside)
    with audit.recording() as seen:
        result = checks.run(ProbeContext.for_path(str(p.root)), ("permission",))["permission"]
    assert not [e for e in seen if e.event == "open" and (e.inode in secret or audit.under(e.path, str(p.outside)))]
    assert result.status == "refuted", result  # not read is no permission problem: the path probe names it
    assert any("1 not read" in line for line in result.evidence), result.evidence
