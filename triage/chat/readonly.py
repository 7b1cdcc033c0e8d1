"""Which commands the chat may run for the user, and running them with a time limit and an
output cap.

Only read-only programs run: simple commands and pipes of the programs in PROGRAMS, each
with its arguments checked where the program can also write or act (find -delete, dmesg -C,
env CMD, python -c code that unpickles). No `;`, `&&`, redirection or command substitution:
a command is either plainly read-only or it is refused with the reason, and shown to copy.
`check(command)` says why not (or None); `run(command)` runs an allowed one under /bin/sh
(for the globs the rules' commands use: `{ckpt}/{tag}/*.pt`).
"""

from __future__ import annotations

import ast
import os
import shlex
import signal
import subprocess
import threading
from dataclasses import dataclass

from triage.chat.session import CommandRun

TIMEOUT = 20.0  # seconds
MAX_OUTPUT = 64 * 1024  # bytes kept of stdout and stderr together

# Programs that only read, whatever their arguments (the time limit stops a `tail -f`).
READERS = {"ls", "stat", "cat", "head", "tail", "grep", "wc", "du", "df", "file", "id", "namei", "findmnt",
           "free", "readlink", "realpath", "od", "sha256sum", "md5sum", "cksum", "basename", "dirname", "sort",
           "uniq", "cut", "tr", "nproc", "uname", "hostname", "whoami"}
CHECKED = {"find", "env", "dmesg", "python", "python3", "ds-triage"}


@dataclass(frozen=True)
class Options:
    """The options a reader that *can* write may take (any other is refused), the ones among
    them that take a value (`-k 2`, `-k2`, `--key=2`), and how many operands it may have."""

    short: str
    long: frozenset[str]
    short_with_value: str = ""
    long_with_value: frozenset[str] = frozenset()
    max_operands: int | None = None
    more_operands: str = ""  # what one more operand would do


