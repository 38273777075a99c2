"""Tensor ops (toolkit/frontend/onnx/ops/tensor.py): Transpose, Gather, Concat, Slice —
against onnx.reference, each module compiled once and run with several bindings of its
symbolic dims."""
from __future__ import annotations

import numpy as np
import pytest

import wasm_runtime
from tests.test_ops_shape import F32, I64, compile_checked, ints, node, outs, shape_of
from util import assert_outputs_match, check_model, const, make_model, rand, reference, vinfo

RNG = np.random.default_rng(11)
INT64_MAX, INT64_MIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min


def test_transpose(target):
    perms = {"rev": None, "swap01": [1, 0, 2], "swap12": [0, 2, 1], "rot": [2, 0, 1]}
    nodes = [node("Transpose", ["x"], [k], **({} if p is None else {"perm": p})) for k, p in perms.items()]
    nodes.append(node("Transpose", ["i"], ["ti"], perm=[1, 0]))
    nodes.append(node("Transpose", ["u"], ["view"], perm=[1, 0, 2]))  # moves only a 1: a view
    model = make_model(nodes, [vinfo("x", F32, ["n", "m", 4]), vinfo("i", I64, ["n", 3]),
                               vinfo("u", F32, ["n", 1, 5])],
                       outs(*perms) + [vinfo("ti", I64, None), vinfo("view", F32, None)])
    feeds = [{"x": rand(RNG, (2, 3, 4)), "i": rand(RNG, (2, 3), I64), "u": rand(RNG, (2, 1, 5))},
             {"x": rand(RNG, (5, 1, 4)), "i": rand(RNG, (5, 3), I64), "u": rand(RNG, (5, 1, 5))}]
    r = compile_checked(model, target, feeds)
    assert shape_of(r, "rot") == "(4, n, m)"
    assert len(r.program.kernels) == 5


def test_transpose_blocks(target):
    """A Transpose that moves the last axis runs by square blocks transposed in registers
    (toolkit/codegen/movement.py _blocked): planes of whole blocks, block rows of a cache
    line's rows (16), the narrower blocks after them (wasm32: 4 rows), and the rows and
    columns after the last whole block one at a time; planes inside other axes, the moved
    axis's output position not first, and 4-byte integers. Sizes below a block, of exactly
    one, and a few over (37 x 50: 2 x 16 + 5 rows, 3 x 16 + 2 columns); an empty plane."""
    nodes = [node("Transpose", ["x"], ["t2"], perm=[1, 0]),
             node("Transpose", ["y"], ["t4"], perm=[0, 3, 1, 2]),
             node("Transpose", ["y"], ["t4b"], perm=[2, 0, 3, 1]),
             node("Transpose", ["i"], ["ti"], perm=[1, 0]),
             node("Transpose", ["u"], ["tu"], perm=[1, 0])]
    model = make_model(nodes, [vinfo("x", F32, ["a", "b"]), vinfo("y", F32, [2, "c", 3, "d"]),
                               vinfo("i", np.int32, ["a", "b"]), vinfo("u", np.uint8, ["a", "b"])],
                       outs("t2", "t4", "t4b", "ti", "tu"))
    feeds = []
    for (a, b_), (c, d) in (((37, 50), (17, 33)), ((16, 16), (16, 4)), ((3, 5), (1, 2)), ((64, 33), (0, 20)),
                            ((0, 7), (20, 0))):
        feeds.append({"x": rand(RNG, (a, b_)), "y": rand(RNG, (2, c, 3, d)), "i": rand(RNG, (a, b_), np.int32, -99, 99),
                      "u": rand(RNG, (a, b_), np.uint8, 0, 255)})
    compile_checked(model, target, feeds)


def test_gather(target):
    nodes = [node("Gather", ["x", "i0"], ["a0"], axis=0),
             node("Gather", ["x", "i1"], ["a1"], axis=1),  # scalar int32 index
             node("Gather", ["x", "i2"], ["a2"], axis=-1),
             node("Gather", ["x", "idx"], ["r1"], axis=1)]  # run-time indices
    inits = [const("i0", np.array([[0, -1], [-2, 1]], I64)), const("i1", np.array(-2, np.int32)),
             const("i2", np.array([2, 0, 2], np.int32))]
    model = make_model(nodes, [vinfo("x", F32, ["n", 5, 3]), vinfo("idx", I64, ["k", 2])],
                       outs("a0", "a1", "a2", "r1"), inits)
    feeds = [{"x": rand(RNG, (2, 5, 3)), "idx": np.array([[0, 4], [-5, -1], [2, 2]], I64)},
             {"x": rand(RNG, (4, 5, 3)), "idx": np.array([[1, -3]], I64)},
             {"x": rand(RNG, (3, 5, 3)), "idx": np.zeros((0, 2), I64)}]
    r = compile_checked(model, target, feeds)
    assert [shape_of(r, k) for k in ("a0", "a1", "a2", "r1")] == \
        ["(2, 2, 5, 3)", "(n, 3)", "(n, 5, 3)", "(n, k, 2, 3)"]


def test_gather_out_of_range(target):
    model = make_model([node("Gather", ["x", "idx"], ["g"], axis=1)],
                       [vinfo("x", F32, ["n", 4]), vinfo("idx", np.int32, ["k"])], outs("g"))
    good = [{"x": rand(RNG, (3, 4)), "idx": np.array([3, -4, 0], np.int32)},
            {"x": rand(RNG, (1, 4)), "idx": np.array([1], np.int32)}]
    m = check_model(model, target, good)
    for bad in (4, -5, 1 << 30):
        with pytest.raises(wasm_runtime.ModelError,
                           match=rf"node 'g' \(Gather\): index {bad} is out of range for axis 1 of size 4"):
            m.run({"x": rand(RNG, (2, 4)), "idx": np.array([0, bad], np.int32)})
    assert_outputs_match(m.run(good[0]), reference(model, good[0]))


