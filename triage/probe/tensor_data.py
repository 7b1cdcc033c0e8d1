"""Tensor bytes of a torch.save archive, read without torch and without running its pickle.

The safe reader (safe_pickle) describes each tensor as a TensorMeta: shape, dtype, stride, its
storage's key and its element offset there. The storage's bytes are the zip record
`<prefix>/data/<key>`; torch writes those records stored (uncompressed), so a tensor's bytes are
a byte range of the file, read here with os.pread in pieces of at most CHUNK bytes, after
checking that the range lies inside its record. Little-endian archives only (the `byteorder`
record; torch writes `little` on every platform it ships for).

An Archive also keeps a running CRC-32 of each record it is read in order from the first byte:
`finish()` reads what each record has left (a byte already read is not read again, unless a
caller went back) and compares every CRC with the zip directory's. One streaming pass over a
shard thus serves its tensor data and verifies the whole file (integrity's --deep check).
"""

from __future__ import annotations

import os
import zipfile
import zlib
from dataclasses import dataclass

from triage.probe import zipcheck
from triage.probe.confine import open_regular
from triage.probe.safe_pickle import ITEM_SIZE, TensorMeta, pickle_record

CHUNK = 1 << 20


class TensorError(ValueError):
    """A tensor (or record) that cannot be read as the pickle describes it."""


@dataclass(frozen=True)
class Span:
    """A contiguous tensor's bytes: `numel` elements of `dtype` from byte `start` of `record`."""
    record: str
    start: int
    numel: int
    dtype: str

    @property
    def itemsize(self) -> int:
        return ITEM_SIZE[self.dtype]

    @property
    def nbytes(self) -> int:
        return self.numel * self.itemsize


def contiguous(shape: tuple, stride: tuple | None) -> bool:
    if stride is None:
        return True  # the pickle did not say: torch.save always records it, so only hand-made metas
    expected, step = [], 1
    for size in reversed(shape):
        expected.append(step)
        step *= size
    return all(s == e for s, e, size in zip(stride, reversed(expected), shape) if size != 1)