# The readers with an option or operand that writes, runs a program or sets something; every
# other reader has none (tests/test_chat_readonly.py reads each one's --help to keep that true).
# Left out on purpose: sort -o/--output, -T, --compress-program; uniq's OUTPUT operand; file -C
# (writes a compiled magic file); hostname NAME, -F, -b (set the host name).
READER_OPTIONS = {
    "sort": Options("bdfgiMhnRrVcCmsuz", frozenset({
        "--ignore-leading-blanks", "--dictionary-order", "--ignore-case", "--general-numeric-sort",
        "--ignore-nonprinting", "--month-sort", "--human-numeric-sort", "--numeric-sort", "--random-sort",
        "--reverse", "--version-sort", "--check", "--merge", "--stable", "--unique", "--zero-terminated",
        "--key", "--field-separator", "--buffer-size", "--sort", "--batch-size", "--parallel", "--debug",
        "--random-source", "--files0-from", "--help", "--version"}),
        short_with_value="ktS", long_with_value=frozenset({
            "--key", "--field-separator", "--buffer-size", "--sort", "--batch-size", "--parallel",
            "--random-source", "--files0-from"})),
    "uniq": Options("cdDiuzfsw", frozenset({
        "--count", "--repeated", "--all-repeated", "--ignore-case", "--unique", "--zero-terminated",
        "--skip-fields", "--skip-chars", "--check-chars", "--group", "--help", "--version"}),
        short_with_value="fsw", long_with_value=frozenset({"--skip-fields", "--skip-chars", "--check-chars"}),
        max_operands=1, more_operands="uniq writes to its second operand"),
    "file": Options("bcEhiIkLlNnprsSvz0mfFeP", frozenset({
        "--brief", "--checking-printout", "--dereference", "--no-dereference", "--mime", "--mime-type",
        "--mime-encoding", "--keep-going", "--list", "--no-buffer", "--no-pad", "--preserve-date", "--raw",
        "--special-files", "--no-sandbox", "--uncompress", "--uncompress-noreport", "--print0",
        "--magic-file", "--files-from", "--separator", "--exclude", "--exclude-quiet", "--extension",
        "--apple", "--parameter", "--help", "--version"}),
        short_with_value="mfFeP", long_with_value=frozenset({
            "--magic-file", "--files-from", "--separator", "--exclude", "--exclude-quiet", "--parameter"})),
    "hostname": Options("sfdiIAaynV", frozenset({
        "--short", "--fqdn", "--long", "--domain", "--ip-address", "--all-ip-addresses", "--all-fqdns",
        "--alias", "--yp", "--nis", "--help", "--version"}),
        max_operands=0, more_operands="hostname NAME sets the host name"),
}
PROGRAMS = READERS | CHECKED
FIND_ACTIONS = {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"}
DMESG_FLAGS = {"-T", "--ctime", "-H", "--human", "-k", "--kernel", "-x", "--decode", "-L", "--color", "-t",
               "--notime", "-l", "--level", "-f", "--facility"}
DS_TRIAGE_READERS = {"classify", "probe", "triage", "runbook", "repair"}  # repair: its dry run only
PLACEHOLDERS = {'"$CKPT"': "ckpt", '"$TAG"': "ckpt", '"$DS_CONFIG"': "config"}
OPERATORS = set("();<>|&")

# python -c: the modules it may import; torch and deepspeed only for their __version__.
PY_MODULES = {"json", "sys", "zipfile", "importlib", "importlib.util", "os", "os.path"}
PY_VERSION_ONLY = {"torch", "deepspeed"}
# What of a module the code may use (a module not named here: anything but WRITERS).
PY_NAMES = {"os": {"environ", "path", "getcwd", "listdir", "stat", "sep"}, "importlib": {"util"},
            "importlib.util": {"find_spec"}, "sys": {"argv", "stdout", "stderr", "version", "version_info",
                                                    "platform", "executable", "path"}}
# Methods that write or act, on whatever object (ZipFile(p).extractall(), Path(p).unlink()); a plain
# .write() can only reach stdout or a file open() let through in a read mode.
PY_WRITERS = {"extractall", "extract", "writestr", "mkdir", "makedirs", "unlink", "remove",
              "rename", "rmdir", "chmod", "chown", "truncate", "touch", "write_text", "write_bytes",
              "system", "popen", "kill", "import_module"}
PY_FORBIDDEN_CALLS = {"exec", "eval", "compile", "__import__", "getattr", "setattr", "delattr", "globals",
                      "breakpoint", "input", "vars"}


def check(command: str) -> str | None:
    """None when `command` may run from the chat; else why not, in one line."""
    for placeholder, fact in PLACEHOLDERS.items():
        if placeholder in command:
            return f"it still has {placeholder} in it: give the {fact} first (/set {fact} PATH)"
    if "\n" in command or "\r" in command:
        return "it spans lines: the shell would run each as a command"
    for construct in ("$(", "`", "<(", ">("):
        if construct in command:
            return f"it uses {construct} (command substitution), which the chat does not run"
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError as exc:
        return f"it cannot be parsed ({exc})"
    stages: list[list[str]] = [[]]
    for token in tokens:
        if token == "|":
            stages.append([])
        elif set(token) <= OPERATORS:
            return f"it uses `{token}`: only simple commands and pipes run from the chat"
        else:
            stages[-1].append(token)
    if not all(stages):
        return "it has an empty command in its pipe"
    for argv in stages:
        why = _check_program(argv)
        if why:
            return why
    return None


def _check_program(argv: list[str]) -> str | None:
    program, args = argv[0], argv[1:]
    if program not in PROGRAMS:
        return f"`{program}` is not on the chat's list of read-only programs (ls, stat, cat, grep, find, ...)"
    if program in READER_OPTIONS:
        why = _check_options(program, args, READER_OPTIONS[program])
        if why:
            return why
    if program == "find" and FIND_ACTIONS & set(args):
        return f"find with {', '.join(sorted(FIND_ACTIONS & set(args)))} can write or run commands"
    if program == "env" and args:
        return "env with arguments runs another program; plain `env` only"
    if program == "dmesg":
        flags = {a.split("=", 1)[0] for a in args if a.startswith("-")}
        if flags - DMESG_FLAGS:
            return f"dmesg {' '.join(sorted(flags - DMESG_FLAGS))} can change the kernel log; read flags only"
    if program in ("python", "python3"):
        if len(args) < 1 or args[0] != "-c" or len(args) < 2:
            return "only `python -c CODE` runs from the chat"
        return check_python(args[1])
    if program == "ds-triage" and (not args or args[0] not in DS_TRIAGE_READERS):
        return f"only ds-triage {', '.join(sorted(DS_TRIAGE_READERS))} run from the chat"
    if program == "ds-triage" and args[0] == "repair" and "--apply" in args:
        return "repair --apply writes; /repair ACTION plans it and asks before applying"
    return None


def _check_options(program: str, args: list[str], allowed: Options) -> str | None:
    operands: list[str] = []
    words = iter(args)
    for word in words:
        if word == "--":
            operands.extend(words)
        elif word.startswith("--"):
            name, has_value = word.split("=", 1)[0], "=" in word
            if name not in allowed.long:
                return f"{program} {name} is not a read-only option of {program} (it can write or act)"
            if name in allowed.long_with_value and not has_value:
                next(words, None)
        elif word.startswith("-") and word != "-":
            for i, letter in enumerate(word[1:], 1):
                if letter not in allowed.short + allowed.short_with_value:
                    return f"{program} -{letter} is not a read-only option of {program} (it can write or act)"
                if letter in allowed.short_with_value:
                    if i == len(word) - 1:
                        next(words, None)
                    break
        else:
            operands.append(word)
    if allowed.max_operands is not None and len(operands) > allowed.max_operands:
        return f"{allowed.more_operands}; the chat runs read-only commands only"
    return None


def check_python(code: str) -> str | None:
    """None when the `python -c` code only reads: allowed imports, read-mode opens, no
    torch.load (it unpickles, and weights_only=False runs any code a checkpoint holds)."""
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return f"its python code does not parse ({exc.msg})"
    modules: dict[str, str] = {}  # local name -> module
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                if name not in PY_MODULES | PY_VERSION_ONLY:
                    return f"its python code imports {name}, which is not on the read-only list"
                if isinstance(node, ast.ImportFrom) and name in PY_VERSION_ONLY:
                    return f"its python code imports from {name}"
            if isinstance(node, ast.Import):
                for a in node.names:
                    modules[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            module = modules.get(node.value.id)
            if module in PY_VERSION_ONLY and node.attr != "__version__":
                if module == "torch" and node.attr == "load":
                    return ("it calls torch.load, which unpickles the file (weights_only=False runs any code in "
                            "it); `ds-triage probe` reads the same metadata without unpickling")
                return f"its python code uses {module}.{node.attr}; only {module}.__version__ is read"
            if module in PY_NAMES and node.attr not in PY_NAMES[module]:
                return f"its python code uses {module}.{node.attr}"
        if isinstance(node, ast.Attribute) and (node.attr in PY_WRITERS or _dunder(node.attr)):
            return f"its python code uses .{node.attr}, which can write or reach around the checks"
        if isinstance(node, ast.Name) and _dunder(node.id):
            return f"its python code uses {node.id}"
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            if name in PY_FORBIDDEN_CALLS:
                return f"its python code calls {name}()"
            if name in ("open", "ZipFile") and not _read_mode(node):
                return f"its python code calls {name}() with a mode that is not a read mode"
    return None


def _dunder(name: str) -> bool:
    return name.startswith("__") and name != "__version__"


def _read_mode(call: ast.Call) -> bool:
    mode = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mode"), None)
    if mode is None:
        return True
    return isinstance(mode, ast.Constant) and isinstance(mode.value, str) and mode.value.startswith("r") \
        and "+" not in mode.value


def run(command: str, timeout: float = TIMEOUT, cap: int = MAX_OUTPUT) -> CommandRun:
    """Run an allowed command: stdin closed, stdout and stderr together, at most `cap` bytes
    kept and `timeout` seconds spent (the whole process group is stopped then)."""
    proc = subprocess.Popen(["/bin/sh", "-c", command], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    chunks: list[bytes] = []

    def read() -> None:
        size = 0
        while size <= cap:
            chunk = proc.stdout.read1(cap + 1 - size) if hasattr(proc.stdout, "read1") else proc.stdout.read(4096)
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
