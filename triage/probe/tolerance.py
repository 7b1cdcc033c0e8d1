"""Does a master partition match the module weights? Within the weights' own rounding, from their dtype.

After every optimizer step DeepSpeed copies each rank's fp32 master partition into the module's
parameters (`bit16_partitions[rank].copy_(fp32_partition)`), so at a save the module weights are
the master values rounded to the weights' dtype: the same bits when both are fp32, and in
bf16/fp16 within half a unit in the last place (round to nearest even). The tolerance here is one
whole unit in the last place of the weights' dtype at the master value's magnitude (twice the
rounding error, so no healthy value sits on the edge), and the dtype's smallest subnormal near
zero; a value the dtype cannot hold (over fp16's 65504) must be an infinity of the same sign.
"""

from __future__ import annotations

from dataclasses import dataclass

MANTISSA_BITS = {"float64": 52, "float32": 23, "float16": 10, "bfloat16": 7}
SMALLEST = {"float64": 2.0 ** -1074, "float32": 2.0 ** -149, "float16": 2.0 ** -24, "bfloat16": 2.0 ** -133}
LARGEST = {"float64": 1.7976931348623157e308, "float32": 3.4028234663852886e38, "float16": 65504.0,
           "bfloat16": 3.3895313892515355e38}
FLOATS = tuple(MANTISSA_BITS)


def describe(master: str, weights: str) -> str:
    if master == weights:
        return "bit-exact (same dtype)"
    return (f"within one {weights} unit in the last place (relative 2^-{MANTISSA_BITS[weights]}), "
            f"the rounding of {master} to {weights}")


def _np():
    import numpy  # the probe extra's dependency (torch's own); imported only for a --deep comparison

    return numpy


def decode(data: bytes, dtype: str):
    """Little-endian bytes -> a numpy array of float64 (bf16 widened through its fp32 bit pattern)."""
    np = _np()
    if dtype == "bfloat16":
        bits = np.frombuffer(data, dtype="<u2").astype(np.uint32) << 16
        return bits.view("<f4").astype(np.float64)
    code = {"float64": "<f8", "float32": "<f4", "float16": "<f2"}[dtype]
    return np.frombuffer(data, dtype=code).astype(np.float64)


@dataclass
class Tally:
    """What a comparison found over all the pieces fed to it."""
    compared: int = 0
    differ: int = 0
    first: int | None = None  # element index (in the order fed) of the first difference
    max_diff: float = 0.0

    def add(self, master: bytes, master_dtype: str, weights: bytes, weights_dtype: str) -> None:
        count = len(master) // _size(master_dtype)
        if master_dtype == weights_dtype:
            if master != weights:
                self._bad(self._bits_differ(master, weights, master_dtype), master, master_dtype, weights,
                          weights_dtype)
        else:
            np = _np()
            m, w = decode(master, master_dtype), decode(weights, weights_dtype)
            tol = np.maximum(np.abs(m) * 2.0 ** -MANTISSA_BITS[weights_dtype], SMALLEST[weights_dtype])
            with np.errstate(invalid="ignore", over="ignore"):
                ok = np.abs(m - w) <= tol
                ok |= np.isnan(m) & np.isnan(w)
                ok |= np.isinf(w) & (np.abs(m) >= LARGEST[weights_dtype]) & (np.sign(m) == np.sign(w))
                ok |= np.isinf(m) & (m == w)
            if not ok.all():
                self._bad(~ok, master, master_dtype, weights, weights_dtype)
        self.compared += count

    def _bits_differ(self, a: bytes, b: bytes, dtype: str):
        np = _np()
        code = {1: "u1", 2: "<u2", 4: "<u4", 8: "<u8"}[_size(dtype)]
        return np.frombuffer(a, dtype=code) != np.frombuffer(b, dtype=code)

    def _bad(self, mask, master: bytes, master_dtype: str, weights: bytes, weights_dtype: str) -> None:
        np = _np()
        where = np.flatnonzero(mask)
        if not where.size:
            return
        if self.first is None:
            self.first = self.compared + int(where[0])
        self.differ += int(where.size)
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(decode(master, master_dtype)[where] - decode(weights, weights_dtype)[where])
        finite = diff[np.isfinite(diff)]
        self.max_diff = max(self.max_diff, float(finite.max()) if finite.size else float("inf"))


def _size(dtype: str) -> int:
    return {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2}[dtype]
