"""Failures found by review and fuzzing, pinned as plain regression tests."""
import numpy as np
import onnx
import pytest
from onnx import helper

import wasm_runtime
from toolkit.compiler import compile_model
from util import _TMP, assert_outputs_match, build, const, lower_model, make_model, ort_reference, reference, vinfo

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


def test_a_value_read_only_by_shape_is_never_computed(target):
    """y is read only by Shape, whose result is known at compile time (n): Relu never runs and
    y is never allocated (it used to be computed, then freed)."""
    m = make_model([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Shape", ["y"], ["s"]),
                    helper.make_node("ConstantOfShape", ["s"], ["z"])],
                   [vinfo("x", np.float32, ["n"])], [vinfo("z", np.float32, None)])
    _, prog, _ = lower_model(m, target)
    assert [k.name for k in prog.kernels] == ["k0_fill_float32"]
    mod = build(m, target)
    mod.set_memory_limit(9000)  # x's buffer and z, 4000 bytes each; y as well would not fit
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


# ----------------------------------------------------------------------------- issue 6: wrong results found by fuzzing


def test_reshape_zero_copies_the_input_dim_for_a_symbolic_target(target):
    """Reshape(x, Concat(Shape(x)[1:2], [-1])) on x: (3, 0): the target's 0 copies x's dim 0,
    giving (3, 0) (onnxruntime and onnx.reference agree); it used to give (0, 3)."""
    m = make_model([helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Slice", ["s", "a", "b"], ["s1"]),
                    helper.make_node("Concat", ["s1", "m1"], ["t"], axis=0),
                    helper.make_node("Reshape", ["x", "t"], ["y"])],
                   [vinfo("x", np.float32, ["p", "q"])], [vinfo("y", np.float32, None)],
                   [const("a", np.array([1])), const("b", np.array([2])), const("m1", np.array([-1]))])
    mod = build(m, target)
    for shape in ((3, 0), (0, 3), (2, 3), (4, 1)):
        feeds = {"x": np.arange(np.prod(shape), dtype=np.float32).reshape(shape)}
        got = mod.run(feeds)
        assert_outputs_match(got, ort_reference(m, feeds))
        assert_outputs_match(got, reference(m, feeds))
    # (0, 0): the -1 cannot be inferred next to the copied 0 (both references refuse it too)
    with pytest.raises(wasm_runtime.ModelError, match=r"the -1 cannot be inferred when the other dims' product is 0: "
                                                      r"\(q or p\) = 0"):
        mod.run({"x": np.zeros((0, 0), np.float32)})


def test_reshape_zero_past_the_input_rank_is_an_error(target):
    """A symbolic target element at a position the input lacks: 0 there has no dim to copy."""
    m = make_model([helper.make_node("Shape", ["x"], ["s"]),
                    helper.make_node("Concat", ["s", "s"], ["t"], axis=0),
                    helper.make_node("Reshape", ["x", "t"], ["y"], name="r")],
                   [vinfo("x", np.float32, ["p"])], [vinfo("y", np.float32, None)])
    mod = build(m, target)
    feeds = {"x": np.ones(1, np.float32)}
    assert_outputs_match(mod.run(feeds), reference(m, feeds))
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'r' \(Reshape\): target dim 1 .*p = 0 is less than 1"):
        mod.run({"x": np.ones(0, np.float32)})


