"""Static catalogue of ``raise``/``assert`` sites on DeepSpeed's checkpoint LOAD path.

Pure stdlib (``ast``): the installed ``deepspeed`` and ``torch`` packages are located with
``importlib.util.find_spec`` (which does not execute them) and their source is parsed, never
imported.  ``load_path_sites()`` returns one :class:`Site` per distinct failure site inside the
scopes listed in :data:`SCOPES` (and triage.kb.projects' DeepSpeed scopes): a raise, an assert,
a message logged right before a failure or collected for a raise (triage.kb.site_walk);
``scan()`` reads any package or repository so; ``python -m triage.kb.sites`` prints a table.
"""
from __future__ import annotations

import argparse
import ast
import fnmatch
import importlib.util
import json
import os
import re
import sys
import warnings
from dataclasses import asdict, dataclass
from typing import Optional

from triage.kb.site_walk import called_names, functions, render, sites_in

# (package, file glob relative to the package root, regex full-matched against the function's
# qualified name *or* its bare name; None = every function in the file).  Names verified
# against deepspeed 0.19.8 / torch 2.13.
SCOPES: tuple[tuple[str, str, Optional[str]], ...] = (
    ("deepspeed", "runtime/engine.py",
     r"DeepSpeedEngine\.(load_checkpoint|_load_checkpoint|_load_zero_checkpoint|_get_all_zero_checkpoints"
     r"|_get_all_zero_checkpoint_state_dicts|_get_all_zero_checkpoint_names|_get_mp_rank_zero_checkpoint_names"
     r"|_get_zero_ckpt_prefix|_get_rank_zero_ckpt_name|_get_zero_ckpt_name|_get_ckpt_name|_get_all_ckpt_names"
     r"|_get_optimizer_ckpt_name|_get_expert_ckpt_name|load_module_state_dict|load_moe_state_dict"
     r"|load_universal_checkpoint|_validate_autoep_folding_checkpoint_metadata)"),
    ("deepspeed", "runtime/base_optimizer.py", r"ZeROOptimizer\.load_hp_checkpoint_state_from_checkpoint_dir"),
    ("deepspeed", "runtime/zero/stage_1_and_2.py",
     r"DeepSpeedZeroOptimizer\.(load_state_dict|_load_universal_checkpoint|_load_global_state|_load_legacy_checkpoint"
     r"|_restore_\w+|refresh_fp32_params|_checkpoint_group_state_dicts|_expand_unpadded_flat_group"
     r"|_redistribute_unpadded_partition|_convert_unpadded_rigid_optimizer_state|_partition_base_optimizer_state"
     r"|_link_all_hp_params|get_ep_ranks)"),
    ("deepspeed", "runtime/zero/stage3.py",
     r"DeepSpeedZeroOptimizer_Stage3\.(load_state_dict|_rigid_load_state_dict|_load_universal_checkpoint"
     r"|load_hp_checkpoint_state_from_checkpoint_dir_stage3|load_module_checkpoint_state_from_checkpoint_dir_stage3"
     r"|_load_global_state_stage3|load_hp_checkpoint_state|_slice_autoep_universal_expert_param|_restore_\w+"
     r"|refresh_fp32_params|_get_flattened_partition|checkpoint_event_prologue|checkpoint_event_epilogue"
     r"|_zero3_partition_group_metadata|reset_swap_buffers)"),
    ("deepspeed", "runtime/bf16_optimizer.py",
     r"BF16_Optimizer\.(load_state_dict|_load_legacy_checkpoint|_load_universal_checkpoint|_load_global_state"
     r"|_restore_from_bit16_weights|refresh_fp32_params|_link_all_hp_params)"),
    ("deepspeed", "runtime/fp16/fused_optimizer.py", r"FP16_Optimizer\.(load_state_dict|refresh_fp32_params)"),
    ("deepspeed", "runtime/fp16/unfused_optimizer.py",
     r"FP16_UnfusedOptimizer\.(load_state_dict|refresh_fp32_params)"),
    ("deepspeed", "runtime/state_dict_factory.py", None),
    ("deepspeed", "runtime/checkpoint_engine/*.py", r"\w+\.load"),
    ("deepspeed", "runtime/pipe/engine.py", r"PipelineEngine\.load_module_state_dict"),
    ("deepspeed", "runtime/pipe/module.py",
     r"PipelineModule\.(load_state_dir|ckpt_layer_path_list|ckpt_layer_path|ckpt_prefix|_synchronize_tied_weights)"),
    ("deepspeed", "runtime/pipe/dualpipev.py", r"\w+\.load_state_dir"),
    ("deepspeed", "runtime/lr_schedules.py", r"\w+\.load_state_dict"),
    ("deepspeed", "utils/zero_to_fp32.py", None),
    ("deepspeed", "checkpoint/*.py", None),
    ("torch", "nn/modules/module.py", r"Module\.(load_state_dict|_load_from_state_dict)"),
    ("torch", "serialization.py", r"load|_load|_legacy_load|_check_seekable|_get_restore_location"
     r"|_validate_device|validate_cuda_device|_deserialize|default_restore_location"),  # a CUDA save on a CPU host
    ("torch", "_weights_only_unpickler.py", r"Unpickler\.\w+|load"),
    ("torch", "optim/optimizer.py", r"Optimizer\.(load_state_dict|_process_value_according_to_param_policy)"),
)

# Files whose scoped functions also pull in the same-file functions they call (one level):
# ``self.f(...)``, ``SomeClassInFile.f(...)`` and bare ``f(...)`` of module-level functions.
FOLLOW_CALLS: frozenset[tuple[str, str]] = frozenset({("deepspeed", "runtime/engine.py")})


