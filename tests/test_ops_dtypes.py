"""Data-movement ops on every dtype (int32, int64, bool besides float32): one chain of
Transpose, Slice, Concat, Gather, Expand, Unsqueeze, Squeeze, Flatten, Reshape, Where, Identity
per dtype, compiled once and run with several bindings."""
import numpy as np
import pytest
from onnx import helper

from util import check_model, const, make_model, rand, vinfo


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.bool_])
def test_movement_chain(dtype, target):
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0, 2]),                 # [4, n, 3]
        helper.make_node("Slice", ["t", "s0", "s1", "ax"], ["s"]),                   # [4, n, 2]
        helper.make_node("Concat", ["s", "s"], ["c"], axis=2),                       # [4, n, 4]
        helper.make_node("Gather", ["c", "gi"], ["g"], axis=0),                      # [2, n, 4]
        helper.make_node("Unsqueeze", ["g", "u_ax"], ["u"]),                         # [1, 2, n, 4]
        helper.make_node("Expand", ["u", "e_shape"], ["e"]),                         # [3, 2, n, 4]
        helper.make_node("Flatten", ["e"], ["f"], axis=2),                           # [6, 4n]
        helper.make_node("Reshape", ["f", "r_shape"], ["r"]),                        # [3, 2, -1]
        helper.make_node("Squeeze", ["u", "u_ax"], ["sq"]),                          # [2, n, 4]
        helper.make_node("Where", ["mask", "sq", "g"], ["w"]),                       # [2, n, 4]
        helper.make_node("Identity", ["w"], ["y"]),
    ]
    inits = [const("s0", np.array([1], np.int64)), const("s1", np.array([3], np.int64)),
             const("ax", np.array([2], np.int64)), const("gi", np.array([3, -4], np.int64)),
             const("u_ax", np.array([0], np.int64)), const("e_shape", np.array([3, 1, 1, 1], np.int64)),
             const("r_shape", np.array([3, 2, -1], np.int64))]
    m = make_model(nodes, [vinfo("x", dtype, ["n", 4, 3]), vinfo("mask", np.bool_, [1, "n", 1])],
                   [vinfo("r", dtype, None), vinfo("y", dtype, None)], inits)
    rng = np.random.default_rng(0)
    check_model(m, target, [{"x": rand(rng, (n, 4, 3), dtype, -50, 50), "mask": rand(rng, (1, n, 1), np.bool_)}
                            for n in (1, 5, 0)])
