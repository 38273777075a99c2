"""NonZero and Range: output sizes computed from tensor values at run time, on both targets,
each module run with several inputs whose outputs have different lengths."""
import numpy as np
import pytest
from onnx import helper

import wasm_runtime
from util import check_model, const, make_model, rand, vinfo


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.bool_])
def test_nonzero(dtype, target):
    m = make_model([helper.make_node("NonZero", ["x"], ["y"])], [vinfo("x", dtype, ["n", "m"])],
                   [vinfo("y", np.int64, None)])
    rng = np.random.default_rng(0)
    some = rand(rng, (5, 7), dtype, -2, 3)
    check_model(m, target, [{"x": some}, {"x": np.zeros((3, 4), dtype)}, {"x": np.ones((2, 3), dtype)},
                            {"x": np.zeros((0, 3), dtype)}])


def test_nonzero_rank3_and_nan(target):
    m = make_model([helper.make_node("NonZero", ["x"], ["y"])], [vinfo("x", np.float32, ["a", 2, "b"])],
                   [vinfo("y", np.int64, None)])
    x = np.zeros((3, 2, 4), np.float32)
    x[0, 1, 2] = np.nan  # numpy counts NaN as non-zero
    x[2, 0, 3] = -1
    check_model(m, target, [{"x": x}, {"x": np.ones((1, 2, 1), np.float32)}])


RANGES = {np.int64: [(0, 10, 3), (10, 0, -3), (5, 5, 1), (0, -4, 1), (-7, 7, 2)],
          np.int32: [(1, 9, 2), (9, -9, -4), (0, 0, 5)],
          np.float32: [(0, 10, 3), (10, 0, -3), (0.5, 2.2, 0.25), (1, 1, 1)]}


@pytest.mark.parametrize("dtype", sorted(RANGES, key=str))
def test_range_runtime_bounds(dtype, target):
    m = make_model([helper.make_node("Range", ["s", "l", "d"], ["y"])],
                   [vinfo(n, dtype, []) for n in "sld"], [vinfo("y", dtype, None)])
    mod = check_model(m, target, [{k: np.array(v, dtype) for k, v in zip("sld", r)} for r in RANGES[dtype]])
    with pytest.raises(wasm_runtime.ModelError, match="delta is 0"):
        mod.run({"s": np.array(0, dtype), "l": np.array(3, dtype), "d": np.array(0, dtype)})


def test_range_symbolic_length(target):
    """Range(2, n + 2, 1) over a symbol: the length is the expression n, not a fresh symbol."""
    m = make_model([helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Add", ["s", "two"], ["lim"]),
                    helper.make_node("Squeeze", ["lim", "ax"], ["l"]), helper.make_node("Range", ["two0", "l", "one"], ["y"])],
                   [vinfo("x", np.float32, ["n"])], [vinfo("y", np.int64, None)],
                   [const("two", np.array([2], np.int64)), const("ax", np.array([0], np.int64)),
                    const("two0", np.array(2, np.int64)), const("one", np.array(1, np.int64))])
    mod = check_model(m, target, [{"x": np.zeros(k, np.float32)} for k in (0, 3, 8)])
    assert mod.outputs[0].shape == ("n",)