@dataclass(frozen=True)
class Site:
    package: str  # "deepspeed", "torch", or another project of triage.kb.projects
    file: str  # relative to the package root, '/'-separated
    function: str  # qualified name, e.g. "SDLoaderBase.check_ckpt_list"
    line: int
    kind: str  # "raise" | "assert" | "logged" | "collected" (triage.kb.site_walk)
    exception: str  # raised type as written; "AssertionError" for assert; bare raise -> caught type;
    # logged: the type of the failure that follows ("SystemExit": sys.exit); collected: the raise joining the list
    message: Optional[str]  # message template ({...} placeholders), None when bare
    code: str  # the source line at ``line``, stripped
    via: Optional[str] = None  # set when reached by FOLLOW_CALLS: the qualified caller


def package_dir(name: str) -> str:
    spec = importlib.util.find_spec(name)  # top-level find_spec does not import the package
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"package {name!r} is not installed")
    return list(spec.submodule_search_locations)[0]


def _scan_file(package: str, root: str, rel: str, regex: Optional[str], follow: bool) -> list[Site]:
    path = os.path.join(root, rel)
    with open(path, encoding="utf-8", errors="replace") as fh:
        source = fh.read()
    lines = source.splitlines()
    with warnings.catch_warnings():  # old releases' "\d" escapes: their problem, not ours
        warnings.simplefilter("ignore")
        try:
            tree = ast.parse(source, filename=path)
        except SyntaxError:
            return []  # Python 2 code in an old release: nothing this interpreter could have run
    funcs = list(functions(tree))
    chosen = [(q, n, None) for q, n in funcs
              if regex is None or re.fullmatch(regex, q) or re.fullmatch(regex, q.rsplit(".", 1)[-1])]
    if follow:
        classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
        have = {q for q, _, _ in chosen}
        for caller, node, _ in list(chosen):
            bare_calls, attr_calls = called_names(node, classes)
            for q, n in funcs:
                name = q.rsplit(".", 1)[-1]
                if q not in have and (name in attr_calls if "." in q else name in bare_calls):
                    chosen.append((q, n, caller))
                    have.add(q)
    out = []
    for qual, fnode, via in chosen:
        for inner_qual, node, kind, exc, msg_node, assigns in sites_in(fnode, qual, tree):
            out.append(Site(package, rel, inner_qual, node.lineno, kind, exc, render(msg_node, assigns),
                            lines[node.lineno - 1].strip(), via))
    return out


def site_key(s: Site) -> tuple:
    """What makes two sites the same (the line number is not part of it)."""
    return (s.package, s.file, s.function, s.exception, s.message if s.message is not None else s.code)


def load_path_sites(deepspeed_dir: Optional[str] = None, torch_dir: Optional[str] = None,
                    packages: tuple[str, ...] = ("deepspeed", "torch")) -> list[Site]:
    """Every distinct raise/assert on the checkpoint load path, in SCOPES order then line order
    (of the given `packages` only: the site history reads one release of one package at a time)."""
    roots = {"deepspeed": lambda: deepspeed_dir or package_dir("deepspeed"),
             "torch": lambda: torch_dir or package_dir("torch")}
    from triage.kb.projects import DEEPSPEED_INFERENCE, DEEPSPEED_LEGACY

    return scan({name: roots[name]() for name in packages}, SCOPES + DEEPSPEED_INFERENCE + DEEPSPEED_LEGACY)


def scan(roots: dict[str, str], scopes, follow: frozenset = FOLLOW_CALLS) -> list[Site]:
    """The distinct sites of `scopes` ((package, file glob, function regex) triples) under the
    package roots given (package -> directory), in scope order then line order."""
    result: list[Site] = []
    seen: set = set()
    for package, glob, regex in scopes:
        if package not in roots:
            continue
        root = roots[package]
        pattern = glob.replace("/", os.sep)
        rels = []
        for dirpath, _dirs, files in os.walk(root):
            for f in files:
                rel = os.path.relpath(os.path.join(dirpath, f), root)
                if f.endswith(".py") and fnmatch.fnmatch(rel, pattern) and \
                        rel.count(os.sep) == pattern.count(os.sep):
                    rels.append(rel.replace(os.sep, "/"))
        for rel in sorted(rels):
            for s in sorted(_scan_file(package, root, rel, regex, (package, glob) in follow), key=lambda s: s.line):
                key = site_key(s)
                if key not in seen:
                    seen.add(key)
                    result.append(s)
    return result


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m triage.kb.sites", description=__doc__.splitlines()[0])
    ap.add_argument("--deepspeed-dir")
    ap.add_argument("--torch-dir")
    ap.add_argument("--json", action="store_true", help="emit JSON lines instead of a table")
    ap.add_argument("--width", type=int, default=110, help="truncate messages to this many characters")
    args = ap.parse_args(argv)
    sites = load_path_sites(args.deepspeed_dir, args.torch_dir)
    if args.json:
        for s in sites:
            print(json.dumps(asdict(s)))
        return 0
    for s in sites:
        msg = "-" if s.message is None else s.message.replace("\n", "\\n").replace("\t", "\\t")
        if len(msg) > args.width:
            msg = msg[:args.width - 3] + "..."
        print(f"{s.package[:2]} {s.file}:{s.line:<5} {s.function:<58} {s.kind:<6} {s.exception:<24} {msg}")
    print(f"# {len(sites)} sites", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
