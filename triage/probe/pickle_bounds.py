"""Caps on what a shard's pickle may make the safe reader allocate or spend (issue 16).

`prescan` walks the opcode stream (pickletools.genops: it decodes arguments, builds no object)
before the restricted unpickler runs, and simulates only the nesting depth of each stack item.
It refuses a stream over a cap with `OverCap`, so a crafted `data.pkl` cannot make the
unpickler allocate gigabytes (millions of EMPTY_SET), hash a 10^6-deep tuple (C recursion),
grow the memo to a huge index or decode a megabyte-long integer. `check_graph` then walks the
loaded objects once, iteratively, for cycles and depth (a cyclic `ds_config` would otherwise
send later code into endless recursion).

The caps are orders of magnitude above any DeepSpeed shard's metadata (tens of thousands of
opcodes, depth under 20), and low enough that the whole probe stays far below 1 GiB.
"""

from __future__ import annotations

import contextlib
import pickle
import pickletools
import warnings

MAX_OPCODES = 1_000_000
MAX_CONTAINERS = 500_000  # objects an opcode creates (lists, dicts, sets, tuples, calls)
MAX_ITEMS = 2_000_000  # elements put into containers, all containers together
MAX_DEPTH = 100
MAX_MEMO = MAX_OPCODES  # highest memo index
MAX_INT_BYTES = 64  # a DeepSpeed integer is a step count or a size: 8 bytes
MAX_TEXT_BYTES = 4 * 1024 * 1024  # one string or bytes object

_MARK = pickletools.markobject
_SLICE = pickletools.stackslice
_MUTATORS = {"APPEND", "APPENDS", "SETITEM", "SETITEMS", "ADDITEMS", "BUILD"}
_INTS = {"LONG1", "LONG4", "LONG", "INT"}
_PUTS = {"PUT", "BINPUT", "LONG_BINPUT"}
_GETS = {"GET", "BINGET", "LONG_BINGET"}


class OverCap(pickle.UnpicklingError):
    """The pickle goes over one of the caps: the message names which."""


@contextlib.contextmanager
def quiet_string_escapes():
    """A STRING opcode with an invalid escape (\\h) makes pickle and pickletools warn, an error under
    -W error: a stranger's bytes get no say on the user's terminal or exit."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        yield


def prescan(data) -> None:
    """Raise OverCap if the stream is over a cap, UnpicklingError if it is not a pickle at all.
    `data`: bytes, or a binary file, read up to its next STOP (a legacy .pt holds several pickles)."""
    try:
        with quiet_string_escapes():
            _walk(data)
    except OverCap:
        raise
    except (ValueError, IndexError, KeyError, TypeError) as exc:  # what genops says of a malformed stream
        raise pickle.UnpicklingError(f"malformed pickle: {exc}"[:200]) from None


def _walk(data) -> None:
    stack: list[list[int]] = []  # one cell [depth] per stack item; shared with the memo and DUP
    marks: list[int] = []
    memo: dict[int, list[int]] = {}
    opcodes = containers = items = 0
    for op, arg, _pos in pickletools.genops(data):
        opcodes += 1
        if opcodes > MAX_OPCODES:
            raise OverCap(f"more than {MAX_OPCODES} opcodes")
        kind, to_mark, count, pushes = _SHAPE[op.name]
        if arg is not None:
            _check_arg(op.name, arg)
        if kind == "mark":
            marks.append(len(stack))
        elif kind == "put":
            index = len(memo) if arg is None else arg  # MEMOIZE has no argument
            if index > MAX_MEMO:
                raise OverCap(f"memo index {index} over {MAX_MEMO}")
            if stack:
                memo[index] = stack[-1]
        elif kind == "get":
            stack.append(memo.get(arg, [0]) if op.name != "DUP" else stack[-1] if stack else [0])
        else:
            popped: list = []
            if to_mark:
                begin = marks.pop() if marks else 0
                popped, stack[begin:] = stack[begin:], []
            if count:
                popped += stack[-count:]
                del stack[-count:]
            depth = 1
            for cell in popped:
                if cell[0] >= depth:
                    depth = cell[0] + 1
            if depth > MAX_DEPTH:
                raise OverCap(f"nesting deeper than {MAX_DEPTH}")
            if kind == "mutate":  # APPEND(S), SETITEM(S), ADDITEMS, BUILD: into the container below
                items += len(popped)
                if items > MAX_ITEMS:
                    raise OverCap(f"more than {MAX_ITEMS} container elements")
                if stack and stack[-1][0] < depth:
                    stack[-1][0] = depth
                continue
            if pushes and (popped or kind == "empty"):
                containers += 1
                if containers > MAX_CONTAINERS:
                    raise OverCap(f"more than {MAX_CONTAINERS} containers or calls")
            if pushes:  # 0 or 1 (only DUP pushes two, handled above)
                stack.append([depth])


def _shape(op) -> tuple[str, bool, int, int]:
    """(kind, pops down to a mark?, items popped besides, items pushed) of one opcode."""
    name = op.name
    kind = ("mark" if name == "MARK" else "put" if name in _PUTS or name == "MEMOIZE"
            else "get" if name in _GETS or name == "DUP" else "mutate" if name in _MUTATORS
            else "empty" if name.startswith("EMPTY_") else "other")
    before = op.stack_before
    to_mark = _MARK in before
    if to_mark:
        before = before[:before.index(_MARK)]
    return kind, to_mark, len([b for b in before if b is not _SLICE]), len(op.stack_after)


_SHAPE = {op.name: _shape(op) for op in pickletools.opcodes}


def _check_arg(name: str, arg) -> None:
    if name in _INTS and isinstance(arg, int) and arg.bit_length() > 8 * MAX_INT_BYTES:
        raise OverCap(f"an integer of more than {MAX_INT_BYTES} bytes")
    if isinstance(arg, (str, bytes, bytearray)) and len(arg) > MAX_TEXT_BYTES:
        raise OverCap(f"a string or bytes object of more than {MAX_TEXT_BYTES} bytes")


def check_graph(obj) -> None:
    """Raise OverCap if the loaded object graph has a cycle or is nested deeper than MAX_DEPTH."""
    on_path: set[int] = set()
    todo: list[tuple[object, int, bool]] = [(obj, 1, False)]
    done: set[int] = set()
    while todo:
        node, depth, leaving = todo.pop()
        if leaving:
            on_path.discard(id(node))
            done.add(id(node))
            continue
        children = _children(node)
        if children is None or id(node) in done:
            continue
        if id(node) in on_path:
            raise OverCap(f"a cyclic structure ({type(node).__name__} contains itself)")
        if depth > MAX_DEPTH:
            raise OverCap(f"nesting deeper than {MAX_DEPTH}")
        on_path.add(id(node))
        todo.append((node, depth, True))
        todo.extend((child, depth + 1, False) for child in children)


def _children(node):
    if isinstance(node, dict):
        return [*node.keys(), *node.values()]
    if isinstance(node, (list, tuple, set, frozenset)):
        return list(node)
    state = getattr(node, "__dict__", None)
    if isinstance(state, dict) and not isinstance(node, type):
        return list(state.values())
    return None
