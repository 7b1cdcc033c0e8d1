"""`ds-triage verify CKPT`: a gate after each save: exit 0 healthy, 1 a problem."""

from __future__ import annotations

import sys

from triage.cli.output import add_progress_options, emit
from triage.cli.probe import add_release_options
from triage.errors import EXIT_PROBE_CLEAN, EXIT_PROBE_FOUND, BadInput
from triage.runbook.links import page_ref


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "verify", help="gate a saved checkpoint: probes + its manifest (exit 0 healthy, 1 not)",
        description="Check a checkpoint after a save: every probe (read-only), then the tag's manifest "
        "(<tag>/ds-triage-manifest.json, written by `ds-triage manifest`) when there is one: each file's size and "
        "sha256. Exit 0 when healthy, 1 when a probe or the manifest found a problem, 3 when the checkpoint or "
        "--manifest cannot be read.",
        epilog=f"JSON: {page_ref('reference/verify')}")
    parser.add_argument("ckpt", metavar="CKPT", help="checkpoint root (verifies `latest`'s tag) or a tag dir")
    parser.add_argument("--manifest", metavar="FILE", help="the manifest to check against (default: the tag's own)")
    parser.add_argument("--sizes-only", action="store_true", help="compare file sizes, not checksums (fast)")
    parser.add_argument("--deep", action="store_true",
                        help="also read every byte once: every zip record's CRC-32, and the consistency probe (shards "
                        "exchanged between ranks or mixed from different saves, which DeepSpeed loads without a word)")
    parser.add_argument("--load-dir", metavar="DIR", help="the dir the job passes to load_checkpoint / --load: one "
                        "level off (a tag dir, a Trainer output dir, the root's parent) fails, as DeepSpeed silently "
                        "returns (None, None) from it")
    parser.add_argument("--model", metavar="FILE", help="the model the job builds (a JSON/YAML of parameter names to "
                        "shapes, a state-dict file or a .safetensors file): names or shapes that differ fail, as a "
                        "load with strict=False takes them without a word")
    add_release_options(parser)
    parser.add_argument("--json", action="store_true", help="print the JSON report")
    parser.add_argument("--junit", metavar="FILE", help="also write the result as JUnit XML (a testcase per probe, "
                        "the manifest and the trust walk) for a CI system's test view")
    add_progress_options(parser)
    parser.set_defaults(run=run)


def render(report) -> str:
    from triage.probe.result import CONFIRMED, INCONCLUSIVE

    ckpt = report.probe.ctx.ckpt
    out = [f"checkpoint: {ckpt.root or ckpt.given}" + (f"  tag: {ckpt.tag} (from {ckpt.tag_source})" if ckpt.tag else "")]
    results = report.probe.results.values()
    undecided = [r.name for r in results if r.status == INCONCLUSIVE]
    found = [r for r in results if r.status == CONFIRMED]
    out.append(f"probes: {len(report.probe.results)} run, " + (f"{len(found)} found a problem" if found else "no problem")
               + (f" (inconclusive: {', '.join(undecided)})" if undecided else ""))
    m = report.manifest
    if m is None:
        out.append(f"manifest: {report.manifest_note}")
    else:
        speed = f", {m.mb_per_s} MB/s" if m.mb_per_s else ""
        out.append(f"manifest: {m.path}: {m.files} file(s), {m.bytes / 1e6:.1f} MB "
                   f"{'hashed' if m.hashed else 'sized'} in {m.seconds:.2f} s{speed}: "
                   + ("every file matches" if m.ok else f"{len(m.problems)} problem(s)"))
    if report.trust is not None:
        bad = len(report.trust.untrusted)
        tags = f" (tags {', '.join(report.trust.tags)})" if len(report.trust.tags) > 1 else ""
        out.append(f"trust: {len(report.trust.files)} file(s) DeepSpeed would load{tags}, "
                   + (f"{bad} not verified safe" if bad else "every one verified safe (pickles walked, nothing run)"))
    out += [f"  - {p}" for p in report.problems]
    out.append("verdict: healthy" if report.healthy else f"verdict: NOT healthy ({len(report.problems)} problem(s))")
    return "\n".join(out) + "\n"


def run(args) -> int:
    from triage.repair.verify import verify

    report = verify(args.ckpt, args.manifest, deep=args.deep, hashed=not args.sizes_only, load_dir=args.load_dir,
                    model=args.model, releases=(args.deepspeed_version, args.torch_version))
    if args.junit:
        _write_junit(report, args.junit)
    emit(args.json, report.to_json, lambda: render(report))
    return EXIT_PROBE_CLEAN if report.healthy else EXIT_PROBE_FOUND


def _write_junit(report, path: str) -> None:
    from triage.repair.junit import junit_xml

    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(junit_xml(report))
    except OSError as exc:
        raise BadInput(f"--junit {path}: cannot write it: {exc.strerror or exc}") from None