@pytest.mark.parametrize("start,limit,delta", [
    (I64_MIN, 2 ** 40, 2 ** 40),                     # limit - start overflows int64
    (2 ** 62, -(2 ** 62), -(2 ** 55)),
    (I64_MIN + 5, I64_MIN + 100, 7),
    (np.iinfo(np.int64).max, I64_MIN, I64_MIN),      # a step of INT64_MIN
    (np.iinfo(np.int64).max - 3, np.iinfo(np.int64).max, 1),
    (-5, 5, np.iinfo(np.int64).max),
])
def test_range_lengths_are_exact_at_the_int64_extremes(start, limit, delta, target):
    """The count is exact for every int64 start, limit and delta (it was one short when
    limit - start overflowed). Reference: Python's own range."""
    m = make_model([helper.make_node("Range", ["s", "l", "d"], ["y"])],
                   [vinfo("s", np.int64, []), vinfo("l", np.int64, []), vinfo("d", np.int64, [])],
                   [vinfo("y", np.int64, None)])
    y = build(m, target).run({"s": np.array(start), "l": np.array(limit), "d": np.array(delta)})["y"]
    want = range(int(start), int(limit), int(delta))
    assert y.shape == (len(want),)
    np.testing.assert_array_equal(y[:5], np.array(list(want[:5]), np.int64))
    np.testing.assert_array_equal(y[-3:], np.array(list(want[-3:]), np.int64))


@pytest.mark.parametrize("attr,value", [("value_float", 1.5), ("value_int", 7), ("value_floats", [1.5, 2.5]),
                                        ("value_ints", [3])])
def test_constant_attributes_keep_their_rank(attr, value, target):
    """Constant(value_float=1.5) is a scalar, shape (); it came out (1,)."""
    m = make_model([helper.make_node("Constant", [], ["c"], **{attr: value})], [vinfo("x", np.float32, [1])],
                   [vinfo("c", np.float32 if "float" in attr else np.int64, None)])
    assert_outputs_match(build(m, target).run({"x": np.ones(1, np.float32)}), reference(m, {}))


def test_reshape_resolved_at_run_time_leaves_its_target_alone(target):
    """Reshape's run-time builtin resolves 0 and -1 in place; its target here is the constant
    0 and a dim (m - 1, which may be negative, so resolved at run time). Resolved in the shared
    slots, the constant 0 became the batch: the target came out [n, m - 1] and every later 0
    with it (shared/regressions/reshape_zero_trunk, a Paddle2ONNX recognizer)."""
    m = make_model([helper.make_node("Slice", ["x", "one", "big", "one"], ["y"]),
                    helper.make_node("Shape", ["x"], ["s"]),
                    helper.make_node("Slice", ["s", "one", "two"], ["s1"]),
                    helper.make_node("Sub", ["s1", "one"], ["m1"]),
                    helper.make_node("Cast", ["zero32"], ["zero64"], to=onnx.TensorProto.INT64),
                    helper.make_node("Concat", ["zero64", "m1"], ["t"], axis=0),
                    helper.make_node("Reshape", ["y", "t"], ["r"]),
                    helper.make_node("Shape", ["r"], ["rs"])],
                   [vinfo("x", np.float32, ["n", "m"])],
                   [vinfo("t", np.int64, None), vinfo("r", np.float32, None), vinfo("rs", np.int64, None)],
                   [const("one", np.array([1])), const("two", np.array([2])), const("big", np.array([1 << 40])),
                    const("zero32", np.array([0], np.int32))])
    mod = build(m, target)
    for n, k in ((1, 5), (3, 4)):
        feeds = {"x": np.random.default_rng(n).random((n, k), dtype=np.float32)}
        assert_outputs_match(mod.run(feeds), reference(m, feeds))


def test_an_index_out_of_range_is_rejected_when_the_output_is_empty(target):
    """Kernels return at once when their outputs are empty (an input of (2**40, 0) must not
    walk its rows); one that rejects inputs still checks a non-empty index, as onnxruntime and
    onnx.reference do (the run-time fuzz campaign caught the early return accepting it)."""
    m = make_model([helper.make_node("Gather", ["x", "i"], ["y"], axis=0)],
                   [vinfo("x", np.float32, ["n", "k"]), vinfo("i", np.int64, ["m"])], [vinfo("y", np.float32, None)])
    mod = build(m, target)
    with pytest.raises(wasm_runtime.ModelError) as e:
        mod.run({"x": np.zeros((3, 0), np.float32), "i": np.array([7])})
    assert e.value.status == 2 and "7" in str(e.value)
    feeds = {"x": np.zeros((3, 0), np.float32), "i": np.array([2, -1])}
    assert_outputs_match(mod.run(feeds), reference(m, feeds))
