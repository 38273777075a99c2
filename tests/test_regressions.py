"""Failures found by review and fuzzing, pinned as plain regression tests."""
import numpy as np
import pytest
from onnx import helper

import wasm_runtime
from toolkit.compiler import compile_model
from util import _TMP, assert_outputs_match, build, make_model, reference, vinfo

I64_MIN = np.iinfo(np.int64).min


def test_reshape_target_whose_size_overflows(target):
    """7 * 7905747460161236407 wraps to 1 in int64: it must be an error, not a read out of bounds."""
    m = make_model([helper.make_node("Reshape", ["x", "t"], ["r"]),
                    helper.make_node("Gather", ["r", "i"], ["y"], axis=1)],
                   [vinfo("x", np.float32, ["n"]), vinfo("t", np.int64, [2]), vinfo("i", np.int64, [1])],
                   [vinfo("y", np.float32, None)])
    mod = build(m, target)
    with pytest.raises(wasm_runtime.ModelError, match="overflows"):
        mod.run({"x": np.ones(1, np.float32), "t": np.array([7, 7905747460161236407]),
                 "i": np.array([7905747460161236406])})
    feeds = {"x": np.arange(6, dtype=np.float32), "t": np.array([2, 3]), "i": np.array([2])}
    assert_outputs_match(mod.run(feeds), reference(m, feeds))


def test_huge_allocation_under_a_huge_limit(target):
    """A limit beyond the address space must not let a size truncate to a small buffer."""
    m = make_model([helper.make_node("ConstantOfShape", ["s"], ["z"]),
                    helper.make_node("ReduceSum", ["z"], ["y"], keepdims=0)],
                   [vinfo("s", np.int64, [1])], [vinfo("y", np.float32, None)])
    mod = build(m, target)
    mod.set_memory_limit(1 << 62)
    with pytest.raises(wasm_runtime.ModelError) as e:
        mod.run({"s": np.array([2 ** 40 + 4])})
    assert e.value.status == 3
    feeds = {"s": np.array([5])}
    assert_outputs_match(mod.run(feeds), reference(m, feeds))


def test_range_int64_min_by_minus_one(target):
    """(INT64_MIN - 0) / -1 traps in wasm; the count overflows, so this is out of memory."""
    m = make_model([helper.make_node("Range", ["s", "l", "d"], ["y"])],
                   [vinfo("s", np.int64, []), vinfo("l", np.int64, []), vinfo("d", np.int64, [])],
                   [vinfo("y", np.int64, None)])
    mod = build(m, target)
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'Range_0' \(Range\): cannot allocate \d+ bytes "
                                                      r"for 'y'") as e:
        mod.run({"s": np.array(0), "l": np.array(I64_MIN), "d": np.array(-1)})
    assert e.value.status == 3
    feeds = {"s": np.array(3), "l": np.array(-4), "d": np.array(-1)}
    assert_outputs_match(mod.run(feeds), reference(m, feeds))


def test_buffer_read_last_by_a_shape_op_is_freed(target):
    """y is last read by Shape (which runs no kernel): it is freed before z is allocated."""
    m = make_model([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Shape", ["y"], ["s"]),
                    helper.make_node("ConstantOfShape", ["s"], ["z"])],
                   [vinfo("x", np.float32, ["n"])], [vinfo("z", np.float32, None)])
    mod = build(m, target)
    mod.set_memory_limit(6000)  # y and z are 4000 bytes each: both alive would not fit
    feeds = {"x": np.ones(1000, np.float32)}
    assert_outputs_match(mod.run(feeds), reference(m, feeds))


def test_big_endian_input(target):
    m = make_model([helper.make_node("Neg", ["x"], ["y"])], [vinfo("x", np.float32, ["n"])],
                   [vinfo("y", np.float32, None)])
    mod = build(m, target)
    got = mod.run({"x": np.array([1.5, -2.0], dtype=">f4")})["y"]
    np.testing.assert_array_equal(got, np.array([-1.5, 2.0], np.float32))


def test_generated_symbol_names_never_take_a_declared_one(target):
    """x has an unnamed dim (x_dim0_0 would be generated); y declares 'x_dim0_0' itself."""
    m = make_model([helper.make_node("ReduceSum", ["x"], ["a"], keepdims=0),
                    helper.make_node("ReduceSum", ["y"], ["b"], keepdims=0),
                    helper.make_node("Add", ["a", "b"], ["z"])],
                   [vinfo("x", np.float32, [None]), vinfo("y", np.float32, ["x_dim0_0"])],
                   [vinfo("z", np.float32, None)])
    mod = build(m, target)
    feeds = {"x": np.ones(2, np.float32), "y": np.ones(3, np.float32)}
    assert_outputs_match(mod.run(feeds), reference(m, feeds))


def test_recompiling_a_native_library_in_place():
    """dlopen would hand back the first library loaded from a path; a reload must see the new one."""
    path = _TMP / "inplace.so"
    a = make_model([helper.make_node("Neg", ["x"], ["p"]), helper.make_node("Abs", ["x"], ["q"])],
                   [vinfo("x", np.float32, [2])], [vinfo("p", np.float32, None), vinfo("q", np.float32, None)])
    b = make_model([helper.make_node("Relu", ["x"], ["r"])], [vinfo("x", np.float32, [2])],
                   [vinfo("r", np.float32, None)])
    x = {"x": np.array([-1.0, 2.0], np.float32)}
    compile_model(a, path, target="native")
    assert_outputs_match(wasm_runtime.load(path).run(x), reference(a, x))
    compile_model(b, path, target="native")
    mod = wasm_runtime.load(path)
    assert [o.name for o in mod.outputs] == ["r"]
    assert_outputs_match(mod.run(x), reference(b, x))
