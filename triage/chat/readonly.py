"""The commands `/run` executes for the user, and running them: no shell, read-only, bounded.

Why no shell: a check on the text a shell will read is defeated by the shell's own expansions
(`find ... -delete$9`, `uniq IN${IFS}OUT`, `sort $9-o`). So the chat splits the command itself,
with sh's quoting rules (triage.chat.shell_words), and refuses every construct a shell would act
on instead of passing it: `$`, backticks, `;`, `|`, `&`, `<`, `>`, `(`, braces, a leading `~` or
`#`, more than one line. The words become the argv of subprocess.Popen(argv, shell=False), the
program found in SAFE_PATH only: stdin closed, a minimal environment, a time limit, an output cap. Unquoted `*`, `?` and `[` are expanded by the chat, and only
inside the checkpoint. Each program and each of its options is on an allow-list
(triage.chat.run_policy); a program that reads a file's bytes (cat, head, grep, ...) reads only
files in the checkpoint, the ds_config or /sys/fs/cgroup (a symlink is followed before the check;
a file swapped between the check and the read is not caught).

No interpreter runs on text from the user: every interpreter and launcher (python, perl, sh, env,
xargs, ...) is refused, since no check of its code can be complete (issue 40: `zipfile.os.execl`,
`importlib`, `open(**{'mode': 'w'})` passed the old one). ds-triage's own read-only commands run as
ds-triage's interpreter on its own modules: `ds-triage probe ...` and
`python -m triage.probe.safe_pickle ...` become `sys.executable -I -c BOOT MODULE ARGS`, built
here, their options checked like any program's. A rule's `python -c` check runs only when the text
is one the chat itself printed (/verify): its code is then the rule's, never the user's, and it
runs with the same interpreter, isolated (-I: no cwd, PYTHONPATH or user site on sys.path), which
the confirmation names (the job's own python may differ); those that torch.load a checkpoint file
(it unpickles a stranger's file) or read the job's environment (the chat's minimal one is not it)
are refused with that reason.
"""

from __future__ import annotations

import ast
import glob
import os
import shutil
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass

from triage.chat import run_policy as policy
from triage.chat.session import CommandRun
from triage.chat.shell_words import Word, split

TIMEOUT = 20.0  # seconds
MAX_OUTPUT = 64 * 1024  # bytes kept of stdout and stderr together
MAX_MATCHES = 4096  # files a glob may expand to
SAFE_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"
KEEP_ENV = ("HOME", "TZ", "DS_ACCELERATOR", "CUDA_VISIBLE_DEVICES", "DS_TRIAGE_RULES", "DS_TRIAGE_EXTRA_RULES",
            "DS_TRIAGE_DOCS_URL")
SYSTEM_READABLE = ("/sys/fs/cgroup",)  # memory.max and friends (DS-R001)
PLACEHOLDERS = {'"$CKPT"': "ckpt", '"$TAG"': "ckpt", '"$DS_CONFIG"': "config"}
# Runs a module of ds-triage's own package with the argv after it (sys.path: that package first).
BOOT = ("import runpy, sys; sys.path.insert(0, sys.argv.pop(1)); sys.argv.pop(0); "
        "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)")
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass(frozen=True)
class Context:
    """What a command may touch: the checkpoint root (content reads, globs), the ds_config file,
    and the verify commands the chat printed (the only ones whose python code may run)."""

    root: str | None = None
    config: str | None = None
    offered: frozenset[str] = frozenset()

    @classmethod
    def of(cls, session) -> Context:
        facts = session.report.facts if session.report is not None else {}
        ckpt = facts.get("ckpt") or session.facts.get("ckpt")
        if ckpt and not facts.get("ckpt"):
            from triage.probe.checkpoint import locate

            ckpt = locate(ckpt).root or ckpt
        return cls(ckpt, facts.get("config") or session.facts.get("config"),
                   frozenset(step.command for step in session.steps()))


@dataclass(frozen=True)
class Plan:
    argv: list[str]
    note: str = ""  # how it runs, when that is not what the text says (ds-triage's own python)


