"""Is a `.pt` file a whole zip archive? Structure only (header, directory, records); CRC on demand.

The cheap check reads the first and last bytes, the central directory at the end, and the
30-byte local header of every record: a few kilobytes, whatever the file's size. `deep=True`
also reads every record through and checks its CRC-32 (the whole file, in 1 MiB pieces).

Every reader of a shard's zip opens it with `open_zip`: a record whose declared size no torch archive
has (over MAX_RECORD_BYTES, stored in fewer bytes than it declares, or inflating more than deflate
can) and a central directory too large to hold are refused by what they declare, before a byte of
them is read (a sparse file can declare 100 GB in 600 KB of disk).
"""

from __future__ import annotations

import os
import struct
import zipfile
from dataclasses import dataclass, field

from triage.probe.confine import open_regular

LOCAL_HEADER = b"PK\x03\x04"
LOCAL_HEADER_SIZE = 30
# torch's legacy (pre-1.6, non-zip) format: a pickle of this magic number first.
LEGACY_MAGIC = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19"
LFS_POINTER = b"version https://git-lfs"
CHUNK = 1 << 20
MAX_DIRECTORY_BYTES = 16 << 20  # zipfile reads the central directory whole: ~100 bytes a record
MAX_RECORD_BYTES = 64 << 30  # no DeepSpeed storage is this large (16 billion fp32 elements in one tensor)
MAX_RATIO = 1100  # deflate expands at most ~1032-fold; torch writes every record stored anyway


class DeclaredOverCap(zipfile.BadZipFile):
    """The archive declares a record or directory no torch archive has: refused, nothing of it read."""


def open_zip(f) -> zipfile.ZipFile:
    """zipfile.ZipFile(f) once the sizes the archive declares are checked (DeclaredOverCap if not)."""
    end = zipfile._EndRecData(f)  # what ZipFile itself reads first: the end record, at most 64 KiB
    if end and end[zipfile._ECD_SIZE] > MAX_DIRECTORY_BYTES:
        raise DeclaredOverCap(f"its zip directory declares {end[zipfile._ECD_SIZE]} bytes, over the "
                              f"{MAX_DIRECTORY_BYTES} read: refused unread")
    zf = zipfile.ZipFile(f)
    for info in zf.infolist():
        problem = declared(info)
        if problem:
            zf.close()
            raise DeclaredOverCap(problem)
    return zf


def declared(info: zipfile.ZipInfo) -> str | None:
    """What is impossible in a record's declared sizes (None: nothing), judged without reading it."""
    name, size, packed = info.filename, info.file_size, info.compress_size
    if size > MAX_RECORD_BYTES:
        return (f"record {name} declares {size} bytes, over the {MAX_RECORD_BYTES >> 30} GiB a record may hold: "
                "refused unread")
    if info.compress_type == zipfile.ZIP_STORED and packed != size:
        return f"record {name} is stored but declares {size} bytes in {packed}: refused unread"
    if info.compress_type != zipfile.ZIP_STORED and size > MAX_RATIO * max(packed, 1):
        return (f"record {name} declares {size} bytes from {packed} compressed, more than deflate expands: "
                "refused unread")
    return None


@dataclass
class ZipCheck:
    path: str
    size: int = 0
    problem: str | None = None  # a signal: empty, zeroed, garbage, lfs_pointer, truncated, bad_zip, crc_mismatch
    detail: str = ""
    legacy: bool = False  # torch's old non-zip format: not damaged, but not readable here
    records: dict[str, int] = field(default_factory=dict)  # record name -> uncompressed size
    unreadable: str | None = None  # could not open/read the file at all (permission, I/O)

    @property
    def ok(self) -> bool:
        return self.problem is None and self.unreadable is None and not self.legacy


def check(path: str, deep: bool = False, on_read=None) -> ZipCheck:
    """on_read(n): called with the bytes of each piece read through (deep only), for a progress meter."""
    result = ZipCheck(path=str(path))
    try:
        with open_regular(path) as f:  # never a FIFO or device
            result.size = os.fstat(f.fileno()).st_size
            _check_open(f, result, deep, on_read)
    except OSError as exc:
        result.unreadable = f"{type(exc).__name__}: {exc.strerror or exc}"
    return result


def _check_open(f, result: ZipCheck, deep: bool, on_read=None) -> None:
    size = result.size
    if size == 0:
        result.problem, result.detail = "empty", "0 bytes"
        return
    head = f.read(64)
    f.seek(max(0, size - 64))
    tail = f.read(64)
    if not head.startswith(LOCAL_HEADER):
        if not head.strip(b"\0") and not tail.strip(b"\0"):
            result.problem, result.detail = "zeroed", f"{size} bytes, all zero at the start and the end"
        elif head.startswith(LFS_POINTER):
            result.problem, result.detail = "lfs_pointer", "a Git LFS pointer file, not the data (git lfs pull)"
        elif head.startswith(LEGACY_MAGIC):
            result.legacy, result.detail = True, "torch's legacy (non-zip) serialization format"
        else:
            result.problem = "garbage"
            result.detail = f"not a zip archive (starts with {head[:8].hex(' ')}, a zip starts with 50 4b 03 04)"
        return
    f.seek(0)
    try:
        zf = open_zip(f)
    except DeclaredOverCap as exc:
        result.problem, result.detail = "bad_zip", str(exc)
        return
    except zipfile.BadZipFile as exc:
        result.problem = "truncated"
        result.detail = (f"starts as a zip but has no central directory at its end ({size} bytes): "
                         f"cut short, e.g. a save killed mid-write or an incomplete copy ({exc})")
        return
    except (ValueError, OverflowError, EOFError) as exc:
        result.problem, result.detail = "bad_zip", f"zip directory unreadable: {exc}"
        return
    with zf:
        infos = zf.infolist()
        if not infos:
            result.problem, result.detail = "bad_zip", "the zip archive has no records"
            return
        for info in infos:
            result.records[info.filename] = info.file_size
            problem = _check_record(f, info, size)
            if problem:
                result.problem, result.detail = "bad_zip", problem
                return
        if deep:
            for info in infos:
                try:
                    with zf.open(info) as member:
                        while piece := member.read(CHUNK):
                            if on_read is not None:
                                on_read(len(piece))
                except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
                    result.problem, result.detail = "crc_mismatch", f"record {info.filename}: {exc}"
                    return


def _check_record(f, info: zipfile.ZipInfo, size: int) -> str | None:
    start = data_start(f, info, size)
    return start if isinstance(start, str) else None


def data_start(f, info: zipfile.ZipInfo, size: int) -> int | str:
    """The file offset of the record's first data byte (after its local header), or what is wrong:
    the header missing or the record running past the end of the file."""
    if info.header_offset + LOCAL_HEADER_SIZE > size:
        return f"record {info.filename} starts past the end of the file"
    f.seek(info.header_offset)
    header = f.read(LOCAL_HEADER_SIZE)
    if len(header) < LOCAL_HEADER_SIZE or not header.startswith(LOCAL_HEADER):
        return f"record {info.filename}: no local header at offset {info.header_offset} (overwritten?)"
    name_len, extra_len = struct.unpack("<HH", header[26:30])
    start = info.header_offset + LOCAL_HEADER_SIZE + name_len + extra_len
    if start + info.compress_size > size:
        return f"record {info.filename} ends at byte {start + info.compress_size}, past the end of the file ({size} bytes)"
    return start
