"""Static catalogue of ``raise``/``assert`` sites on DeepSpeed's checkpoint LOAD path.

Pure stdlib (``ast``): the installed ``deepspeed`` and ``torch`` packages are located with
``importlib.util.find_spec`` (which does not execute them) and their source is parsed, never
imported.  ``load_path_sites()`` returns one :class:`Site` per distinct raise/assert inside the
scopes listed in :data:`SCOPES`; ``python -m triage.kb.sites`` prints them as a table.
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
from dataclasses import asdict, dataclass
from typing import Iterator, Optional

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
    ("torch", "serialization.py", r"load|_load|_legacy_load|_check_seekable|_get_restore_location"),
    ("torch", "_weights_only_unpickler.py", r"Unpickler\.\w+|load"),
    ("torch", "optim/optimizer.py", r"Optimizer\.(load_state_dict|_process_value_according_to_param_policy)"),
)

# Files whose scoped functions also pull in the same-file functions they call (one level):
# ``self.f(...)``, ``SomeClassInFile.f(...)`` and bare ``f(...)`` of module-level functions.
FOLLOW_CALLS: frozenset[tuple[str, str]] = frozenset({("deepspeed", "runtime/engine.py")})


@dataclass(frozen=True)
class Site:
    package: str  # "deepspeed" | "torch"
    file: str  # relative to the package root, '/'-separated
    function: str  # qualified name, e.g. "SDLoaderBase.check_ckpt_list"
    line: int
    kind: str  # "raise" | "assert"
    exception: str  # raised type as written; "AssertionError" for assert; bare raise -> caught type
    message: Optional[str]  # message template ({...} placeholders), None when bare
    code: str  # the source line at ``line``, stripped
    via: Optional[str] = None  # set when reached by FOLLOW_CALLS: the qualified caller


def package_dir(name: str) -> str:
    spec = importlib.util.find_spec(name)  # top-level find_spec does not import the package
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"package {name!r} is not installed")
    return list(spec.submodule_search_locations)[0]


def _functions(tree: ast.Module) -> Iterator[tuple[str, ast.AST]]:
    """(qualname, node) for module-level functions and methods (classes walked recursively)."""
    def walk(body, prefix):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield prefix + node.name, node
            elif isinstance(node, ast.ClassDef):
                yield from walk(node.body, prefix + node.name + ".")
    yield from walk(tree.body, "")


def _render(node: Optional[ast.AST], assigns: dict, depth: int = 0, nested: bool = False) -> Optional[str]:
    """Message text as written: constants verbatim, f-strings with {expr} placeholders.

    Non-string pieces of a ``+`` concatenation become ``{expr}``; a message that is wholly a
    non-string expression (e.g. ``_get_wo_message(str(e))``) is returned as ``ast.unparse``.
    Local names are resolved to their last prior assignment in the function (two steps max).
    """
    if node is None:
        return None
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else repr(node.value)
    if isinstance(node, ast.JoinedStr):
        out = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                out.append(str(v.value))
            else:  # FormattedValue
                conv = {115: "!s", 114: "!r", 97: "!a"}.get(v.conversion, "")
                spec = ":" + (_render(v.format_spec, {}) or "") if v.format_spec is not None else ""
                out.append("{" + ast.unparse(v.value) + conv + spec + "}")
        return "".join(out)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        if isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant):
            return _render(node.left, assigns, depth)  # "..." % args -> the %-template
        if isinstance(node.op, ast.Add):
            return _render(node.left, assigns, depth, True) + _render(node.right, assigns, depth, True)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"
            and isinstance(node.func.value, (ast.Constant, ast.JoinedStr))):
        return _render(node.func.value, assigns, depth)  # "...{}...".format(...) -> the template
    if isinstance(node, ast.Name) and node.id in assigns and depth < 2:
        return _render(assigns[node.id], assigns, depth + 1, nested)
    return "{" + ast.unparse(node) + "}" if nested else ast.unparse(node)


def _exc_name(node: ast.Raise, handlers: list) -> str:
    exc = node.exc
    if exc is None:  # bare re-raise: report the type caught by the enclosing handler
        if handlers and handlers[-1].type is not None:
            return ast.unparse(handlers[-1].type)
        return "<re-raise>"
    if isinstance(exc, ast.Call):
        exc = exc.func
    return ast.unparse(exc)


def _caught(node: ast.Try) -> set:
    """Exception names the handlers of this try catch ("*": a bare except)."""
    names = set()
    for handler in node.handlers:
        if handler.type is None:
            names.add("*")
        elif isinstance(handler.type, ast.Tuple):
            names.update(ast.unparse(elt) for elt in handler.type.elts)
        else:
            names.add(ast.unparse(handler.type))
    return names


def _sites_in(func: ast.AST, qual: str) -> Iterator[tuple[str, ast.AST, list, dict]]:
    """Yield (innermost qualname, raise/assert node, enclosing except handlers, prior str assigns).

    A raise inside a try whose own handler catches that very type never leaves the
    function (torch's `_check_container_source` raises OSError to warn), so it is skipped.
    """
    def visit(node, qual, handlers, assigns, guards):
        for child in ast.iter_child_nodes(node):
            inner_guards = guards | _caught(node) if isinstance(node, ast.Try) and child in node.body else guards
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield from visit(child, f"{qual}.{child.name}", [], dict(assigns), set())
                continue
            if isinstance(child, ast.ClassDef):
                yield from visit(child, f"{qual}.{child.name}", [], dict(assigns), set())
                continue
            if isinstance(child, ast.Raise) and child.exc is not None and \
                    (_exc_name(child, handlers) in inner_guards or "*" in inner_guards):
                continue
            if isinstance(child, (ast.Raise, ast.Assert)):
                yield qual, child, handlers, dict(assigns)
            if isinstance(child, ast.Assign) and len(child.targets) == 1 and isinstance(child.targets[0], ast.Name):
                assigns[child.targets[0].id] = child.value
            elif isinstance(child, ast.AugAssign) and isinstance(child.target, ast.Name) and \
                    isinstance(child.op, ast.Add) and child.target.id in assigns:
                assigns[child.target.id] = ast.BinOp(assigns[child.target.id], ast.Add(), child.value)
            inner = handlers + [child] if isinstance(child, ast.ExceptHandler) else handlers
            yield from visit(child, qual, inner, assigns, inner_guards)
    yield from visit(func, qual, [], {}, set())


def _called_names(func: ast.AST, class_names: set) -> tuple[set, set]:
    """(bare names called, attribute names called on self/cls/a class of this file)."""
    bare, attrs = set(), set()
    for n in ast.walk(func):
        if isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Name):
                bare.add(f.id)
            elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and \
                    f.value.id in class_names | {"self", "cls"}:
                attrs.add(f.attr)
    return bare, attrs


def _scan_file(package: str, root: str, rel: str, regex: Optional[str], follow: bool) -> list[Site]:
    path = os.path.join(root, rel)
    with open(path, encoding="utf-8") as fh:
        source = fh.read()
    lines = source.splitlines()
    tree = ast.parse(source, filename=path)
    funcs = list(_functions(tree))
    chosen = [(q, n, None) for q, n in funcs
              if regex is None or re.fullmatch(regex, q) or re.fullmatch(regex, q.rsplit(".", 1)[-1])]
    if follow:
        classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
        have = {q for q, _, _ in chosen}
        for caller, node, _ in list(chosen):
            bare_calls, attr_calls = _called_names(node, classes)
            for q, n in funcs:
                name = q.rsplit(".", 1)[-1]
                if q not in have and (name in attr_calls if "." in q else name in bare_calls):
                    chosen.append((q, n, caller))
                    have.add(q)
    out = []
    for qual, fnode, via in chosen:
        for inner_qual, node, handlers, assigns in _sites_in(fnode, qual):
            if isinstance(node, ast.Assert):
                kind, exc, msg = "assert", "AssertionError", _render(node.msg, assigns)
            else:
                kind, exc = "raise", _exc_name(node, handlers)
                arg = None
                if isinstance(node.exc, ast.Call) and node.exc.args:
                    arg = node.exc.args[0]
                msg = _render(arg, assigns)
            out.append(Site(package, rel, inner_qual, node.lineno, kind, exc, msg,
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
    roots = {name: roots[name]() for name in packages}
    result: list[Site] = []
    seen: set = set()
    for package, glob, regex in SCOPES:
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
            for s in sorted(_scan_file(package, root, rel, regex, (package, glob) in FOLLOW_CALLS),
                            key=lambda s: s.line):
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
