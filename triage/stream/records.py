"""Log records as shippers and stores write them: which text, which stream, what time.

Each input line is a plain log line, a CRI container log line, or JSON; a JSON line may hold
one record or many (a Loki query_range response, an Elasticsearch search response, a JSON
array batch). Field names follow each tool's own documentation:

* Docker json-file driver (docs.docker.com, "JSON File logging driver"):
  `{"log": "...\\n", "stream": "stdout", "time": "2019-01-01T11:11:11.111111111Z"}`; a
  `log` without its trailing newline is a partial line (split at 16 KiB) continued next.
* CRI (the kubelet's container log format, as Loki's `cri` stage documents it):
  `<RFC 3339 time> <stdout|stderr> <P|F> <text>`; P is a partial line, F the final part.
* Fluent Bit (docs.fluentbit.io, filters/kubernetes and outputs/http): the text in `log`
  (tail + docker parser) or `message` (cri parser); `kubernetes.pod_name`,
  `kubernetes.namespace_name`, `kubernetes.container_name`, `kubernetes.host`; the time in
  `date` (the http output's default `json_date_key`).
* Vector (vector.dev, sources/kubernetes_logs output): `message`, `timestamp`,
  `kubernetes.pod_name`, `kubernetes.pod_namespace`, `kubernetes.container_name`,
  `kubernetes.pod_node_name`.
* Loki: query_range (`data.result[]` of `{"stream": {labels}, "values": [[ns, line]]}`,
  newest first by default, so each stream is re-sorted here) and `logcli --output jsonl`
  (grafana/loki pkg/logcli/output/jsonl.go: `timestamp`, `line`, `labels`). The stream is
  the label set.
* Elasticsearch: hits as `_search` returns them (`hits.hits[]._source`), one hit per line,
  and bulk NDJSON (action lines `{"index": {...}}` are skipped). Sources in ECS (Filebeat:
  `message`, `@timestamp`, `kubernetes.pod.name`, `kubernetes.namespace`,
  `kubernetes.container.name`, `host.name`) or as Fluent Bit's es output writes them.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from dataclasses import dataclass, field
from typing import NamedTuple

Key = tuple[tuple[str, str], ...]  # (field, value) pairs naming one stream; () for plain input


class Record(NamedTuple):  # a tuple: made for every decoded record, ~7x cheaper than a frozen dataclass
    key: Key
    text: str
    time: object = None  # as the record gives it (RFC 3339 text, epoch number): see time_text()
    partial: bool = False  # the line goes on in the stream's next record (CRI P, Docker split)


@dataclass(frozen=True)
class Fields:
    message: tuple[str, ...]  # the first of these that holds a string is the text
    keys: tuple[tuple[str, ...], ...]  # per part of the stream key, the paths tried in turn
    time: tuple[str, ...]


_NAMESPACE = ("kubernetes.namespace_name", "kubernetes.pod_namespace", "kubernetes.namespace")
_POD = ("kubernetes.pod_name", "kubernetes.pod.name")
_CONTAINER = ("kubernetes.container_name", "kubernetes.container.name")
_HOST = ("kubernetes.host", "kubernetes.pod_node_name", "host.name", "hostname")
LABELS = (("labels",),)  # Loki: every label of the stream
_TIMES = ("time", "timestamp", "@timestamp", "date", "ts")
FORMATS: dict[str, Fields] = {
    "json": Fields(("log", "message", "line", "msg"), (_NAMESPACE, _POD, _CONTAINER, _HOST), _TIMES),
    "docker": Fields(("log",), (), ("time",)),
    "fluentbit": Fields(("log", "message"), (_NAMESPACE[:1], _POD[:1], _CONTAINER[:1], ("kubernetes.host",)),
                        ("date", "time", "@timestamp")),
    "vector": Fields(("message",), (("kubernetes.pod_namespace",), _POD[:1], _CONTAINER[:1], ("kubernetes.pod_node_name",)),
                     ("timestamp",)),
    "loki": Fields(("line",), LABELS, ("timestamp",)),
    "elasticsearch": Fields(("message", "log"), (_NAMESPACE, _POD, _CONTAINER, ("host.name", "kubernetes.host")),
                            ("@timestamp", "timestamp")),
}
_DOCKER_KEYS = {"log", "stream", "time", "attrs"}
FORMAT_NAMES = ("auto", "plain", "cri", *FORMATS)

PARTIAL_MARKERS = (b" stdout P ", b" stderr P ")  # how a CRI partial line reads after its timestamp
CRI = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)) (stdout|stderr) ([^ ]*) ?(.*)", re.S)
# A JSON record or batch, not a log line that opens with "[2024-..." or "{": `{"`, `[{`, `[[`.
LOOKS_JSON = re.compile(r'[ \t\ufeff]*(?:\{\s*(?:"|\}$)|\[\s*(?:[\[{]|\]$))')
# The same tests on raw bytes: a line that may be JSON or CRI goes through decode().
_NOT_PLAIN = re.compile(rb'[ \t]*(?:\xef\xbb\xbf)?(?:\{\s*(?:"|\})|\[\s*[\[{\]]|\d{4}-\d\d-\d\dT\S+ std(?:out|err) )')
# Where a JSON record or a CRI line may start inside a buffer: a superset of what decode() reads
# as JSON or CRI (Unicode spaces and BOMs included), but not Python's `{'loss': ..}` that the
# HF Trainer prints at the start of a line, which would send a plain log down the JSON path.
NOT_PLAIN_START = rb"\n[ \t]*(?:\xef\xbb\xbf)*(?:\{[^']|\[(?:[\s\[{\]]|[\x80-\xff]))"
CRI_MARKERS = (b" stdout ", b" stderr ")
_NOT_PLAIN_ANYWHERE = re.compile(NOT_PLAIN_START + b"|" + b"|".join(CRI_MARKERS))
_BULK_ACTIONS = {"index", "create", "update", "delete"}


def fast_parser(name: str | None = None):
    """(name, parse) of the parser for one JSON record in bytes, or (json, None) for the standard
    library's. msgspec (a core dependency) is the default: about 3x the standard library per
    shipper record and the same values (integers of any size). orjson is a little faster
    still, but reads an integer past 64 bits as a float, so a record naming its stream by one
    would name another: only on request (DS_TRIAGE_JSON=orjson, for benchmarks/bench_stream.py).
    Either way a record it refuses (NaN, a lone surrogate, a huge exponent) goes to the
    standard library, which decides as before."""
    name = name or os.environ.get("DS_TRIAGE_JSON") or "msgspec"
    try:
        if name == "msgspec":
            import msgspec

            return name, msgspec.json.Decoder().decode
        if name == "orjson":
            import orjson

            return name, orjson.loads
    except ImportError:
        pass
    return "json", None


_UNRESOLVED = object()  # the parser is imported on the first JSON record (a plain log needs none)


@dataclass
class Decoder:
    """Raw lines (bytes) to records, counting what could not be read."""

    format: str = "auto"
    message_fields: tuple[str, ...] | None = None
    key_fields: tuple[str, ...] | None = None
    stats: dict = field(default_factory=lambda: {"records": 0, "malformed": 0, "no_message": 0})

    def __post_init__(self):
        base = FORMATS.get(self.format, FORMATS["json"])
        keys = tuple((k,) for k in self.key_fields) if self.key_fields else base.keys
        self.fields = Fields(self.message_fields or base.message, keys, base.time)
        self._explicit_keys = self.key_fields is not None
        self._plans: dict[tuple, _Plan | None] = {}  # a record's top-level keys -> where its fields are
        self._loads = _UNRESOLVED if self.format not in ("plain", "cri") else None
        self._msgspec = None  # the msgspec module when it is the parser: shapes get a _Typed reader
        self._typed: _Typed | None = None  # the reader of the shape of the last record read

    def plain_chunk(self, data: bytes, any_marker=None, start: int = 0) -> bool:
        """Every line of data[start:] is a plain log line (so every one is in the stream ()).
        `any_marker(data)`: whether NOT_PLAIN_START or a CRI marker is in it (one Hyperscan pass;
        the whole buffer: a marker in a line read with another chunk only costs the faster path)."""
        if self.format == "plain":
            return True
        if self.format != "auto" or _NOT_PLAIN.match(data, start):
            return False
        if any_marker is not None:
            return not any_marker(data)
        return not _NOT_PLAIN_ANYWHERE.search(data, start)

    def plain_text(self, raw: bytes) -> str | None:
        """The text of a raw line that is a plain log line (no JSON, no CRI prefix), else None."""
        if self.format == "plain" or (self.format == "auto" and not _NOT_PLAIN.match(raw)):
            text = raw.decode("utf-8", errors="replace")
            return text[:-1] if text.endswith("\r") else text
        return None

    def decode(self, raw: bytes) -> list[Record]:
        if raw[:2] == b'{"' and self._loads is not None:
            if self._loads is _UNRESOLVED:
                name, self._loads = fast_parser()
                if name == "msgspec":
                    import msgspec

                    self._msgspec = msgspec
                return self.decode(raw)
            if self._typed is not None:  # a record of the last one's shape, read straight into its fields
                record = self._typed.read(raw, self.format)
                if record is not _OTHER_SHAPE:
                    if record is None:
                        self.stats["no_message"] += 1
                        return []
                    self.stats["records"] += 1
                    return [record]
            try:  # the common case, parsed from the bytes; anything unusual takes the path below
                value = self._loads(raw)
            except ValueError:
                pass
            else:
                return self.from_value(value)
        text = raw.decode("utf-8", errors="replace")
        if text.endswith("\r"):
            text = text[:-1]
        if self.format == "plain":
            return self._count([Record((), text)])
        if self.format == "cri" or (self.format == "auto" and text[:1].isdigit()):
            match = CRI.fullmatch(text)
            if match:
                time, _, tag, body = match.groups()
                return self._count([Record((), body, time, "P" in tag.split(":"))])
            if self.format == "cri":
                return self._malformed()
            return self._count([Record((), text)])
        if self.format == "auto" and not LOOKS_JSON.match(text):
            return self._count([Record((), text)])
        try:
            value = json.loads(text.lstrip("\ufeff"))
        except ValueError:
            self.stats["malformed"] += 1
            # auto: the text stays, as a plain line (a cut JSON line, or a log that only looked like JSON)
            return self._count([Record((), text)]) if self.format == "auto" else []
        return self.from_value(value)

    def from_value(self, value) -> list[Record]:
        """Records of one parsed JSON value (one record, a batch, a store's response)."""
        if type(value) is dict:
            plan = self._plan(value)
            if plan is not None and plan.single:  # one record, its fields found where the last one's were
                if self._msgspec is not None:
                    self._typed = plan.typed(self._msgspec)
                decoded = plan.read(value, self.format)
                if decoded is None:
                    self.stats["no_message"] += 1
                    return []
                self.stats["records"] += 1
                return [decoded]
        if not isinstance(value, (dict, list)):
            return self._malformed()
        out = []
        for record, labels in _expand(value):
            if record is None:
                self.stats["malformed"] += 1
                continue
            decoded = self._record(record, labels)
            if decoded is None:
                self.stats["no_message"] += 1
            else:
                out.append(decoded)
        return self._count(out)

    def _plan(self, obj: dict) -> _Plan | None:
        shape = tuple(obj)
        try:
            return self._plans[shape]
        except KeyError:
            pass
        plan = None if any("." in key for key in shape) else _Plan(self.fields, shape)
        if len(self._plans) < 256:
            self._plans[shape] = plan
        return plan

    def _record(self, obj: dict, labels: dict | None) -> Record | None:
        if labels is None:
            plan = self._plan(obj)
            if plan is not None:
                return plan.read(obj, self.format)
        lookup = _lookup_in(obj)
        text = next((v for name in self.fields.message if isinstance(v := lookup(obj, name), str)), None)
        if text is None:
            return None
        partial = False
        if text.endswith("\n"):
            text = text[:-1]
        elif self.format in ("auto", "json", "docker") and "log" in obj and obj.keys() <= _DOCKER_KEYS:
            partial = True  # Docker json-file: a line longer than 16 KiB, continued in the next record
        when = next((v for name in self.fields.time if (v := lookup(obj, name)) is not None), None)
        return Record(self._key(obj, labels, lookup), text, when, partial)

    def _key(self, obj: dict, labels: dict | None, lookup) -> Key:
        if labels is not None and (not self._explicit_keys or self.fields.keys == LABELS):
            return tuple(sorted((str(k), str(v)) for k, v in labels.items()))
        pairs = []
        for paths in self.fields.keys:
            for name in paths:
                value = find(labels, name) if labels else None
                if value is None:
                    value = lookup(obj, name)
                if value is not None and not isinstance(value, (dict, list)):
                    pairs.append((name, str(value)))
                    break
        return tuple(pairs)

    def _count(self, records: list[Record]) -> list[Record]:
        self.stats["records"] += len(records)
        return records

    def _malformed(self) -> list[Record]:
        self.stats["malformed"] += 1
        return []


_BATCH_KEYS = {"data", "streams", "hits", "_source", "labels"}


class _Plan:
    """Where a record of one shape (its top-level keys, none dotted) keeps its fields: the
    paths of Decoder.fields that can hold anything in it, split once. Reading a record with it
    gives what Decoder._record's search gives, in a few dict lookups."""

    def __init__(self, fields: Fields, shape: tuple):
        present = set(shape)

        def paths(names):  # (name, first part, the other parts)
            split = [(name, name.split(".")) for name in names]
            return tuple((name, parts[0], tuple(parts[1:])) for name, parts in split if parts[0] in present)

        self.message = paths(fields.message)
        self.time = paths(fields.time)
        self.keys = tuple(p for p in (paths(names) for names in fields.keys) if p)
        self.docker = "log" in present and present <= _DOCKER_KEYS
        self.shape = shape
        self._typed: _Typed | None | object = _UNRESOLVED
        # _expand yields such a value as the one record it is
        self.single = not (present & _BATCH_KEYS) and len(shape) != 1

    def read(self, obj: dict, format: str, key: Key | None = None) -> Record | None:
        """The record in `obj`; `key`: its stream's, when the caller read it already."""
        text = when = None
        for _, first, rest in self.message:
            text = obj.get(first)
            for part in rest:
                text = text.get(part) if isinstance(text, dict) else None
            if isinstance(text, str):
                break
        else:
            return None
        for _, first, rest in self.time:
            when = obj.get(first)
            for part in rest:
                when = when.get(part) if isinstance(when, dict) else None
            if when is not None:
                break
        return self.made(text, when, self.key(obj) if key is None else key, format)

    def made(self, text: str, when, key: Key, format: str) -> Record:
        if text.endswith("\n"):
            return Record(key, text[:-1], when, False)
        # Docker json-file: a line longer than 16 KiB, continued in the next record
        return Record(key, text, when, self.docker and format in ("auto", "json", "docker"))

    def key(self, obj: dict) -> Key:
        pairs = []
        for paths in self.keys:
            for name, first, rest in paths:
                value = obj.get(first)
                for part in rest:
                    value = value.get(part) if isinstance(value, dict) else None
                if value is not None and not isinstance(value, (dict, list)):
                    pairs.append((name, str(value)))
                    break
        return tuple(pairs)

    def typed(self, msgspec) -> _Typed | None:
        """The shape's msgspec reader (made on first use), or None where it cannot have one."""
        if self._typed is _UNRESOLVED:
            self._typed = _Typed(self, msgspec)
            if not self._typed.usable:
                self._typed = None
        return self._typed


_OTHER_SHAPE = object()  # _Typed.read: not a record of its shape (or a value only the general path reads)


class _Typed:
    """Records of one shape decoded by msgspec straight into their fields, as _Plan.read reads
    them from the parsed dict: the text and time fields parsed; the fields the stream key comes
    from kept as their raw JSON text, parsed once per distinct text (a pod writes the same
    `kubernetes` object on every line); every other field skipped, validated but not built.
    A record with a field more or less (forbid_unknown_fields, no defaults), or a value msgspec
    refuses, is _OTHER_SHAPE: the general path reads it. ~0.7 us a record against ~3."""

    MAX_KEYS = 4096  # distinct key texts remembered; then forgotten all at once

    def __init__(self, plan: _Plan, msgspec):
        from typing import Any

        self.plan = plan
        valued = {first for _, first, _ in plan.message + plan.time}
        keyed = {first for paths in plan.keys for _, first, _ in paths}
        self.usable = not (valued & keyed)
        attrs = {name: f"f{i}" for i, name in enumerate(plan.shape)}  # JSON names need not be identifiers
        shape = msgspec.defstruct("Shape", [(attrs[n], Any if n in valued else msgspec.Raw) for n in plan.shape],
                                  forbid_unknown_fields=True, rename={a: n for n, a in attrs.items()})
        self._decode = msgspec.json.Decoder(shape).decode
        self._errors = (msgspec.ValidationError, msgspec.DecodeError)
        self._parse = msgspec.json.Decoder().decode
        self._valued = tuple((n, attrs[n]) for n in plan.shape if n in valued)
        self._keyed = tuple((n, attrs[n]) for n in plan.shape if n in keyed)
        self._keys: dict[tuple[bytes, ...], Key] = {}
        # the usual shape: the text in one top-level field, the time in at most one
        simple = len(plan.message) == 1 and len(plan.time) <= 1 and not any(r for _, _, r in plan.message + plan.time)
        self._text = attrs[plan.message[0][1]] if simple else None
        self._time = attrs[plan.time[0][1]] if simple and plan.time else None

    def read(self, raw: bytes, format: str):
        try:
            fields = self._decode(raw)
        except self._errors:
            return _OTHER_SHAPE
        keyed = self._keyed
        if len(keyed) == 1:  # Fluent Bit's, Vector's: one `kubernetes` object
            texts = (bytes(getattr(fields, keyed[0][1])),)
        else:
            texts = tuple(bytes(getattr(fields, attr)) for _, attr in keyed)
        key = self._keys.get(texts)
        if key is None:
            try:
                parts = {name: self._parse(text) for (name, _), text in zip(self._keyed, texts)}
            except self._errors:
                return _OTHER_SHAPE
            key = self.plan.key(parts)
            if len(self._keys) >= self.MAX_KEYS:
                self._keys.clear()
            self._keys[texts] = key
        if self._text is None:
            return self.plan.read({name: getattr(fields, attr) for name, attr in self._valued}, format, key)
        text = getattr(fields, self._text)
        if not isinstance(text, str):
            return None
        return self.plan.made(text, None if self._time is None else getattr(fields, self._time), key, format)


def _expand(value):
    """(record, labels) pairs in a parsed JSON value; labels only for Loki's streams."""
    if isinstance(value, list):
        for item in value:
            if isinstance(item, (dict, list)):
                yield from _expand(item)
            else:
                yield None, None  # a number or a string where a record should be
        return
    data = value.get("data")
    if isinstance(data, dict) and isinstance(data.get("result"), list):  # Loki query_range
        yield from _loki_streams(data["result"])
        return
    if isinstance(value.get("streams"), list):  # Loki push API body
        yield from _loki_streams(value["streams"])
        return
    hits = value.get("hits")
    if isinstance(hits, dict) and isinstance(hits.get("hits"), list):  # Elasticsearch _search response
        yield from _expand(hits["hits"])
        return
    if isinstance(value.get("_source"), dict):  # one Elasticsearch hit
        yield value["_source"], None
        return
    if len(value) == 1 and next(iter(value)) in _BULK_ACTIONS and isinstance(next(iter(value.values())), dict):
        return  # an Elasticsearch bulk action line: its source is the next line
    if isinstance(value.get("labels"), dict) and "line" in value:  # logcli --output jsonl
        yield value, value["labels"]
        return
    yield value, None


def _loki_streams(streams: list):
    for stream in streams:
        if not isinstance(stream, dict) or not isinstance(stream.get("values"), list):
            continue
        labels = stream.get("stream") if isinstance(stream.get("stream"), dict) else {}
        values = [v for v in stream["values"] if isinstance(v, list) and len(v) >= 2 and isinstance(v[1], str)]
        values.sort(key=lambda v: int(v[0]) if str(v[0]).isdigit() else 0)  # Loki answers newest first
        for ts, line, *_ in values:
            yield {"line": line, "timestamp": _nanos_text(ts)}, labels


def _lookup_in(obj: dict):
    """The cheapest lookup that is right for this record: plain nesting, unless a key has a dot."""
    return find if any("." in key for key in obj) else _nested


def _nested(obj, path: str):
    if path in obj:
        return obj[path]
    for part in path.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
        if obj is None:
            return None
    return obj


def find(obj, path: str):
    """A field by dotted path; a key that itself holds dots ("app.kubernetes.io/name") also works."""
    if not isinstance(obj, dict):
        return None
    if path in obj:
        return obj[path]
    head, dot, rest = path.partition(".")
    if not dot:
        return None
    found = find(obj.get(head), rest)  # the usual case: nested objects
    if found is not None:
        return found
    for key in obj:  # a key with dots in it, e.g. Vector's or Elasticsearch's flattened names
        if isinstance(key, str) and "." in key and path.startswith(key + "."):
            found = find(obj[key], path[len(key) + 1:])
            if found is not None:
                return found
    return None


def time_text(value) -> str | None:
    """A record's time as RFC 3339 text; converted only for the incidents that are emitted."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):  # epoch seconds (Fluent Bit's default double), ms or ns
        seconds = value / 1e9 if value > 1e17 else value / 1e3 if value > 1e11 else value
        try:
            return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).isoformat().replace("+00:00", "Z")
        except (OverflowError, OSError, ValueError):
            return str(value)
    return str(value)


def _nanos_text(ts) -> str:
    text = str(ts)
    if not text.isdigit():
        return text
    nanos = int(text)
    try:
        base = dt.datetime.fromtimestamp(nanos // 1_000_000_000, dt.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return text
    return f"{base:%Y-%m-%dT%H:%M:%S}.{nanos % 1_000_000_000:09d}Z"
