"""What a load error's message says beyond its type: which file was missing, which pickled class
could not be found, how a file was cut short. Read from the message text alone, in any tool's
wording (torch, DeepSpeed, the converters, transformers, accelerate, plain `open`), so that a
pasted line decides as much as a whole log.

`facts(exceptions)` returns `triage.analysis.state_dict.Signal`s named in FACTS, each qualified
(`missing:latest`, `truncated:pickle`); rules name them in a pattern's `facts:` list.
"""

from __future__ import annotations

import re

from triage.analysis.state_dict import Signal

FACTS = {
    "missing": "a file or directory the load needed does not exist; the qualifier names which "
               "(latest, model_states, zero_model_states, optim_states, layer_file, universal, tag_dir, framework, "
               "config, other)",
    "not_a_directory": "a single file was given where a directory (a checkpoint root or tag) was expected",
    "is_a_directory": "a directory was given where a file was expected",
    "pickled_class": "unpickling named a class or module this environment does not have (another release "
                     "pickled it); the qualifier is the package",
    "truncated": "a file ends early or holds bytes no reader accepts; the qualifier says which format "
                 "(pickle, zip, safetensors, tensor)",
}

# "[Errno 2] No such file or directory: 'PATH'", DeepSpeed's "... not found: PATH", converters' "Can't find PATH"
_PATH_MISSING = re.compile(r"(?:No such file or directory|does not exist|not found|[Cc]an't find|cannot find|"
                           r"Unable to find)[^'\"/\n]{0,40}['\"]?(?P<path>/?[\w.@+~-]*(?:/[\w.@+~*-]+)+/?|latest\w*)")
# ... or the path first: zero_to_fp32's "Directory 'PATH' doesn't exist", "PATH does not exist". The
# words are found first and the path read back from them: a path pattern tried at every slash is quadratic.
_THEN_MISSING = re.compile(r" (?:doesn't|does not|did not) exist")
_NOT_DIR = re.compile(r"\[Errno 20\] Not a directory|NotADirectoryError")
_IS_DIR = re.compile(r"\[Errno 21\] Is a directory|IsADirectoryError")
# a shard's kind (triage/analysis/shard_names.py) -> the `missing:` qualifier that names it
_SHARD_KINDS = {"zero3_model": "zero_model_states", "model": "model_states", "optim": "optim_states",
                "layer": "layer_file", "expert": "model_states", "expert_optim": "optim_states"}
# (kind, basename pattern) for the rest, most specific first
_KINDS = (
    ("latest", re.compile(r"^latest(?:_universal)?$")),
    ("optim_states", re.compile(r"_optim_states\.pt$")),  # a name DeepSpeed's globs would take, not its own
    ("model_states", re.compile(r"_model_states\.pt$")),
    ("universal", re.compile(r"^(?:fp32|exp_avg|exp_avg_sq|step|optimizer_state)\.pt$")),
    ("tag_dir", re.compile(r"^global_step\d+/?$")),
    ("framework", re.compile(r"^(?:checkpoint-\d+|trainer_state\.json|optimizer\.pt|scheduler\.pt|scaler\.pt|"
                             r"rng_state(?:_\d+)?\.pth|random_states_\d+\.pkl|pytorch_model(?:\.bin|/)?|"
                             r"model\.safetensors|adapter_config\.json|adapter_model\.\w+|pytorch_model_fsdp\w*)/?$")),
    ("config", re.compile(r"^(?:ds_)?config\w*\.json$")),
)
_CLASS = re.compile(r"Can't get attribute '(?P<name>[\w.]+)' on <module '(?P<module>[\w.]+)'")
_MODULE = re.compile(r"No module named '(?P<module>[\w.]+)'")
_UNPICKLING_FRAMES = ("serialization.py", "pickle.py", "_weights_only_unpickler.py")
_TRUNCATED = (
    ("pickle", re.compile(r"^(?:Ran out of input)?$|pickle data was truncated|invalid load key|"
                          r"unpickling stack underflow|could not find MARK")),
    ("zip", re.compile(r"PytorchStreamReader failed|failed finding central directory|"
                       r"file in archive is not in a subdirectory|not a zip file|File is not a zip file")),
    ("safetensors", re.compile(r"HeaderTooLarge|InvalidHeader|MetadataIncompleteBuffer|incomplete metadata|"
                               r"Error while deserializing header")),
    ("tensor", re.compile(r"negative dimension|storage has wrong byte size|size of storage|"
                          r"Trying to resize storage that is not resizable")),
)
_EOF_TYPES = ("EOFError", "UnpicklingError", "BadZipFile", "SafetensorError")


