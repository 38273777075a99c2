"""wasm_runtime._copy: the hosts' copies of inputs into a module's memory and of outputs out
of it, through memoryviews of the bytes at an address. Every dtype the ABI carries, 0-d and
empty arrays, and an array whose format a memoryview cannot cast (the byte view it falls
back to)."""
import ctypes

import numpy as np
import pytest

from wasm_runtime._copy import as_bytes, bytes_at, copy_in, copy_out

DTYPES = ["float32", "float64", "float16", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
          "uint64", "bool", "complex64", "complex128"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (3, 0), (1,), (3, 5), (2, 3, 4)])
def test_round_trip(dtype, shape):
    rng = np.random.default_rng(0)
    arr = (rng.standard_normal(shape) * 50).astype(dtype)
    if np.dtype(dtype).kind == "c":
        arr = arr + 1j * arr[::-1].astype(dtype) if arr.ndim else arr
    buf = ctypes.create_string_buffer(max(1, arr.nbytes) + 16)
    addr = ctypes.addressof(buf) + 8  # not 16-byte aligned
    copy_in(addr, arr)
    assert buf.raw[8:8 + arr.nbytes] == arr.tobytes()
    out = copy_out(addr, shape, np.dtype(dtype), arr.nbytes)
    assert out.shape == shape and out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out, arr)
    # the result owns its bytes: the memory it came from changes, it does not
    assert out.flags.writeable and out.flags.c_contiguous
    ctypes.memset(addr, 0x7F, arr.nbytes)
    np.testing.assert_array_equal(out, arr)


def test_uncastable_format_falls_back_to_bytes():
    arr = np.array(["2026-11-26", "1970-01-01"], dtype="datetime64[s]")
    with pytest.raises((TypeError, ValueError, NotImplementedError)):
        memoryview(arr).cast("B")
    assert bytes(as_bytes(arr)) == arr.tobytes()
    buf = ctypes.create_string_buffer(arr.nbytes)
    copy_in(ctypes.addressof(buf), arr)
    assert buf.raw == arr.tobytes()


def test_bytes_at_writes_through():
    buf = ctypes.create_string_buffer(8)
    view = bytes_at(ctypes.addressof(buf) + 2, 3)
    view[:] = b"abc"
    assert buf.raw == b"\0\0abc\0\0\0" and len(view) == 3
