"""Rebuild triage/kb/api_history.json from the real releases on PyPI.

    python -m triage.kb.api_history_build [--cache DIR]

Downloads one release per minor line of DeepSpeed (and a few of accelerate and
transformers) through PyPI's simple index, and reads them with `ast` only: the
downloaded code is never imported or run (an sdist's setup.py needs torch and
executes arbitrary code, which is why this does not go through `pip download`).
The index keeps names and version ranges only; see corpus/NOTES.md.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import io
import json
import tarfile
import urllib.request
import warnings
import zipfile
from pathlib import Path

INDEX_PATH = Path(__file__).with_name("api_history.json")
SIMPLE = "https://pypi.org/simple/{project}/"

# The last release of each minor line, 0.3 to the newest.
DEEPSPEED = ("0.3.16", "0.4.5", "0.5.10", "0.6.7", "0.7.7", "0.8.3", "0.9.5", "0.10.3", "0.11.2",
             "0.12.6", "0.13.5", "0.14.5", "0.15.4", "0.16.9", "0.17.6", "0.18.9", "0.19.8")
# Framework releases spanning the last ~3 years: where they call into DeepSpeed.
CALLERS = {
    "accelerate": ("0.20.3", "0.27.2", "0.34.2", "1.5.2", "1.10.1", "1.16.0"),
    "transformers": ("4.30.2", "4.40.2", "4.46.3", "4.57.6", "5.25.0"),
}
CLASSES = ("DeepSpeedEngine", "PipelineEngine", "DeepSpeedZeroOptimizer",
           "DeepSpeedZeroOptimizer_Stage3", "DeepSpeedZeroOptimizer_Stage1")
# Packages whose module-level names frameworks and users import.
NAMED_PACKAGES = ("deepspeed.checkpoint", "deepspeed.utils", "deepspeed.runtime")
KEYWORD_METHODS = ("load_checkpoint", "save_checkpoint")


# -- fetching ---------------------------------------------------------------

def fetch(project: str, version: str, cache: Path, *, sdist: bool) -> Path:
    """The release file (sdist or wheel), checked against the index's sha256."""
    request = urllib.request.Request(SIMPLE.format(project=project),
                                     headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        files = json.load(response)["files"]
    wanted = [f for f in files if _release_of(f["filename"], project) == version
              and (f["filename"].endswith(".tar.gz") if sdist else f["filename"].endswith(".whl"))]
    wanted = wanted or [f for f in files if _release_of(f["filename"], project) == version]
    if not wanted:
        raise SystemExit(f"no file for {project}=={version} on PyPI")
    entry = wanted[0]
    target = cache / entry["filename"]
    if not target.exists():
        with urllib.request.urlopen(entry["url"], timeout=300) as response:
            data = response.read()
        if hashlib.sha256(data).hexdigest() != entry["hashes"]["sha256"]:
            raise SystemExit(f"sha256 mismatch for {entry['filename']}")
        target.write_bytes(data)
    return target


def _release_of(filename: str, project: str) -> str | None:
    stem = filename.removesuffix(".tar.gz").removesuffix(".zip")
    if filename.endswith(".whl"):
        stem = filename.split("-")[0] + "-" + filename.split("-")[1]
    name, _, version = stem.rpartition("-")
    return version if name.replace("_", "-").lower() == project else None


def python_sources(archive: Path, package: str) -> dict[str, str]:
    """Module name -> source, for the .py files of `package` inside the archive."""
    sources: dict[str, str] = {}

    def add(member: str, read) -> None:
        parts = member.split("/")
        if package in parts and member.endswith(".py"):
            rel = parts[parts.index(package):]
            module = ".".join(rel).removesuffix(".py").removesuffix(".__init__")
            sources.setdefault(module, read().decode("utf-8", "replace"))

    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as z:
            for name in z.namelist():
                add(name, lambda name=name: z.read(name))
    else:
        with tarfile.open(archive) as t:
            for member in t.getmembers():
                if member.isfile():
                    add(member.name, lambda member=member: t.extractfile(member).read())
    return sources


# -- reading one release ----------------------------------------------------

def _parse(source: str) -> ast.Module | None:
    with warnings.catch_warnings():  # old releases' "\d" escapes: their problem, not ours
        warnings.simplefilter("ignore")
        try:
            return ast.parse(source)
        except SyntaxError:
            return None


def deepspeed_names(sources: dict[str, str]) -> dict:
    """What one DeepSpeed release defines: class members, module names, keywords."""
    classes: dict[str, set[str]] = {}
    bases: dict[str, list[str]] = {}
    modules: dict[str, set[str]] = {}
    keywords: dict[str, set[str]] = {}
    for module, source in sources.items():
        if (tree := _parse(source)) is None:
            continue
        if module == "deepspeed" or module.startswith(NAMED_PACKAGES) or module.startswith("deepspeed.checkpoint"):
            modules[module] = _module_names(tree.body)
        else:
            modules.setdefault(module, set())  # existence only
        for node in ast.walk(tree):
            # Before 0.5 the ZeRO optimizers were FP16_DeepSpeedZeroOptimizer[_Stage1|_Stage3].
            owner = node.name.removeprefix("FP16_") if isinstance(node, ast.ClassDef) else None
            if owner in CLASSES or (owner and module.startswith("deepspeed.checkpoint")):
                classes.setdefault(owner, set()).update(_class_members(node))
                bases[owner] = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
                if owner == "DeepSpeedEngine":
                    for item in node.body:
                        if isinstance(item, ast.FunctionDef) and item.name in KEYWORD_METHODS:
                            keywords[item.name] = _parameters(item)
    for owner in classes:  # a subclass answers for its tracked bases' members
        for base in bases.get(owner, []):
            if base in classes and base != owner:
                classes[owner] |= classes[base]
    return {"classes": classes, "modules": modules, "keywords": keywords}


def _module_names(body: list[ast.stmt]) -> set[str]:
    names: set[str] = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}
        elif isinstance(node, (ast.If, ast.Try)):  # guarded imports and definitions
            for block in (node.body, node.orelse, getattr(node, "finalbody", []),
                          *[h.body for h in getattr(node, "handlers", [])]):
                names |= _module_names(block)
    return names