def check(command: str, ctx: Context | None = None) -> str | None:
    """None when `command` may run from the chat; else why not, in one line."""
    found = plan(command, ctx or Context())
    return found if isinstance(found, str) else None


def plan(command: str, ctx: Context) -> Plan | str:
    """The argv `command` runs as, or why it does not run."""
    for placeholder, fact in PLACEHOLDERS.items():
        if placeholder in command:
            return f"it still has {placeholder} in it: give the {fact} first (/set {fact} PATH)"
    words = split(command)
    if isinstance(words, str):
        return words
    if not words or not words[0].text:
        return "there is no program to run"
    name, args = words[0].text, [w.text for w in words[1:]]
    if words[0].pattern or "/" in name:
        return f"`{name}`: give a program by its name; the chat runs its own copy from {SAFE_PATH}"
    if name == "ds-triage":
        return _own_module("triage", words[1:], ctx, subcommand=True)
    if name in ("python", "python3") and args[:2] == ["-m", "triage.probe.safe_pickle"]:
        return _own_module("triage.probe.safe_pickle", words[3:], ctx)
    if name in ("python", "python3") and args[:1] == ["-c"] and len(args) > 1 and command in ctx.offered:
        return _rule_python(args[1], words[3:], ctx)
    if name == "find":
        spec, operands = policy.Spec(), policy.check_find(args)
    elif name in policy.PROGRAMS:
        spec = policy.PROGRAMS[name]
        operands = policy.check_options(name, spec, args)
    else:
        return policy.refused_program(name)
    if isinstance(operands, str):
        return operands
    program = shutil.which(name, path=SAFE_PATH)
    if program is None:
        return f"`{name}` is not installed here (looked in {SAFE_PATH})"
    rest = _operands(words[1:], operands, spec.operands, ctx)
    return rest if isinstance(rest, str) else Plan([program, *rest])


def _own_module(module: str, words: list[Word], ctx: Context, subcommand: bool = False) -> Plan | str:
    """ds-triage's own read-only command: its module, run by its own interpreter, argv built here."""
    spec, lead = policy.SAFE_PICKLE, []
    if subcommand:
        sub = words[0].text if words else ""
        if sub not in policy.DS_TRIAGE:
            return f"only ds-triage {', '.join(policy.DS_TRIAGE)} run from the chat (/repair plans a repair)"
        spec, lead, words = policy.DS_TRIAGE[sub], [sub], words[1:]
    operands = policy.check_options("ds-triage" if subcommand else module, spec, [w.text for w in words])
    if isinstance(operands, str):
        return operands
    rest = _operands(words, operands, spec.operands, ctx)
    if isinstance(rest, str):
        return rest
    return Plan([sys.executable, "-I", "-c", BOOT, PACKAGE_ROOT, module, *lead, *rest],
                f"with ds-triage's own python, {sys.executable}")


def _rule_python(code: str, words: list[Word], ctx: Context) -> Plan | str:
    """A rule's python check, printed by the chat: refused when it unpickles or reads the environment."""
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return f"its python code does not parse ({exc.msg})"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if (node.value.id, node.attr) == ("torch", "load"):
                return ("it calls torch.load, which unpickles the checkpoint's file: the chat reads checkpoints "
                        "only with ds-triage's safe reader (/probe)")
            if (node.value.id, node.attr) == ("os", "environ"):
                return "it reads the job's environment, which the chat's own (minimal) one is not: run it there"
    rest = _operands(words, list(range(len(words))), policy.CONTENT, ctx)
    if isinstance(rest, str):
        return rest
    return Plan([sys.executable, "-I", "-c", code, *rest], f"with ds-triage's own python, {sys.executable}")


def _operands(words: list[Word], operands: list[int], kind: str, ctx: Context) -> list[str] | str:
    """The program's arguments: globs expanded (operands only, inside the checkpoint), and each
    operand whose bytes the program reads checked to be a file it may read."""
    out: list[str] = []
    for i, word in enumerate(words):
        if i not in operands or kind == policy.WORDS:
            if word.pattern:
                return f"`{word.text}` has an unquoted glob character, expanded only in file names: quote it"
            out.append(word.text)
            continue
        paths = _expand(word, ctx) if word.pattern else [word.text]
        if isinstance(paths, str):
            return paths
        for path in paths if kind == policy.CONTENT else ():
            why = _readable(path, ctx)
            if why:
                return why
        out += paths
    return out


