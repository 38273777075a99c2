"""Natively, from format 3.6, the Python host lets the VM read an input of at least
IN_PLACE_BYTES where the caller's array holds it (the io table entry's data pointer), instead
of copying it into the module's input buffer. The input is never written; a small input, an
unaligned one and every wasm32 input are still copied; a non-contiguous one is read from the
host's contiguous copy. Whether an input was copied shows in the host's table of the
module's input buffers (Model._buffers), which a copy fills. Results are checked against
onnx.reference."""
import numpy as np
import pytest
from onnx import helper

import wasm_runtime
from util import build, make_model, reference, vinfo

N = helper.make_node
F32 = np.float32
BIG = wasm_runtime.IN_PLACE_BYTES // 4  # floats


def _model():
    """y = relu(a) + b, z = a (an output that is an input, read back before the call returns)."""
    return make_model([N("Relu", ["a"], ["r"]), N("Add", ["r", "b"], ["y"]), N("Identity", ["a"], ["z"])],
                      [vinfo("a", F32, ["n"]), vinfo("b", F32, ["n"])], [vinfo("y", F32, None), vinfo("z", F32, None)])


def _check(m, a, b):
    a0, b0 = a.copy(), b.copy()
    out = m.run({"a": a, "b": b})
    want = reference(_model(), {"a": np.ascontiguousarray(a), "b": np.ascontiguousarray(b)})
    np.testing.assert_array_equal(out["y"], want["y"])
    np.testing.assert_array_equal(out["z"], want["z"])
    np.testing.assert_array_equal(a, a0)  # never written
    np.testing.assert_array_equal(b, b0)
    out["z"][:] = 7  # the output is the host's own array, not the caller's input
    np.testing.assert_array_equal(a, a0)


@pytest.mark.parametrize("target", ["native", "wasm32"])
def test_large_inputs_read_in_place_natively(target):
    m = build(_model(), target)
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-1, 1, BIG).astype(F32), rng.uniform(-1, 1, BIG).astype(F32)
    _check(m, a, b)
    copied = set(m._buffers)
    assert copied == ({0, 1} if target == "wasm32" else set())
    # the same module: a small input copied, a large one in place, then both small
    _check(m, a, rng.uniform(-1, 1, BIG).astype(F32))
    small = rng.uniform(-1, 1, 100).astype(F32)
    _check(m, small, small * 2)
    assert set(m._buffers) == {0, 1}


def test_non_contiguous_and_unaligned_inputs_natively():
    m = build(_model(), "native")
    rng = np.random.default_rng(1)
    # every other element: the host reads a contiguous copy of it in place
    strided = rng.uniform(-1, 1, 2 * BIG).astype(F32)[::2]
    _check(m, strided, rng.uniform(-1, 1, BIG).astype(F32))
    assert not m._buffers
    # float32s one byte off their alignment: copied into the module's buffer
    raw = np.zeros(4 * BIG + 1, np.uint8)
    unaligned = np.frombuffer(raw.data, dtype=F32, count=BIG, offset=1)
    assert not unaligned.flags.aligned
    _check(m, unaligned, rng.uniform(-1, 1, BIG).astype(F32))
    assert set(m._buffers) == {0}


def test_a_string_input_with_a_data_pointer_is_refused():
    """The VM reads a string input only from its buffer, whose bounds it checks each element's
    bytes against: an io table entry pointing elsewhere fails, naming the input."""
    model = make_model([N("Identity", ["s"], ["t"])], [vinfo("s", object, [2])], [vinfo("t", object, None)])
    m = build(model, "native")
    assert m.run({"s": np.array(["a", "bc"], dtype=object)})["t"].tolist() == ["a", "bc"]
    words = np.zeros(8, np.int64)  # somewhere of the host's own
    b = m._b
    entry = m._tensor.pack(words.ctypes.data, 8, 1, 2, *([0] * 7))  # dtype 8: string
    b.write(m._io, entry)
    status = b.call("sw_run_io", m._ctx)
    assert status == wasm_runtime.STATUS["INVALID_INPUT"]
    assert "input 's': a string input must be in its buffer" in b.last_error(m._ctx)


def test_an_input_read_in_place_is_forgotten_after_the_call():
    """The VM holds the host's address for one sw_run_io only: a bare sw_run afterwards fails,
    naming the input, instead of reading memory the host may have freed; the model still runs."""
    m = build(_model(), "native")
    rng = np.random.default_rng(2)
    a, b = rng.uniform(-1, 1, BIG).astype(F32), rng.uniform(-1, 1, BIG).astype(F32)
    _check(m, a, b)
    assert not m._buffers  # both read in place
    assert m._b.call("sw_run", m._ctx) == wasm_runtime.STATUS["INVALID_INPUT"]
    assert m._b.last_error(m._ctx) == "input 'a' was not set"
    _check(m, a, b)