def test_concat(target):
    nodes = [node("Concat", ["a", "b", "c"], ["ax1"], axis=1),
             node("Concat", ["a", "d"], ["ax0"], axis=0),
             node("Concat", ["i", "j"], ["ints"], axis=-1),
             node("Concat", ["a", "c"] * 35, ["many"], axis=1)]  # more than one kernel call takes
    model = make_model(nodes, [vinfo("a", F32, ["n", 2]), vinfo("b", F32, ["n", 3]),
                               vinfo("c", F32, ["n", 1]), vinfo("d", F32, ["m", 2]),
                               vinfo("i", I64, [2, "m"]), vinfo("j", I64, [2, 1])],
                       outs("ax1", "ax0") + [vinfo("ints", I64, None)] + outs("many"))

    def feeds(n, m):
        return {"a": rand(RNG, (n, 2)), "b": rand(RNG, (n, 3)), "c": rand(RNG, (n, 1)),
                "d": rand(RNG, (m, 2)), "i": rand(RNG, (2, m), I64), "j": rand(RNG, (2, 1), I64)}

    r = compile_checked(model, target, [feeds(3, 2), feeds(1, 0), feeds(0, 4)])
    # i's m never meets d's m in an op: it is its own dim (m@i)
    assert [shape_of(r, k) for k in ("ax1", "ax0", "ints", "many")] == \
        ["(n, 6)", "(m + n, 2)", "(2, 1 + m@i)", "(n, 105)"]


def test_concat_dims_checked_at_run_time(target):
    model = make_model([node("Concat", ["a", "b"], ["y"], axis=1)],
                       [vinfo("a", F32, ["n", 2]), vinfo("b", F32, ["m", 3])], outs("y"))
    m = check_model(model, target, [{"a": rand(RNG, (2, 2)), "b": rand(RNG, (2, 3))},
                                    {"a": rand(RNG, (5, 2)), "b": rand(RNG, (5, 3))}])
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'y' \(Concat\): dim 0 of input 'b'"):
        m.run({"a": rand(RNG, (2, 2)), "b": rand(RNG, (3, 3))})


def test_slice_constant_bounds(target):
    slices = {  # name: starts, ends, axes, steps
        "tail": ([1], [INT64_MAX], [0], None),
        "rev": ([-1], [INT64_MIN], [1], [-1]),
        "two": ([0, 1], [-1, 100], [2, 0], [2, 1]),
        "neg": ([-3], [-1], [-1], None),
        "back2": ([5], [1], [2], [-2]),
        "first2": ([0, 1], [1, 3], None, None),
        "all": ([0], [INT64_MAX], [1], None),
        "past": ([7], [9], [2], None),
        "before": ([-10], [INT64_MIN], [1], [-1]),  # starts before the first element: empty
    }
    nodes, inits = [], []
    for k, (s, e, a, st) in slices.items():
        ins = ["x", f"{k}_s", f"{k}_e"] + ([f"{k}_a"] if a or st else []) + ([f"{k}_st"] if st else [])
        inits += [ints(f"{k}_s", *s), ints(f"{k}_e", *e)]
        inits += [ints(f"{k}_a", *(a or range(len(s))))] if a or st else []
        inits += [ints(f"{k}_st", *st)] if st else []
        nodes.append(node("Slice", ins, [k]))
    model = make_model(nodes, [vinfo("x", F32, ["n", "m", 6])], outs(*slices), inits)
    feeds = [{"x": rand(RNG, (3, 4, 6))}, {"x": rand(RNG, (1, 5, 6))}, {"x": rand(RNG, (0, 2, 6))}]
    r = compile_checked(model, target, feeds)
    assert shape_of(r, "tail") == "(max(-1 + n, 0), m, 6)"
    assert shape_of(r, "rev") == "(n, m, 6)"
    assert shape_of(r, "all") == "(n, m, 6)"
    assert shape_of(r, "back2") == "(n, m, 2)"


def test_slice_runtime_bounds(target):
    nodes = [node("Slice", ["x", "s", "e", "axes"], ["y"]),
             node("Slice", ["x", "s", "e", "axes", "st"], ["z"])]
    model = make_model(nodes, [vinfo("x", F32, ["n", 3, "m"]), vinfo("s", I64, [2]), vinfo("e", I64, [2]),
                               vinfo("st", I64, [2])], outs("y", "z"), [ints("axes", 0, -1)])
    cases = [((4, 3, 5), [1, -4], [INT64_MAX, -1], [1, 2]),
             ((4, 3, 5), [-1, 10], [INT64_MIN, 0], [-1, -2]),
             ((2, 3, 6), [-100, 2], [100, 2], [3, 1]),
             ((0, 3, 2), [-1, -1], [INT64_MIN, INT64_MIN], [-1, -1]),  # empty dim, negative step
             ((3, 3, 4), [-10, -5], [INT64_MIN, -100], [-1, -2])]  # backward from before the start
    feeds = [{"x": rand(RNG, shape), "s": np.array(s, I64), "e": np.array(e, I64), "st": np.array(st, I64)}
             for shape, s, e, st in cases]
    r = compile_checked(model, target, feeds)
    assert r.graph.values["z"].shape[1] == 3
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'z' \(Slice\): step 1 is 0"):
        wasm_runtime.load(r.path).run({**feeds[0], "st": np.array([1, 0], I64)})
