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

import pickle
import pickletools

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


def prescan(data: bytes) -> None:
    """Raise OverCap if the stream is over a cap, UnpicklingError if it is not a pickle at all."""
    stack: list[list[int]] = []  # one cell [depth] per stack item; shared with the memo and DUP
    marks: list[int] = []
    memo: dict[int, list[int]] = {}
    opcodes = containers = items = 0
    try:
        for op, arg, _pos in pickletools.genops(data):
            opcodes += 1
            if opcodes > MAX_OPCODES:
                raise OverCap(f"more than {MAX_OPCODES} opcodes")
            name = op.name
            _check_arg(name, arg)
            if name == "MARK":
                marks.append(len(stack))
                continue
            if name in _PUTS or name == "MEMOIZE":
                index = len(memo) if name == "MEMOIZE" else arg
                if index > MAX_MEMO:
                    raise OverCap(f"memo index {index} over {MAX_MEMO}")
                if stack:
                    memo[index] = stack[-1]
                continue
            if name in _GETS:
                stack.append(memo.get(arg, [0]))
                continue
            if name == "DUP":
                stack.append(stack[-1] if stack else [0])
                continue
            popped = _pop(op, stack, marks)
            deepest = max((cell[0] for cell in popped), default=0)
            if name in _MUTATORS:
                items += len(popped)
                if items > MAX_ITEMS:
                    raise OverCap(f"more than {MAX_ITEMS} container elements")
                if stack:
                    stack[-1][0] = max(stack[-1][0], deepest + 1)
                    if stack[-1][0] > MAX_DEPTH:
                        raise OverCap(f"nesting deeper than {MAX_DEPTH}")
                continue
            for _ in op.stack_after:
                if popped or name.startswith("EMPTY_"):
                    containers += 1
                    if containers > MAX_CONTAINERS:
                        raise OverCap(f"more than {MAX_CONTAINERS} containers or calls")
                if deepest + 1 > MAX_DEPTH:
                    raise OverCap(f"nesting deeper than {MAX_DEPTH}")
                stack.append([deepest + 1 if popped else 1])
    except OverCap:
        raise
    except (ValueError, IndexError, KeyError, TypeError) as exc:  # what genops says of a malformed stream
        raise pickle.UnpicklingError(f"malformed pickle: {exc}"[:200]) from None


def _check_arg(name: str, arg) -> None:
    if name in _INTS and isinstance(arg, int) and arg.bit_length() > 8 * MAX_INT_BYTES:
        raise OverCap(f"an integer of more than {MAX_INT_BYTES} bytes")
    if isinstance(arg, (str, bytes, bytearray)) and len(arg) > MAX_TEXT_BYTES:
        raise OverCap(f"a string or bytes object of more than {MAX_TEXT_BYTES} bytes")


def _pop(op, stack: list, marks: list) -> list:
    """Remove what `op` consumes from the simulated stack; the cells it took."""
    before = op.stack_before
    popped: list = []
    if _MARK in before:
        start = marks.pop() if marks else 0
        popped, stack[start:] = stack[start:], []
        before = before[:before.index(_MARK)]
    count = len([b for b in before if b is not _SLICE])
    if count:
        popped += stack[-count:]
        del stack[-count:]
    return popped


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