def _root(ctx: Context) -> str | None:
    return ctx.root if ctx.root and os.path.realpath(ctx.root) != "/" else None


def _within(path: str, directory: str) -> bool:
    real, top = os.path.realpath(path), os.path.realpath(directory)
    return real == top or real.startswith(top.rstrip("/") + "/")


def _expand(word: Word, ctx: Context) -> list[str] | str:
    root = _root(ctx)
    if root is None:
        return f"`{word.text}` is a glob, which the chat expands only inside the checkpoint: give it (/set ckpt PATH)"
    if not _within(os.path.dirname(word.text[:word.glob_at]) or ".", root):
        return f"`{word.text}` is a glob outside the checkpoint ({root}): the chat expands globs only inside it"
    matches = []
    for match in glob.iglob(word.pattern):
        if not _within(os.path.dirname(match) or ".", root):
            return f"`{word.text}` reaches {match}, out of the checkpoint through a link"
        matches.append(match)
        if len(matches) > MAX_MATCHES:
            return f"`{word.text}` matches more than {MAX_MATCHES} files"
    return sorted(matches) or [word.text]  # no match: the word as it is, as sh passes it


def _readable(path: str, ctx: Context) -> str | None:
    """None when the chat may show this file's bytes: in the checkpoint, the ds_config, /sys/fs/cgroup."""
    if path == "-" or (ctx.config and os.path.realpath(path) == os.path.realpath(ctx.config)):
        return None
    if any(_within(path, top) for top in SYSTEM_READABLE):
        return None
    root = _root(ctx)
    if root is None:
        return f"it reads {path}, and the chat reads files only inside the checkpoint: give it (/set ckpt PATH)"
    if not _within(path, root):
        return (f"it reads {path}, outside the checkpoint ({root}): the chat reads only the checkpoint's "
                f"files, the ds_config and /sys/fs/cgroup")
    return None


def run(command: str, ctx: Context | None = None, timeout: float = TIMEOUT, cap: int = MAX_OUTPUT) -> CommandRun:
    """Run an allowed command (checked again here) in a minimal environment; a refused one is
    not started (exit status 126, the reason as its output)."""
    found = plan(command, ctx or Context())
    if isinstance(found, str):
        return CommandRun(command, 126, f"not run: {found}\n")
    env = {name: os.environ[name] for name in KEEP_ENV if name in os.environ}
    env.update(PATH=SAFE_PATH, LC_ALL="C.UTF-8")
    return execute(found.argv, command, timeout, cap, env)


def execute(argv: list[str], command: str, timeout: float = TIMEOUT, cap: int = MAX_OUTPUT,
            env: dict | None = None) -> CommandRun:
    """Run `argv` (built by ds-triage, never a shell): stdin closed, stdout and stderr together, at
    most `cap` bytes kept and `timeout` seconds spent (the whole process group is stopped then)."""
    try:
        proc = subprocess.Popen(argv, shell=False, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, env=env, start_new_session=True)
    except OSError as exc:
        return CommandRun(command, 126, f"not run: {exc.strerror or exc}\n")
    chunks: list[bytes] = []

    def read() -> None:
        size = 0
        while size <= cap:
            chunk = proc.stdout.read1(cap + 1 - size)
            if not chunk:
                return
            chunks.append(chunk)
            size += len(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    timed_out = reader.is_alive()
    data = b"".join(chunks)
    truncated = len(data) > cap
    if timed_out or truncated:
        _stop(proc)
    returncode = proc.wait()
    reader.join(1)
    proc.stdout.close()
    return CommandRun(command, None if timed_out or truncated else returncode, printable(data[:cap]), truncated)


def _stop(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def printable(data: bytes) -> str:
    """Output as text a terminal shows as text: no escape sequences from a binary file."""
    text = data.decode("utf-8", errors="replace")
    return "".join(c if c in "\n\t" or (c >= " " and c != "\x7f" and not "\x80" <= c <= "\x9f") else "\ufffd"
                   for c in text)
