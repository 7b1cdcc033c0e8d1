"""Value classes without `dataclasses`: equality and a readable repr from a list of fields.

Importing dataclasses costs a cold `ds-triage classify` ~13 ms (it imports inspect, ast,
dis, tokenize) and generating each class's methods ~0.7 ms more (19 classes on the classify
path): a sixth of a paste-to-answer run. A class on that path names its fields in `_fields`
(and in `__slots__` when it has slots), writes its own `__init__`, and gets here what
@dataclass gave it: `==` field by field, a repr, and for a `Frozen` one a hash of its fields.
"""

from __future__ import annotations


class Record:
    __slots__ = ()
    _fields: tuple[str, ...] = ()
    _hidden: tuple[str, ...] = ()  # fields left out of ==, hash and repr (a cache, a raw document)

    def _values(self) -> tuple:
        return tuple(getattr(self, name) for name in self._fields if name not in self._hidden)

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    __hash__ = None  # mutable: like a dataclass with eq and not frozen

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields if name not in self._hidden)
        return f"{type(self).__qualname__}({shown})"

    def replace(self, **changes):
        """A copy with `changes` (dataclasses.replace)."""
        values = {name: getattr(self, name) for name in self._fields}
        values.update(changes)
        return type(self)(**values)


class Frozen(Record):
    """A record never changed after __init__ (by convention, not enforced): hashable."""

    __slots__ = ()

    def __hash__(self) -> int:
        return hash(self._values())
