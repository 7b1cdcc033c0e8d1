"""The healthy corpus checkpoints the test suite cannot make, committed: `corpus/checkpoints/`.

A healthy case's checkpoint is its layout's baseline (with the case's own steps applied). The suite
trains the baselines of this release's direct DeepSpeed layouts, but not those saved through a
framework (transformers, accelerate, TRL and PEFT are not installed in CI: the `frameworks` extra)
or by an older DeepSpeed / torch pair (multi-GB CUDA venvs, corpus/releases.py). Those baselines are
packed here once, from the generator's --keep dir, one deterministic tar.xz each, so that every
healthy corpus checkpoint is triaged by the suite and none may be flagged:

    python -m corpus.generate --only "$(python -m corpus.kept --ids)" --keep /tmp/ds-triage-corpus
    python -m corpus.kept --keep /tmp/ds-triage-corpus      # re-pack corpus/checkpoints/
(corpus/NOTES.md has the venvs each needs).
"""
from __future__ import annotations

import argparse
import io
import lzma
import re
import sys
import tarfile
from pathlib import Path

from triage.kb.source import load_yaml

CORPUS = Path(__file__).resolve().parent
ARCHIVES = CORPUS / "checkpoints"
# Beyond the healthy cases' baselines, those of the older pairs' commonest failing loads (ZeRO-2 on one
# rank, ZeRO-3 on two): the checkpoint gate triages those loads on their checkpoints too.
FAILING_LAYOUTS = ("z2-dp1-fp32", "z3-dp2-fp32")
# the paths a case's command gives its job: a converter's input; the dir it loads or saves to (a quote
# closing a `bash -c '...'` command line is not part of it)
_CONVERTER_PATH = re.compile(r"(?:--input_folder|zero_to_fp32(?:\.py)?)\s+([^\s'\"]+)")
_LOAD_PATH = re.compile(r"(?:--load-dir|--save-dir)\s+([^\s'\"]+)")


def _entry(case_id: str) -> dict:
    from corpus.scenarios import SCENARIOS

    return next(s for s in SCENARIOS if s["id"] == case_id.split("@")[0])


def pair_of(case_id: str) -> str | None:
    return case_id.split("@")[1] if "@" in case_id else None


def committed_cases(manifest: list[dict] | None = None, kinds=("clean",)) -> list[dict]:
    """The manifest cases of `kinds` whose checkpoint comes from an archive here: a framework layout's
    or an older release pair's, made with no step of the job's own venv (a conversion before the load)."""
    from corpus.layouts import LAYOUTS

    if manifest is None:
        manifest = load_yaml((CORPUS / "manifest.yaml").read_text())
    cases = []
    for case in manifest:
        entry = _entry(case["id"])
        layout = entry.get("layout")
        if case["kind"] in kinds and layout and not entry.get("pre") and \
                (pair_of(case["id"]) or LAYOUTS[layout].get("framework")):
            cases.append(case)
    return cases


def archive_of(case_id: str) -> Path:
    """corpus/checkpoints/[<pair>/]<layout>.tar.xz: the baseline a case copies."""
    pair = pair_of(case_id)
    return ARCHIVES.joinpath(*([pair] if pair else []), f"{_entry(case_id)['layout']}.tar.xz")


def unpack(case: dict, dest: Path) -> Path:
    """The case's checkpoint made in `dest` (which must not exist): its baseline unpacked, its fault
    steps applied. Returns its root (the generator's kept dir of the case)."""
    from corpus import faults
    from corpus.layouts import LAYOUTS

    entry = _entry(case["id"])
    if entry.get("pre"):  # a conversion before the load needs the job's venv: not made from an archive
        raise ValueError(f"{case['id']}: its steps before the load cannot run from an archive")
    dest.mkdir(parents=True)
    with tarfile.open(archive_of(case["id"]), "r:xz") as tar:
        tar.extractall(dest, filter="data")  # no member may leave dest, nor be a device or a link out
    root = dest / entry["layout"]
    if entry.get("inject"):
        faults.apply(str(root / LAYOUTS[entry["layout"]].get("sub", "")), entry["inject"])
    return root


def given(case: dict, root: Path, loaded: bool = False) -> Path:
    """What on-call passes as --ckpt, as triage.eval.checkpoints.checkpoint_of picks it from the case's
    command: the converter's input, or with `loaded` the dir the load was given (a Trainer's output
    dir, a PEFT adapter dir), else the root."""
    m = _CONVERTER_PATH.search(case["command"]) or (_LOAD_PATH.search(case["command"]) if loaded else None)
    if not m:
        return root
    if loaded and _entry(case["id"]).get("load_dir") == "..":  # the dir above the checkpoint, as the job had it
        return root.parent
    parts = Path(m.group(1)).parts
    for anchor in (case["id"].split("@")[0], "_base"):
        if anchor in parts:
            below = parts[parts.index(anchor) + (2 if anchor == "_base" else 1):]
            return root.joinpath(*below)
    raise ValueError(f"{case['id']}: no checkpoint root in its command path {m.group(1)}")


def needed() -> dict[Path, str]:
    """archive -> a case id it serves: every healthy committed case's baseline, and FAILING_LAYOUTS'
    for each older pair's failing loads."""
    cases = committed_cases() + [c for c in committed_cases(kinds=("failure", "silent"))
                                 if pair_of(c["id"]) and _entry(c["id"])["layout"] in FAILING_LAYOUTS]
    return {archive_of(c["id"]): c["id"] for c in sorted(cases, key=lambda c: c["id"])}


def pack(keep: Path, out: Path = ARCHIVES) -> list[Path]:
    """Every archive needed(), from the generator's --keep dir (`_base/<layout>` and
    `<pair>/_base/<layout>`). Deterministic: sorted members, no times or owners, so an unchanged
    baseline packs to the same bytes."""
    written = []
    for archive, case_id in sorted(needed().items()):
        target = out / archive.relative_to(ARCHIVES)
        pair, layout = pair_of(case_id), _entry(case_id)["layout"]
        source = keep.joinpath(*([pair] if pair else []), "_base", layout)
        if not source.is_dir():
            raise SystemExit(f"{source}: no baseline kept for {case_id} (run the generator with --keep {keep})")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(_tar_xz(source, layout))
        written.append(target)
    return written


def _tar_xz(source: Path, name: str) -> bytes:
    def clean(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
        info.mode = 0o755 if info.isdir() else 0o644
        return info

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.add(source, arcname=name, recursive=False, filter=clean)
        for path in sorted(source.rglob("*")):
            tar.add(path, arcname=f"{name}/{path.relative_to(source)}", recursive=False, filter=clean)
    return lzma.compress(buffer.getvalue(), preset=9)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m corpus.kept", description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="the generator's --keep dir")
    parser.add_argument("--out", type=Path, default=ARCHIVES, help="where the archives go")
    parser.add_argument("--ids", nargs="?", const="", metavar="PAIR",
                        help="print the scenario ids to generate (for --only): the framework cases', or a pair's")
    args = parser.parse_args(argv)
    if args.ids is not None:
        ids = [c["id"] for c in committed_cases()] + list(needed().values())  # one case per archive builds it
        print(",".join(sorted({i.split("@")[0] for i in ids if (pair_of(i) or "") == args.ids})))
        return 0
    if args.keep is None:
        parser.error("--keep is required to pack")
    for path in pack(args.keep, args.out):
        print(f"{path}: {path.stat().st_size / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
