"""Caps on what a shard's pickle may make the safe reader allocate or spend (issues 16 and 40).

`prescan` walks the opcode stream (pickletools.genops: it decodes arguments, builds no object)
before the restricted unpickler runs, and simulates three things of each stack item: its nesting
depth, its logical size (shared references counted each time they are used) and its hash as a
dict key (hash_keys). It refuses a stream over a cap with `OverCap`, so a crafted `data.pkl`
cannot make the unpickler allocate gigabytes (millions of EMPTY_SET), hash a 10^6-deep tuple
(C recursion) or a 2 KB tuple DAG of 10^12 nodes, insert 10^5 keys of one hash, grow the memo
to a huge index or decode a megabyte-long integer. `check_graph` then walks the loaded objects
once, iteratively, for cycles, depth and their exact logical size (a cyclic `ds_config` would
send later code into endless recursion, a list DAG's str() would fill memory). What a report
shows of a loaded value goes through `shown`, which stops after a line.

The caps are orders of magnitude above any DeepSpeed shard's metadata (tens of thousands of
opcodes, depth under 20, a logical size below the opcode count), and low enough that the whole
probe stays far below 1 GiB.
"""

from __future__ import annotations

import contextlib
import pickle
import pickletools
import warnings

from triage.probe import hash_keys

MAX_OPCODES = 1_000_000
MAX_CONTAINERS = 500_000  # objects an opcode creates (lists, dicts, sets, tuples, calls)
MAX_ITEMS = 2_000_000  # elements put into containers, all containers together
MAX_DEPTH = 100
MAX_MEMO = MAX_OPCODES  # highest memo index
MAX_INT_BYTES = 64  # a DeepSpeed integer is a step count or a size: 8 bytes
MAX_TEXT_BYTES = 4 * 1024 * 1024  # one string or bytes object
# Structure, not only size: an object's logical size counts a shared object each time it is used, so a
# 2 KB pickle of a 100-fold tuple six levels deep is 10^12 nodes, which hash() or str() would visit.
MAX_NODES = 4_000_000  # one object (the whole graph included): what str(), == or a walk may visit
MAX_HASHED = 16_000_000  # all dict keys, set elements and call arguments together, as the load hashes them
NODES = (f"an object of more than {MAX_NODES} nodes, shared references counted each time (hashing or "
         "printing it would visit them all)")
# Keys of one hash make each insertion into a dict or set compare with all before them (hash_keys).
MAX_PROBES = 4_000_000  # insertions meeting a key of the same hash, all dicts and sets together
PROBES = f"dict or set keys that share a hash, more than {MAX_PROBES} comparisons to insert them"

