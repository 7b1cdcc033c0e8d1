"""Rebuild triage/kb/site_history.json: which releases have each load-path failure site.

    python -m triage.kb.site_history_build [--cache DIR] [--mirrors DIR] [--only PACKAGE ...]

DeepSpeed: the sdist of the last release of each minor line from 0.3 to the newest
(triage.kb.api_history_build.DEEPSPEED); torch: its wheels of TORCH and this interpreter's torch;
the PyPI projects of triage.kb.projects.PYPI: their wheels. All fetched through PyPI's simple index,
sha256-checked, and only the scoped files unpacked into a temporary directory, read with `ast` by
triage.kb.sites (never imported or run). The repositories of triage.kb.projects.REPOSITORIES: one
snapshot each, read from a bare git directory under --mirrors (`<owner>+<name>/repo`, as the
search tool's `fetch` leaves it) with `git show`. The index keeps, per site (file, function,
exception, message template; the source line only for a site without a message), the releases that
have it; line numbers are left out (they move with every release). `--only` rebuilds the packages
named and keeps the others as they are.
"""

from __future__ import annotations

import argparse
import fnmatch
import importlib.metadata
import json
import subprocess
import tarfile
import tempfile
import zipfile
from pathlib import Path

from triage.kb import site_history
from triage.kb.projects import DEEPSPEED_INFERENCE, DEEPSPEED_LEGACY, PYPI, PYPI_NAMES, REPOSITORIES
from triage.kb.sites import SCOPES, load_path_sites, package_dir, scan, site_key

FIRST_DEEPSPEED = (0, 3)
TORCH = ("2.5.1", "2.6.0")  # the corpus's older release pairs; the installed torch is read too
DEEPSPEED_SCOPES = tuple(s for s in SCOPES if s[0] == "deepspeed") + DEEPSPEED_INFERENCE + DEEPSPEED_LEGACY
TORCH_SCOPES = tuple(s for s in SCOPES if s[0] == "torch")


def deepspeed_releases() -> list[str]:
    from triage.kb.api_history_build import DEEPSPEED
    return [v for v in DEEPSPEED if tuple(int(p) for p in v.split(".")[:2]) >= FIRST_DEEPSPEED]


def _wanted(rel: str, package: str, scopes) -> bool:
    return any(p == package and fnmatch.fnmatch(rel, glob) and rel.count("/") == glob.count("/")
               for p, glob, _ in scopes)


def archive_sites(project: str, version: str, cache: Path, scopes, sdist: bool) -> list:
    """The sites of one release's archive: only the scoped files of the package are unpacked."""
    from triage.kb.api_history_build import fetch
    archive = fetch(project, version, cache, sdist=sdist)
    package = scopes[0][0]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / package
        for rel, read in _members(archive, package):
            if _wanted(rel, package, scopes):
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_bytes(read())
        return scan({package: str(root)}, scopes)


def _members(archive: Path, package: str):
    """(path under the package, reader) of each .py file of `package` in a wheel or an sdist."""
    def rel(name: str) -> str | None:
        parts = name.split("/")
        if package not in parts or not name.endswith(".py") or ".." in parts:
            return None
        return "/".join(parts[parts.index(package) + 1:])

    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as z:
            for name in z.namelist():
                if rel(name):
                    yield rel(name), lambda name=name: z.read(name)
    else:
        with tarfile.open(archive) as t:
            for member in t.getmembers():
                if member.isfile() and rel(member.name):
                    yield rel(member.name), lambda member=member: t.extractfile(member).read()