def _class_members(node: ast.ClassDef) -> set[str]:
    members: set[str] = set()
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            members.add(item.name)
        elif isinstance(item, (ast.Assign, ast.AnnAssign)):
            targets = item.targets if isinstance(item, ast.Assign) else [item.target]
            members |= {t.id for t in targets if isinstance(t, ast.Name)}
    for sub in ast.walk(node):  # attributes set on self anywhere in the class
        if (isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store)
                and isinstance(sub.value, ast.Name) and sub.value.id == "self"):
            members.add(sub.attr)
    return members


def _parameters(func: ast.FunctionDef) -> set[str]:
    args = func.args
    return {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs) if a.arg != "self"}


def caller_names(sources: dict[str, str]) -> dict:
    """Where a framework calls into DeepSpeed: keywords it passes, names it imports."""
    keywords: dict[str, set[str]] = {m: set() for m in KEYWORD_METHODS}
    imports: set[str] = set()
    for source in sources.values():
        if "deepspeed" not in source:
            continue
        if (tree := _parse(source)) is None:
            continue
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in KEYWORD_METHODS):
                keywords[node.func.attr] |= {k.arg for k in node.keywords if k.arg}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("deepspeed"):
                imports |= {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                imports |= {a.name for a in node.names if a.name.startswith("deepspeed.")}
    return {"keywords": keywords, "imports": imports}


# -- the index --------------------------------------------------------------

class Ranges:
    """name -> [first, last] release index, grown one release at a time."""

    def __init__(self):
        self.table: dict[str, list[int]] = {}

    def add(self, names, release: int) -> None:
        for name in names:
            self.table.setdefault(name, [release, release])[1] = release

    def to_json(self) -> dict:
        return {name: self.table[name] for name in sorted(self.table)}


def build_deepspeed(per_release: list[dict]) -> dict:
    classes: dict[str, Ranges] = {}
    modules = Ranges()
    module_names: dict[str, Ranges] = {}
    keywords: dict[str, Ranges] = {}
    for i, names in enumerate(per_release):
        for owner, members in names["classes"].items():
            classes.setdefault(owner, Ranges()).add(members, i)
        modules.add(names["modules"], i)
        for module, defined in names["modules"].items():
            if defined:
                module_names.setdefault(module, Ranges()).add(defined, i)
        for method, params in names["keywords"].items():
            keywords.setdefault(method, Ranges()).add(params, i)
    return {
        "classes": {k: v.to_json() for k, v in sorted(classes.items())},
        "modules": modules.to_json(),
        "module_names": {k: v.to_json() for k, v in sorted(module_names.items())},
        "keywords": {k: v.to_json() for k, v in sorted(keywords.items())},
    }


def build_callers(per_release: list[dict]) -> dict:
    keywords: dict[str, Ranges] = {m: Ranges() for m in KEYWORD_METHODS}
    imports = Ranges()
    for i, names in enumerate(per_release):
        for method, passed in names["keywords"].items():
            keywords[method].add(passed, i)
        imports.add(names["imports"], i)
    return {"keywords": {k: v.to_json() for k, v in keywords.items()}, "imports": imports.to_json()}


def build(cache: Path) -> dict:
    cache.mkdir(parents=True, exist_ok=True)
    deepspeed = [deepspeed_names(python_sources(fetch("deepspeed", v, cache, sdist=True), "deepspeed"))
                 for v in DEEPSPEED]
    index = {
        "about": "Names and first/last release (indexes into `releases`) of DeepSpeed's API; "
                 "rebuilt by `python -m triage.kb.api_history_build`.",
        "deepspeed": {"releases": list(DEEPSPEED), **build_deepspeed(deepspeed)},
        "callers": {},
    }
    for project, versions in CALLERS.items():
        package = project.replace("-", "_")
        per_release = [caller_names(python_sources(fetch(project, v, cache, sdist=False), package))
                       for v in versions]
        index["callers"][project] = {"releases": list(versions), **build_callers(per_release)}
    return index


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "ds-triage" / "releases")
    parser.add_argument("--out", type=Path, default=INDEX_PATH)
    args = parser.parse_args(argv)
    try:
        index = build(args.cache)
    except OSError as error:  # urllib's URLError included: no registry, no index
        raise SystemExit(f"api_history_build: cannot fetch the releases from PyPI: {error}") from None
    args.out.write_text(json.dumps(index, separators=(",", ":"), sort_keys=True) + "\n")
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
