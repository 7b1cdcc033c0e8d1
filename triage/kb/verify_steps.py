"""A rule's verify commands as every renderer shows them: the safe ones first, and those that run the
checkpoint's pickled code (`runs_checkpoint_code: true`, torch.load(weights_only=False)) last, with
a warning in what they show. `checkpoint_tool` tells `rules lint` which commands would run a program
that takes its orders from the checkpoint's directory (a git alias, a Makefile, a script)."""

from __future__ import annotations

import re
import shlex

WARNING = "WARNING: runs the file's pickled code: only on a checkpoint you trust"


def ordered(steps: list[dict]) -> list[dict]:
    """The steps, safe ones first (stable: the rule's order within each group), `shows` warned."""
    return [dict(step, shows=shows(step)) for step in sorted(steps, key=runs_code)]


def runs_code(step: dict) -> bool:
    return bool(step.get("runs_checkpoint_code"))


def shows(step: dict) -> str:
    return f"{step['shows']} ({WARNING})" if runs_code(step) else step["shows"]


# Programs that read hooks, aliases, scripts or settings from the directory they work on: git
# (aliases, hooks, core.fsmonitor, filters, pager in .git/config), make, package managers
# (package.json scripts, setup.py, conftest.py), direnv (.envrc). Pointed at a checkpoint, they run
# what whoever wrote the checkpoint put there.
_DIRECTORY_CONFIGURED = {
    "git", "make", "gmake", "cmake", "npm", "npx", "yarn", "pnpm", "direnv", "cargo", "mvn", "gradle", "tox",
    "nox", "pytest", "pre-commit", "just", "rake", "bundle", "pip", "pip3", "uv", "poetry", "pipenv", "conda",
}
# Their first operand is a program they run (`python CKPT/zero_to_fp32.py`, `bash CKPT/x.sh`).
_INTERPRETER = re.compile(r"(?:python|pypy|perl|ruby|node|bash|sh|dash|zsh|ksh|fish|php|lua|torchrun|deepspeed)"
                          r"[\d.]*")
_SHELL = re.compile(r"(?:ba|da|z|k)?sh")
_INLINE = {"-c", "-e", "-E"}  # inline code: what follows is data, not a program to run
_WRAPPERS = {"env", "sudo", "nice", "nohup", "time", "command", "exec", "xargs", "timeout", "stdbuf", "setsid"}
# Options that take the next word as their value (sudo -u USER, xargs -I {}, nice -n 5, python -W ignore).
_VALUED = {"-u", "-g", "-n", "-s", "-k", "-o", "-e", "-i", "-I", "-P", "-L", "-d", "-W", "-X"}
_SCRIPT = re.compile(r"\.(?:py|sh|bash|pl|rb|js|mjs|php|lua)$")
_SEPARATORS = {"do", "then", "else", "elif", "!", "{", "}", "if", "while", "until"}
_ASSIGNMENT = re.compile(r"[A-Za-z_]\w*=|\d+[smhd]?$")  # VAR=value, a timeout's duration
_CKPT = "{ckpt}"


def checkpoint_tool(command: str) -> str | None:
    """What in a verify command template would run a program the checkpoint controls, else None."""
    lexer = shlex.shlex(command.replace("`", " ; "), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError as exc:  # unbalanced quotes: the shell would not read it as we do
        return f"cannot be read as a shell command ({exc})"
    words: list[str] = []
    redirect = False
    for token in tokens + [";"]:
        if redirect:
            redirect = False
        elif any(c in token for c in "<>") and not token.strip("<>&|;()"):
            redirect = True  # `> FILE`: FILE is not a program
        elif token in _SEPARATORS or not token.strip("&|;()"):
            found = _simple(words)
            if found:
                return found
            words = []
        else:
            words.append(token)
    return None


def _simple(words: list[str]) -> str | None:
    """One simple command (no pipes or lists), its words as the shell splits them."""
    while words and (words[0] in _WRAPPERS or _ASSIGNMENT.match(words[0])):
        words = words[1:]
        while words and (words[0].startswith("-") or _ASSIGNMENT.match(words[0])):
            words = words[2:] if words[0] in _VALUED and len(words) > 1 else words[1:]
    if not words or words[0] in ("for", "case", "done", "fi", "esac"):
        return None
    program, args = words[0], words[1:]
    name = program.rsplit("/", 1)[-1]
    on_checkpoint = any(_CKPT in arg for arg in args)
    if _CKPT in program:
        return f"runs {program}, a file of the checkpoint"
    if name in ("source", ".", "cd", "pushd") and on_checkpoint:
        return f"runs `{name}` into the checkpoint, whose files (an .envrc, a python module) then run"
    if name in _DIRECTORY_CONFIGURED and on_checkpoint:
        return f"runs `{name}` on the checkpoint's directory, whose own settings (hooks, aliases, scripts) it obeys"
    if name == "find":
        return _find_exec(args)
    if _INTERPRETER.fullmatch(name):
        return _interpreter(name, args)
    return None


def _interpreter(name: str, args: list[str]) -> str | None:
    """The program an interpreter or launcher runs: its first operand, or any script of the
    checkpoint before inline code (`torchrun --nproc_per_node 2 CKPT/train.py`)."""
    first, value = True, False
    for index, arg in enumerate(args):
        if arg in _INLINE:
            code = args[index + 1] if index + 1 < len(args) else ""
            return checkpoint_tool(code) if _SHELL.fullmatch(name) else None
        if arg == "-m" and index + 1 < len(args):  # python -m pip install -e CKPT: the module is the program
            return _simple(args[index + 1:])
        option = value or arg.startswith("-")
        if _CKPT in arg and (first and not option or _SCRIPT.search(arg)):
            return f"runs {arg}, a program of the checkpoint, with {name}"
        first, value = first and option, arg in _VALUED
    return None


def _find_exec(args: list[str]) -> str | None:
    """`find CKPT -exec PROGRAM ... ;`: PROGRAM runs; `{}` there is a file the walk found."""
    for index, arg in enumerate(args):
        if arg in ("-exec", "-execdir", "-ok", "-okdir") and index + 1 < len(args):
            executed = args[index + 1:]
            if executed[0] in ("{}", "{{}}") and any(_CKPT in a for a in args[:index]):
                return "`find -exec {}` runs the files it finds in the checkpoint"
            return _simple(executed)
    return None