def repository_sites(project: str, gitdir: Path) -> tuple[str, list]:
    """(snapshot name, sites) of a repository's HEAD, read with git (no work tree, nothing run)."""
    _, scopes = REPOSITORIES[project]
    git = ["git", "-C", str(gitdir)]
    stamp = subprocess.run(git + ["log", "-1", "--format=%cs %h", "HEAD"], capture_output=True, text=True,
                           check=True).stdout.split()
    names = subprocess.run(git + ["ls-tree", "-r", "--name-only", "HEAD"], capture_output=True, text=True,
                           check=True).stdout.splitlines()
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            if name.endswith(".py") and _wanted(name, project, scopes):
                data = subprocess.run(git + ["show", f"HEAD:{name}"], capture_output=True, check=True).stdout
                (Path(tmp) / name).parent.mkdir(parents=True, exist_ok=True)
                (Path(tmp) / name).write_bytes(data)
        return f"{stamp[0]} {stamp[1]}", scan({project: tmp}, scopes)


def installed_torch() -> tuple[str, list] | None:
    try:
        return importlib.metadata.version("torch"), load_path_sites(torch_dir=package_dir("torch"), packages=("torch",))
    except (importlib.metadata.PackageNotFoundError, ModuleNotFoundError):
        return None


def read_package(package: str, cache: Path, mirrors: Path) -> dict[str, list] | None:
    """release -> sites, for one package; None when its source cannot be had here."""
    if package == "deepspeed":
        return {v: archive_sites("deepspeed", v, cache, DEEPSPEED_SCOPES, True) for v in deepspeed_releases()}
    if package == "torch":
        found = {v: archive_sites("torch", v, cache, TORCH_SCOPES, False) for v in TORCH}
        installed = installed_torch()
        if installed:
            found[installed[0]] = installed[1]
        return found
    if package in PYPI:
        releases, scopes = PYPI[package]
        return {v: archive_sites(PYPI_NAMES.get(package, package), v, cache, scopes, False) for v in releases}
    gitdir = mirrors / REPOSITORIES[package][0].replace("/", "+") / "repo"
    if not gitdir.is_dir():
        return None
    snapshot, sites = repository_sites(package, gitdir)
    return {snapshot: sites}


def package_index(releases: dict[str, list]) -> dict:
    order = sorted(releases, key=site_history.release_key)
    have: dict[tuple, set] = {}
    example: dict[tuple, object] = {}
    for version in order:
        for site in releases[version]:
            have.setdefault(site_key(site), set()).add(version)
            example[site_key(site)] = site
    sites = [site_history.entry(example[key], site_history.ranges(sorted(found, key=site_history.release_key), order))
             for key, found in have.items()]
    sites.sort(key=lambda e: (e["file"], e["function"], e["exception"], e["message"] or "", e.get("code", "")))
    return {"releases": order, "sites": sites}


PACKAGES = ("deepspeed", "torch", *PYPI, *REPOSITORIES)


def build(cache: Path, mirrors: Path, only: tuple[str, ...] = PACKAGES, previous: dict | None = None) -> dict:
    cache.mkdir(parents=True, exist_ok=True)
    kept = (previous or {}).get("packages", {})
    index = {"schema": site_history.SCHEMA, "packages": {}}
    for package in PACKAGES:
        releases = read_package(package, cache, mirrors) if package in only else None
        if releases:
            index["packages"][package] = package_index(releases)
        elif package in kept:
            index["packages"][package] = kept[package]
    return index


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m triage.kb.site_history_build", description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "ds-triage" / "releases")
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"),
                        help="the directory holding <owner>+<name>/repo bare git snapshots of the repositories")
    parser.add_argument("--only", nargs="+", choices=PACKAGES, default=PACKAGES,
                        help="rebuild these packages only; the others are kept from the index as it is")
    args = parser.parse_args(argv)
    index = build(args.cache, args.mirrors, tuple(args.only), site_history.load())
    site_history.INDEX_PATH.write_text(site_history.render(index), encoding="utf-8")
    counts = ", ".join(f"{p} {len(d['releases'])} releases, {len(d['sites'])} sites" for p, d in index["packages"].items())
    print(f"wrote {site_history.INDEX_PATH} ({counts})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