_MARK = pickletools.markobject
_SLICE = pickletools.stackslice
_MUTATORS = {"APPEND", "APPENDS", "SETITEM", "SETITEMS", "ADDITEMS", "BUILD"}
_INTS = {"LONG1", "LONG4", "LONG", "INT"}
_PUTS = {"PUT", "BINPUT", "LONG_BINPUT"}
_GETS = {"GET", "BINGET", "LONG_BINGET"}
_KEYED = {"SETITEM", "SETITEMS", "DICT"}  # key, value, key, value...: the keys are hashed
_TABLES = _KEYED | {"ADDITEMS", "FROZENSET"}  # insert into a dict or set
_HASHES = _TABLES | {"REDUCE", "NEWOBJ", "NEWOBJ_EX", "OBJ", "INST", "BUILD"}
_NUMBERS = _INTS | {"BININT", "BININT1", "BININT2", "FLOAT", "BINFLOAT"}
_TUPLES = {"TUPLE", "TUPLE1", "TUPLE2", "TUPLE3"}


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
    # one cell [depth, size, key] per stack item, shared with the memo and DUP: size is the object's logical
    # node count, a shared object counted again each time it is used (a GET of a 100-fold tuple is 100 nodes);
    # key stands for its hash as a dict key (hash_keys); a dict's or set's cell gains its keys' counts
    stack: list[list] = []
    marks: list[int] = []
    memo: dict[int, list] = {}
    opcodes = containers = items = hashed = probes = 0
    for op, arg, _pos in pickletools.genops(data):
        opcodes += 1
        if opcodes > MAX_OPCODES:
            raise OverCap(f"more than {MAX_OPCODES} opcodes")
        kind, to_mark, count, pushes, hashes, number = _SHAPE[op.name]
        if arg is not None:
            _check_arg(op.name, arg)
        if kind == "leaf":  # a value from the stream itself (a number, a string, a global): the common case
            stack.append([1, 1, hash(arg) if number else arg])  # a string's own hash is random
            continue
        if kind == "mark":
            marks.append(len(stack))
            continue
        if kind == "put":
            index = len(memo) if arg is None else arg  # MEMOIZE has no argument
            if index > MAX_MEMO:
                raise OverCap(f"memo index {index} over {MAX_MEMO}")
            if stack:
                memo[index] = stack[-1]
            continue
        if kind == "get":
            unknown = [1, 1, hash_keys.UNKNOWN]
            stack.append(memo.get(arg, unknown) if op.name != "DUP" else stack[-1] if stack else unknown)
            continue
        popped: list = []
        if to_mark:
            begin = marks.pop() if marks else 0
            popped, stack[begin:] = stack[begin:], []
        if count:
            popped += stack[-count:]
            del stack[-count:]
        depth = size = 0
        for cell in popped:
            size += cell[1]
            if cell[0] > depth:
                depth = cell[0]
        depth += 1
        if depth > MAX_DEPTH:
            raise OverCap(f"nesting deeper than {MAX_DEPTH}")
        if hashes:  # the unpickler (or a stand-in it calls) hashes or walks these now: dict keys, set items, args
            hashed += size if hashes == _ALL else sum(cell[1] for cell in popped[0::2])
            if hashed > MAX_HASHED:
                raise OverCap(f"more than {MAX_HASHED} nodes hashed (keys or arguments that repeat shared objects)")
            if hashes != _ALL:  # DICT and FROZENSET fill a new dict or set, the others the one below
                table = stack[-1] if kind == "mutate" and stack else [0, 0, hash_keys.UNKNOWN]
                if len(table) < 4:
                    table.append({})  # its keys: key -> count
                probes += hash_keys.meets(table[3], popped[0::2] if hashes == _KEYS else popped)
                if probes > MAX_PROBES:
                    raise OverCap(PROBES)
        if kind == "mutate":  # APPEND(S), SETITEM(S), ADDITEMS, BUILD: into the container, which stays
            items += len(popped)
            if items > MAX_ITEMS:
                raise OverCap(f"more than {MAX_ITEMS} container elements")
            if stack:
                cell = stack[-1]
                cell[0], cell[1] = max(cell[0], depth), _sized(cell[1] + size)
            continue
        if pushes and (popped or kind == "empty"):
            containers += 1
            if containers > MAX_CONTAINERS:
                raise OverCap(f"more than {MAX_CONTAINERS} containers or calls")
        if pushes:  # 0 or 1 (only DUP pushes two, handled above)
            key = hash_keys.Items(popped) if op.name in _TUPLES and size <= 64 else \
                () if op.name == "EMPTY_TUPLE" else hash_keys.UNKNOWN
            stack.append([depth, _sized(1 + size), key])


def _sized(size: int) -> int:
    if size > MAX_NODES:
        raise OverCap(NODES)
    return size


_ALL, _KEYS, _ITEMS = 1, 2, 3


def _shape(op) -> tuple[str, bool, int, int, int, bool]:
    """(kind, pops down to a mark?, items popped besides (a mutated container not counted), items pushed,
    what of the popped items is hashed, pushes a number?) of one opcode."""
    name = op.name
    kind = ("mark" if name == "MARK" else "put" if name in _PUTS or name == "MEMOIZE"
            else "get" if name in _GETS or name == "DUP" else "mutate" if name in _MUTATORS
            else "empty" if name.startswith("EMPTY_") else "other")
    before = op.stack_before
    to_mark = _MARK in before
    if to_mark:
        before = before[:before.index(_MARK)]
    count = len([b for b in before if b is not _SLICE]) - (kind == "mutate")
    if kind == "other" and not to_mark and not count and len(op.stack_after) == 1:
        kind = "leaf"
    hashes = _KEYS if name in _KEYED else _ITEMS if name in _TABLES else _ALL if name in _HASHES else 0
    return kind, to_mark, count, len(op.stack_after), hashes, name in _NUMBERS


