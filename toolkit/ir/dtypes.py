"""The compiler's dtypes, made from the ABI table (:data:`toolkit.abi.DTYPES`), and the
named sets ops use to say what they accept.

float16 and bfloat16 are stored as 16 bits and computed in float32 by every kernel; the
formats of :data:`STORAGE_ONLY` (float8, float8 e8m0, float4, int4/int2) are stored as
their raw codes and only cast and moved (see toolkit/codegen/minifloat.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes  # noqa: F401 - gives numpy the small dtypes (bfloat16, float8_*, int4...)
import numpy as np

from .. import abi


@dataclass(frozen=True)
class DType:
    name: str
    code: int  # ONNX TensorProto code, also the module ABI's dtype code
    itemsize: int
    kind: str  # "f" float, "i" signed integer, "u" unsigned integer, "b" bool, "s" string

    @property
    def np(self) -> Any:
        return np.object_ if self.kind == "s" else np.dtype(self.name).type

    @property
    def is_string(self) -> bool:
        return self.kind == "s"

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_narrow_float(self) -> bool:
        """A float narrower than float32 (float16, bfloat16, float8, float4): stored as its
        bits, computed as float32."""
        return self.kind == "f" and self.itemsize < 4

    @property
    def is_int(self) -> bool:
        """Signed or unsigned integer (not bool)."""
        return self.kind in "iu"

    @property
    def is_signed(self) -> bool:
        return self.kind == "i"

    @property
    def bits(self) -> int:
        return 8 * self.itemsize

    def __str__(self) -> str:
        return self.name


DTYPES: dict[str, DType] = {d.name: DType(d.name, d.code, d.size, d.kind) for d in abi.DTYPES}
DTYPE_BY_CODE: dict[int, DType] = {d.code: d for d in DTYPES.values()}

FLOAT16, FLOAT32, FLOAT64 = DTYPES["float16"], DTYPES["float32"], DTYPES["float64"]
INT8, INT16, INT32, INT64 = DTYPES["int8"], DTYPES["int16"], DTYPES["int32"], DTYPES["int64"]
UINT8, UINT16, UINT32, UINT64 = DTYPES["uint8"], DTYPES["uint16"], DTYPES["uint32"], DTYPES["uint64"]
BOOL = DTYPES["bool"]
# UTF-8 text (numpy: an object array of str): elements are {address, length} (sw_str), which
# the ops that only move elements (views, Transpose, Gather, Concat, Slice...) carry like
# any other 16 bytes; the string ops read the bytes through the C kernels (sw_lib.h)
STRING = DTYPES["string"]

BFLOAT16 = DTYPES["bfloat16"]
FLOAT8 = tuple(DTYPES[n] for n in ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz"))
# the MX scale format: an exponent alone (no sign, no zero), not one of the float8 kinds
# the quantization ops take
FLOAT8E8M0 = DTYPES["float8_e8m0fnu"]
FLOAT4 = DTYPES["float4_e2m1fn"]
SMALL_INTS = tuple(DTYPES[n] for n in ("int4", "uint4", "int2", "uint2"))
# formats only stored, cast and moved (not computed on by arithmetic ops)
STORAGE_ONLY = FLOAT8 + (FLOAT8E8M0, FLOAT4) + SMALL_INTS

# bfloat16 computes in float32, like float16
FLOATS = (FLOAT16, FLOAT32, FLOAT64, BFLOAT16)
SIGNED = (INT8, INT16, INT32, INT64)
UNSIGNED = (UINT8, UINT16, UINT32, UINT64)  # the 4- and 2-bit integers are STORAGE_ONLY
INTS = SIGNED + UNSIGNED
NUMERIC = FLOATS + INTS
ALL = NUMERIC + (BOOL,)
# every dtype an op that only moves elements takes
MOVABLE = ALL + STORAGE_ONLY + (STRING,)
# what integer tensors holding shapes, indices or axes may be
INDEX = (INT32, INT64)


def dtype_of_numpy(dt) -> DType:
    """The DType of a numpy dtype; KeyError for one the ABI does not carry."""
    dt = np.dtype(dt)
    if dt.kind in "OUS":  # numpy's text: object arrays of str, fixed-width str and bytes
        return STRING
    name = dt.name
    if name not in DTYPES:
        raise KeyError(name)
    return DTYPES[name]


def names(dtypes) -> str:
    return ", ".join(d.name for d in dtypes)
