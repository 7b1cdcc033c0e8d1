"""How many comparisons inserting keys into one dict or set costs: one for each key before it of the same hash.

Distinct keys of one hash make each insertion compare with every one before it: 10^5 integer keys
k * (2**61 - 1) + 5 (all of hash 5) cost 5 * 10^9 comparisons, in the unpickler's SETITEMS or in a
constructor a pickle calls. pickle_bounds counts them against a cap before they are inserted:

* in the opcode stream (`key_of`, `meets`), where a number's hash is known exactly, and so is a small
  tuple's of numbers (tuple hashing combines its items' hashes); a string's hash is random, so it stands
  for itself; a key whose hash is not known there (what a call made) is taken to share every other such
  key's hash;
* on the objects a pickle hands to dict, OrderedDict, set or frozenset (`collisions`).
"""

from __future__ import annotations

UNKNOWN = ("unknown",)  # the key of what a call or a container made: its hash is not known from the stream


class Items(tuple):
    """The stream cells of a small tuple's items: its key, worked out only if it is used as one (key_of)."""

    __slots__ = ()


class _Hash:
    __slots__ = ("value",)

    def __init__(self, value: int):
        self.value = value

    def __hash__(self) -> int:
        return self.value


def key_of(cell: list):
    """A stream cell's key (cell[2]): a number's hash, a string itself, a tuple's (worked out here), UNKNOWN."""
    if type(cell[2]) is Items:
        cell[2] = _tuple_key(cell[2])
    return cell[2]


def _tuple_key(cells: Items):
    keys = tuple(key_of(cell) for cell in cells)
    if any(key is UNKNOWN for key in keys):
        return UNKNOWN
    if all(type(key) is int for key in keys):
        return hash(tuple(map(_Hash, keys)))  # what hash() of the tuple will be
    return ("tuple", keys)  # equal hashes only if its items' are


def meets(seen: dict, cells: list) -> int:
    """Comparisons to insert the keys of `cells` into a dict or set that holds `seen` (key -> count, updated)."""
    met = 0
    for cell in cells:
        key = key_of(cell)
        count = seen.get(key, 0)
        met += count
        seen[key] = count + 1
    return met


def collisions(keys) -> int:
    """Comparisons to insert these objects into one dict or set (equal keys counted as if distinct)."""
    seen: dict[int, int] = {}
    met = 0
    for key in keys:
        count = seen.get(hash(key), 0)
        met += count
        seen[hash(key)] = count + 1
    return met