_SHAPE = {op.name: _shape(op) for op in pickletools.opcodes}


def _check_arg(name: str, arg) -> None:
    if name in _INTS and isinstance(arg, int) and arg.bit_length() > 8 * MAX_INT_BYTES:
        raise OverCap(f"an integer of more than {MAX_INT_BYTES} bytes")
    if isinstance(arg, (str, bytes, bytearray)) and len(arg) > MAX_TEXT_BYTES:
        raise OverCap(f"a string or bytes object of more than {MAX_TEXT_BYTES} bytes")


def check_graph(obj) -> None:
    """Raise OverCap if the loaded object graph has a cycle, is nested deeper than MAX_DEPTH, or expands
    to more than MAX_NODES nodes (shared objects counted each time: exact here, where prescan could
    not see a container filled after it was shared)."""
    on_path: set[int] = set()
    sizes: dict[int, int] = {}  # id -> expanded size of each container walked
    todo: list[tuple[object, int, list | None]] = [(obj, 1, None)]
    while todo:
        node, depth, leaving = todo.pop()
        if leaving is not None:
            on_path.discard(id(node))
            size = 1 + sum(sizes.get(id(child), 1) for child in leaving)
            if size > MAX_NODES:
                raise OverCap(NODES)
            sizes[id(node)] = size
            continue
        children = _children(node)
        if children is None or id(node) in sizes:
            continue
        if id(node) in on_path:
            raise OverCap(f"a cyclic structure ({type(node).__name__} contains itself)")
        if depth > MAX_DEPTH:
            raise OverCap(f"nesting deeper than {MAX_DEPTH}")
        on_path.add(id(node))
        todo.append((node, depth, children))
        todo.extend((child, depth + 1, None) for child in children)


def _children(node):
    if isinstance(node, dict):
        return [*node.keys(), *node.values()]
    if isinstance(node, (list, tuple, set, frozenset)):
        return list(node)
    state = getattr(node, "__dict__", None)
    if isinstance(state, dict) and not isinstance(node, type):
        return list(state.values())
    return None


SHOWN_CHARS = 80


def shown(value, limit: int = SHOWN_CHARS) -> str:
    """repr() of an unpickled value, cut at `limit` characters and built only that far: what a report may
    print of a stranger's value (the full repr of a shared-reference DAG could be gigabytes)."""
    out: list[str] = []
    _show(value, out, [limit + 1], 0)
    text = "".join(out)
    return text if len(text) <= limit else text[:max(0, limit - 3)] + "..."


_BRACKETS = {list: "[]", tuple: "()", dict: "{}", set: "{}", frozenset: "{}"}


def _show(value, out: list[str], budget: list[int], depth: int) -> None:
    brackets = next((b for t, b in _BRACKETS.items() if isinstance(value, t)), None)
    if brackets is None:
        if isinstance(value, (str, bytes, bytearray)):
            piece = repr(value[:budget[0]])
        elif value is None or isinstance(value, (int, float, complex)):
            piece = repr(value)  # an integer's digits are bounded by MAX_INT_BYTES
        else:
            piece = repr(value) if type(value).__repr__ is not object.__repr__ else f"<{type(value).__name__}>"
        out.append(piece)
        budget[0] -= len(piece)
        return
    out.append(brackets[0])
    budget[0] -= 1
    pairs = value.items() if isinstance(value, dict) else ((item, _NO_VALUE) for item in value)
    for n, (item, paired) in enumerate(pairs):
        if budget[0] <= 0 or depth >= 8:
            out.append("...")
            break
        if n:
            out.append(", ")
            budget[0] -= 2
        _show(item, out, budget, depth + 1)
        if paired is not _NO_VALUE and budget[0] > 0:
            out.append(": ")
            budget[0] -= 2
            _show(paired, out, budget, depth + 1)
    out.append(brackets[1])
    budget[0] -= 1


_NO_VALUE = object()
