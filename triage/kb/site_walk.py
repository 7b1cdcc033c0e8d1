"""The AST walk behind triage.kb.sites: where a function fails, and the message it prints.

A failure site is a `raise` or an `assert`, and two kinds of message a failure prints without
being the exception's own text:
- `logged`: a `logger.error/warning/...` or `print`-like call right before (nothing but other
  such calls between) a `raise` or a `sys.exit()` in the same block (Megatron prints why, then
  exits; a library warns, then raises);
- `collected`: a message appended to an error list (`error_msgs.append(...)`, torch's
  `_load_from_state_dict`) that a raise elsewhere in the file joins into its own message.
Pure stdlib; the code is parsed, never imported.
"""
from __future__ import annotations

import ast
import re
from typing import Iterator, Optional

# Calls whose message a following failure explains: logger methods, and the print helpers
# Megatron and GPT-NeoX print through before sys.exit().
_LOG_METHODS = frozenset({"error", "warning", "warn", "critical", "fatal", "exception"})
_PRINTS = frozenset({"print", "print_rank_0", "print_rank_last", "print_rank", "log_rank_0", "warn"})
_EXITS = frozenset({"sys.exit", "exit", "quit", "os._exit"})
# Lists that collect error messages for a raise to join.
COLLECTING = re.compile(r"(?:\w+_)?(?:error_msgs|errors|error_messages|problems)")


def functions(tree: ast.Module) -> Iterator[tuple[str, ast.AST]]:
    """(qualname, node) for module-level functions and methods (classes walked recursively)."""
    def walk(body, prefix):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield prefix + node.name, node
            elif isinstance(node, ast.ClassDef):
                yield from walk(node.body, prefix + node.name + ".")
    yield from walk(tree.body, "")


def render(node: Optional[ast.AST], assigns: dict, depth: int = 0, nested: bool = False) -> Optional[str]:
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
                spec = ":" + (render(v.format_spec, {}) or "") if v.format_spec is not None else ""
                out.append("{" + ast.unparse(v.value) + conv + spec + "}")
        return "".join(out)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        if isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant):
            return render(node.left, assigns, depth)  # "..." % args -> the %-template
        if isinstance(node.op, ast.Add):
            return render(node.left, assigns, depth, True) + render(node.right, assigns, depth, True)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"
            and isinstance(node.func.value, (ast.Constant, ast.JoinedStr))):
        return render(node.func.value, assigns, depth)  # "...{}...".format(...) -> the template
    if isinstance(node, ast.Name) and node.id in assigns and depth < 2:
        return render(assigns[node.id], assigns, depth + 1, nested)
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


def sites_in(func: ast.AST, qual: str, tree: ast.Module) -> Iterator[tuple]:
    """Yield (innermost qualname, node, kind, exception, message node, prior str assigns) for each
    failure site in the function: kind "raise" | "assert" | "logged" | "collected".

    A raise inside a try whose own handler catches that very type never leaves the
    function (torch's `_check_container_source` raises OSError to warn), so it is skipped.
    """
    logged = logged_before_failure(func)

    def visit(node, qual, handlers, assigns, guards):
        for child in ast.iter_child_nodes(node):
            inner_guards = guards | _caught(node) if isinstance(node, ast.Try) and child in node.body else guards
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                yield from visit(child, f"{qual}.{child.name}", [], dict(assigns), set())
                continue
            if isinstance(child, ast.Raise) and child.exc is not None and \
                    (_exc_name(child, handlers) in inner_guards or "*" in inner_guards):
                continue
            if isinstance(child, ast.Assert):
                yield qual, child, "assert", "AssertionError", child.msg, dict(assigns)
            elif isinstance(child, ast.Raise):
                arg = child.exc.args[0] if isinstance(child.exc, ast.Call) and child.exc.args else None
                yield qual, child, "raise", _exc_name(child, handlers), arg, dict(assigns)
            elif id(child) in logged:
                yield qual, child, "logged", failure_type(logged[id(child)], handlers), child.value.args[0], dict(assigns)
            elif _is_exit(child) and child.value.args and isinstance(child.value.args[0], (ast.Constant, ast.JoinedStr)):
                yield qual, child, "raise", "SystemExit", child.value.args[0], dict(assigns)  # sys.exit("why")
            elif collected(child) is not None:
                name, message = collected(child)
                yield qual, child, "collected", joined_by(tree, name), message, dict(assigns)
            if isinstance(child, ast.Assign) and len(child.targets) == 1 and isinstance(child.targets[0], ast.Name):
                assigns[child.targets[0].id] = child.value
            elif isinstance(child, ast.AugAssign) and isinstance(child.target, ast.Name) and \
                    isinstance(child.op, ast.Add) and child.target.id in assigns:
                assigns[child.target.id] = ast.BinOp(assigns[child.target.id], ast.Add(), child.value)
            inner = handlers + [child] if isinstance(child, ast.ExceptHandler) else handlers
            yield from visit(child, qual, inner, assigns, inner_guards)
    yield from visit(func, qual, [], {}, set())


def called_names(func: ast.AST, class_names: set) -> tuple[set, set]:
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


def _call_name(node: ast.AST) -> str:
    return ast.unparse(node.func) if isinstance(node, ast.Call) else ""


def _is_exit(stmt: ast.AST) -> bool:
    return isinstance(stmt, ast.Expr) and _call_name(stmt.value) in _EXITS


def _logs(stmt: ast.AST) -> Optional[ast.Call]:
    """The call when the statement logs a message (first argument) through a logger or a print helper."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and stmt.value.args):
        return None
    func = stmt.value.func
    if isinstance(func, ast.Attribute) and func.attr in _LOG_METHODS:
        owner = ast.unparse(func.value).rsplit(".", 1)[-1].lower()
        return stmt.value if "log" in owner else None
    return stmt.value if isinstance(func, ast.Name) and func.id in _PRINTS else None


def logged_before_failure(func: ast.AST) -> dict[int, ast.AST]:
    """id(logging statement) -> the raise or exit statement that follows it in the same block."""
    out: dict[int, ast.AST] = {}
    for node in ast.walk(func):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if not isinstance(block, list):
                continue
            failure = None
            for stmt in reversed(block):  # the failure right after each run of logging statements
                if isinstance(stmt, ast.Raise) or _is_exit(stmt):
                    failure = stmt
                elif failure is not None and _logs(stmt) is not None:
                    out[id(stmt)] = failure
                else:
                    failure = None  # other work between: the message does not explain the failure
    return out


def collected(stmt: ast.AST) -> Optional[tuple[str, ast.AST]]:
    """(list name, message node) when the statement appends or inserts a message into an error list."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return None
    func, args = stmt.value.func, stmt.value.args
    if not (isinstance(func, ast.Attribute) and func.attr in ("append", "insert") and args):
        return None
    name = ast.unparse(func.value).rsplit(".", 1)[-1]
    if not COLLECTING.fullmatch(name):
        return None
    return name, args[-1]


def joined_by(tree: ast.Module, name: str) -> str:
    """The type a raise of this file throws with the list `name` in its arguments ("(collected)": none)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and \
                any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node.exc)):
            return ast.unparse(node.exc.func)
    return "(collected)"


def failure_type(failure: ast.AST, handlers: list) -> str:
    return "SystemExit" if _is_exit(failure) else _exc_name(failure, handlers)