def facts(exceptions) -> list[Signal]:
    """The facts each raised exception's message holds (each fact once, first seen first)."""
    found: dict[tuple[str, str | None], Signal] = {}
    for exc in exceptions:
        for signal in _of(exc):
            found.setdefault((signal.name, signal.qualifier), signal)
    return list(found.values())


def _of(exc) -> list[Signal]:
    text, short = exc.message or "", exc.type.rsplit(".", 1)[-1]
    out = []
    whole = f"{exc.type}: {text}"
    if _NOT_DIR.search(whole):
        out.append(Signal("not_a_directory", f"{short}: a file where a directory was expected", {}, "file"))
    elif _IS_DIR.search(whole):
        out.append(Signal("is_a_directory", f"{short}: a directory where a file was expected", {}, "directory"))
    elif short in ("FileNotFoundError", "OSError", "ValueError", "RuntimeError", "AssertionError", "Exception") \
            or "No such file" in text:
        match = _PATH_MISSING.search(text)
        path = match["path"] if match else _path_before(text)
        if path:
            kind, detail = which_file(path)
            out.append(Signal("missing", f"the missing path is {kind.replace('_', ' ')}: {path}",
                              {"path": path, **detail}, kind))
    match = _CLASS.search(text)
    if match:
        out.append(_class_fact(match["module"], match["name"]))
    elif short == "ModuleNotFoundError" and any(f.file.endswith(_UNPICKLING_FRAMES) for f in exc.frames):
        module = _MODULE.search(text)
        if module:
            out.append(_class_fact(module["module"], None))
    if short in _EOF_TYPES or any(p.search(text) for _, p in _TRUNCATED[1:]):
        for form, pattern in _TRUNCATED:
            if pattern.search(text) and (form != "pickle" or short in _EOF_TYPES):
                out.append(Signal("truncated", f"{short}{': ' + text[:120] if text else ''}: a {form} cut short "
                                  "or damaged", {"form": form}, form))
                break
    return out


def _path_before(text: str) -> str | None:
    """The path that ends just before "does not exist", quoted or not."""
    for match in _THEN_MISSING.finditer(text):
        words = text[max(0, match.start() - 4096):match.start()].split()
        path = words[-1].strip("'\"") if words else ""
        if path.startswith("/"):
            return path
    return None


def which_file(path: str) -> tuple[str, dict]:
    """The kind of checkpoint file a path names (FACTS["missing"]), and its rank where it has one."""
    from triage.analysis.shard_names import match_name

    base = path.rstrip("/").rsplit("/", 1)[-1] + ("/" if path.endswith("/") else "")
    shard = match_name(base)
    if shard is not None:
        kind, numbers = shard
        return _SHARD_KINDS[kind], ({"rank": int(numbers["dp"])} if kind == "optim" else {})
    for kind, pattern in _KINDS:
        if pattern.search(base):
            return kind, {}
    if "/zero/" in path:
        return "universal", {}
    return "other", {}


def _class_fact(module: str, name: str | None) -> Signal:
    package = module.split(".")[0]
    what = f"{module}.{name}" if name else module
    return Signal("pickled_class", f"the pickle names {what}, which this environment's {package} lacks",
                  {"module": module, "name": name, "package": package}, package)
