"""Rebuild triage/kb/site_history.json: which releases have each load-path raise site.

    python -m triage.kb.site_history_build [--cache DIR] [--torch-site DIR ...]

DeepSpeed: the sdist of the last release of each minor line from 0.10 to the newest
(triage.kb.api_history_build.DEEPSPEED, fetched through PyPI's simple index, sha256-checked),
unpacked into a temporary directory and read with `ast` by triage.kb.sites (never imported or run).
torch: the installed packages under each `--torch-site` directory (a venv's site-packages; default:
the release-pair venvs of the corpus generator, corpus/releases.py, and this interpreter's torch),
since a torch wheel is ~1 GB. The index keeps, per site (file, function, exception, message
template), the releases that have it; line numbers are left out (they move with every release).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import tarfile
import tempfile
from pathlib import Path

from triage.kb import site_history
from triage.kb.sites import load_path_sites, package_dir, site_key

FIRST_DEEPSPEED = (0, 10)


def deepspeed_releases() -> list[str]:
    from triage.kb.api_history_build import DEEPSPEED
    return [v for v in DEEPSPEED if tuple(int(p) for p in v.split(".")[:2]) >= FIRST_DEEPSPEED]


def deepspeed_sites(version: str, cache: Path) -> list:
    from triage.kb.api_history_build import fetch
    archive = fetch("deepspeed", version, cache, sdist=True)
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.isfile() and m.name.endswith(".py")
                   and "/deepspeed/" in m.name and ".." not in m.name]
        tar.extractall(tmp, members=members, filter="data")
        root = next(Path(tmp).glob("*/deepspeed"))
        return load_path_sites(deepspeed_dir=str(root), packages=("deepspeed",))


def torch_dirs(site_dirs: list[Path]) -> dict[str, str]:
    """torch release -> its package dir, for every site dir holding torch (and this interpreter's)."""
    found = {}
    for site in site_dirs:
        for dist in importlib.metadata.distributions(path=[str(site)]):
            if dist.metadata["Name"] == "torch" and (site / "torch").is_dir():
                found[dist.version] = str(site / "torch")
    try:
        found.setdefault(importlib.metadata.version("torch"), package_dir("torch"))
    except (importlib.metadata.PackageNotFoundError, ModuleNotFoundError):
        pass
    return found


def default_site_dirs() -> list[Path]:
    from corpus.releases import CACHE
    return sorted(CACHE.glob("*/lib/python3*/site-packages"))


def build(cache: Path, site_dirs: list[Path]) -> dict:
    cache.mkdir(parents=True, exist_ok=True)
    per_release = {"deepspeed": {v: deepspeed_sites(v, cache) for v in deepspeed_releases()}}
    per_release["torch"] = {v: load_path_sites(torch_dir=d, packages=("torch",))
                            for v, d in torch_dirs(site_dirs).items()}
    index = {"schema": site_history.SCHEMA, "packages": {}}
    for package, releases in per_release.items():
        order = sorted(releases, key=site_history.release_key)
        have: dict[tuple, set] = {}
        example: dict[tuple, object] = {}
        for version in order:
            for site in releases[version]:
                have.setdefault(site_key(site), set()).add(version)
                example[site_key(site)] = site
        sites = [site_history.entry(example[key], site_history.ranges(sorted(found, key=site_history.release_key), order))
                 for key, found in have.items()]
        sites.sort(key=lambda e: (e["file"], e["function"], e["exception"], e["message"] or "", e["code"]))
        index["packages"][package] = {"releases": order, "sites": sites}
    return index


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m triage.kb.site_history_build", description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "ds-triage" / "releases")
    parser.add_argument("--torch-site", type=Path, action="append",
                        help="a site-packages dir holding a torch release (repeatable; default: the corpus venvs)")
    args = parser.parse_args(argv)
    index = build(args.cache, args.torch_site or default_site_dirs())
    site_history.INDEX_PATH.write_text(json.dumps(index, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    counts = ", ".join(f"{p} {len(d['releases'])} releases, {len(d['sites'])} sites" for p, d in index["packages"].items())
    print(f"wrote {site_history.INDEX_PATH} ({counts})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
