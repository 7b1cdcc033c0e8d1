"""`ds-triage manifest CKPT`: write <tag>/ds-triage-manifest.json (sizes, sha256, layout, versions)."""

from __future__ import annotations

import json
import os
import sys

from triage.cli.output import add_progress_options
from triage.errors import BadInput
from triage.runbook.links import page_ref

EXIT_WRITTEN = 0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "manifest", help="write a tag's manifest (sizes, sha256, layout, versions) for `verify`",
        description="Hash every file of a tag (streamed) and write <tag>/ds-triage-manifest.json beside its shards: "
        "the one file ds-triage writes into a checkpoint, always a new one. `ds-triage verify` then catches bit rot "
        "and partial copies. Refuses when the tag has a manifest already, or when a probe finds it broken (unless "
        "--force). Exit 0 written, 1 refused, 3 the checkpoint cannot be read.",
        epilog=f"the manifest's format: {page_ref('reference/manifest')}")
    parser.add_argument("ckpt", metavar="CKPT", help="checkpoint root (its `latest` tag) or a tag dir")
    parser.add_argument("--tag", help="the tag to write the manifest of (default: `latest`'s)")
    parser.add_argument("--force", action="store_true", help="write it even when a probe finds the tag broken")
    parser.add_argument("--json", action="store_true", help="print the manifest written")
    add_progress_options(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    from triage.manifest.build import build, manifest_path, write
    from triage.probe import checks
    from triage.probe.result import CONFIRMED
    from triage.repair.plan import Refused, Source

    if not os.path.lexists(args.ckpt):
        raise BadInput(f"{args.ckpt}: no such file or directory")
    source = Source.locate(args.ckpt, args.tag)
    tag_dir = os.path.join(source.root, source.require_tag())
    path = manifest_path(tag_dir)
    if os.path.lexists(path):
        raise Refused(f"{path} exists; ds-triage never overwrites a manifest: check against it with "
                      f"`ds-triage verify {source.root}`, or remove it to write a new one")
    broken = [r for r in checks.run(source.ctx, ("completeness", "permission", "integrity")).values()
              if r.status == CONFIRMED]
    if broken and not args.force:
        raise Refused(f"{tag_dir}: {broken[0].name}: {(broken[0].headline or [broken[0].summary])[0]}; a manifest "
                      "would record the damage as the saved state (--force writes it anyway)")
    manifest = build(tag_dir)
    write(tag_dir, manifest)
    h = manifest["hashing"]
    if not args.quiet:
        print(f"hashed {len(manifest['files'])} file(s), {manifest['total_bytes'] / 1e6:.1f} MB in {h['seconds']:.2f} s"
              + (f" ({h['mb_per_s']} MB/s)" if h["mb_per_s"] else ""), file=sys.stderr)
    if args.json:
        json.dump(manifest, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(f"wrote {path}")
    return EXIT_WRITTEN