class Archive:
    """One `.pt` file opened for its tensor data (read-only, a regular file only)."""

    def __init__(self, path: str):
        self.path = str(path)
        self._file = open_regular(self.path)
        try:
            self._fd = self._file.fileno()
            self.size = os.fstat(self._fd).st_size
            self._zip = zipcheck.open_zip(self._file)  # a record declaring more than any torch archive: refused
            self.infos = {i.filename: i for i in self._zip.infolist()}
            self.prefix = pickle_record(self._zip).rpartition("/")[0]
        except Exception:
            self._file.close()
            raise
        self._starts: dict[str, int] = {}
        self._crc: dict[str, list[int]] = {}  # record -> [next offset in order (-1: read out of order), crc]
        self.bytes_read = 0
        order = self.infos.get(f"{self.prefix}/byteorder")
        if order is not None and order.file_size <= 16:
            text = self.read(order.filename, 0, order.file_size).decode("ascii", "replace").strip()
            if text != "little":
                raise TensorError(f"{os.path.basename(self.path)}: byte order {text!r}: only little-endian is read")

    def __enter__(self) -> "Archive":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._zip.close()
        self._file.close()

    # ------------------------------------------------------------ tensors

    def span(self, tensor: TensorMeta) -> Span:
        """Where `tensor`'s bytes are; TensorError when they are not a readable contiguous range."""
        if not isinstance(tensor, TensorMeta) or tensor.storage_key is None:
            raise TensorError(f"not a tensor with a storage: {tensor!r}")
        if tensor.dtype not in ITEM_SIZE:
            raise TensorError(f"tensor dtype {tensor.dtype} is not read")
        if not contiguous(tensor.shape, tensor.stride):
            raise TensorError(f"tensor {list(tensor.shape)} with stride {list(tensor.stride)} is not contiguous")
        record = f"{self.prefix}/data/{tensor.storage_key}" if self.prefix else f"data/{tensor.storage_key}"
        info = self.infos.get(record)
        if info is None:
            raise TensorError(f"no record {record} for the tensor's storage")
        span = Span(record, tensor.offset * ITEM_SIZE[tensor.dtype], tensor.numel, tensor.dtype)
        if tensor.offset < 0 or span.start + span.nbytes > info.file_size:
            raise TensorError(f"tensor {list(tensor.shape)} at element {tensor.offset} runs past its record "
                              f"{record} ({info.file_size} bytes)")
        return span

    def scalar(self, tensor: TensorMeta) -> float | int:
        """A one-element tensor's value (an optimizer's `step`, say)."""
        import struct

        span = self.span(tensor)
        if span.numel != 1:
            raise TensorError(f"tensor {list(tensor.shape)} is not a scalar")
        codes = {"float32": "<f", "float64": "<d", "int64": "<q", "int32": "<i", "float16": "<e"}
        if span.dtype not in codes:
            raise TensorError(f"scalar of dtype {span.dtype} is not read")
        value = struct.unpack(codes[span.dtype], self.read(span.record, span.start, span.nbytes))[0]
        return int(value) if float(value).is_integer() else value

    def cursor(self, span: Span) -> "Cursor":
        return Cursor(self, span)

    # ------------------------------------------------------------ records

    def read(self, record: str, offset: int, n: int) -> bytes:
        """n bytes from `offset` of a stored record; a forward gap since the last read of that record
        is read too (once), so that its CRC stays whole."""
        state = self._crc.setdefault(record, [0, 0])
        while 0 <= state[0] < offset:
            self._pread(record, state[0], min(CHUNK, offset - state[0]), state)
        return self._pread(record, offset, n, state)

    def _pread(self, record: str, offset: int, n: int, state: list[int]) -> bytes:
        start = self._start(record)
        out = os.pread(self._fd, n, start + offset) if n <= CHUNK else b""  # one read, no copy: the usual case
        if len(out) < n:
            out = bytearray(out)
            while len(out) < n:
                piece = os.pread(self._fd, min(CHUNK, n - len(out)), start + offset + len(out))
                if not piece:
                    raise TensorError(f"{record}: the file ends inside the record")
                out += piece
            out = bytes(out)
        self.bytes_read += n
        if state[0] == offset:
            state[0], state[1] = offset + n, zlib.crc32(out, state[1])
        elif state[0] >= 0:
            state[0] = -1  # read out of order: finish() reads it again for its CRC
        return out

    def _start(self, record: str) -> int:
        if record not in self._starts:
            info = self.infos[record]
            if info.compress_type != zipfile.ZIP_STORED:
                raise TensorError(f"{record} is compressed; torch writes tensor records stored")
            start = zipcheck.data_start(self._file, info, self.size)
            if isinstance(start, str):
                raise TensorError(start)
            self._starts[record] = start
        return self._starts[record]

    def finish(self) -> str | None:
        """Read what is left of every record and check its CRC-32; the first problem, or None."""
        for name, info in self.infos.items():
            try:
                if info.compress_type != zipfile.ZIP_STORED:
                    with self._zip.open(info) as member:
                        while piece := member.read(CHUNK):
                            self.bytes_read += len(piece)
                    continue
                state = self._crc.get(name)
                if state is None or state[0] < 0:
                    state = self._crc[name] = [0, 0]
                while state[0] < info.file_size:
                    self._pread(name, state[0], min(CHUNK, info.file_size - state[0]), state)
                if state[1] != info.CRC:
                    return f"record {name}: Bad CRC-32 for file {name!r}"
            except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
                return f"record {name}: {exc}"
        return None


class Cursor:
    """Reads one span front to back: `take(n)` the next n elements' bytes, `skip(n)` past them."""

    def __init__(self, archive: Archive, span: Span):
        self.archive, self.span, self.pos = archive, span, 0

    def take(self, count: int) -> bytes:
        count = min(count, self.span.numel - self.pos)
        size = self.span.itemsize
        data = self.archive.read(self.span.record, self.span.start + self.pos * size, count * size)
        self.pos += count
        return data

    def skip(self, count: int) -> None:
        left = min(count, self.span.numel - self.pos)
        per = max(1, CHUNK // self.span.itemsize)
        while left > 0:
            left -= len(self.take(min(per, left))) // self.span.itemsize
