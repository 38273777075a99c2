"""Every dtype the ABI carries (float16/32/64, int8/16/32/64, uint8/16/32/64, bool) through
elementwise ops, Cast and the data-movement ops, on both targets, each from one module
run with several bindings, against onnx.reference. float16 is stored as binary16 and
computed in float32, which is what numpy does for it too, so results match bit for bit."""
import numpy as np
import pytest
from onnx import helper

from util import check_model, const, make_model, vinfo

FLOATS = [np.float16, np.float32, np.float64]
SIGNED = [np.int8, np.int16, np.int32, np.int64]
UNSIGNED = [np.uint8, np.uint16, np.uint32, np.uint64]
NUMERIC = FLOATS + SIGNED + UNSIGNED
ALL = NUMERIC + [np.bool_]


def sample(rng, shape, dtype, nonzero=False):
    """Values every dtype holds exactly, with negatives for signed ones."""
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    if dt.kind == "f":
        v = rng.uniform(-50, 50, shape)
        if nonzero:
            v = np.where(np.abs(v) < 0.5, 7.25, v)
        return v.astype(dt)
    lo = 0 if dt.kind == "u" else -100
    v = rng.integers(lo, 100, shape)
    if nonzero:
        v[v == 0] = 3
    return v.astype(dt)


def _name(dtype) -> str:
    return np.dtype(dtype).name


@pytest.mark.parametrize("dtype", NUMERIC, ids=_name)
def test_elementwise(dtype, target):
    """Arithmetic, comparisons and Where over a [n, 5] and b [1, 5] of one dtype."""
    ops = ["Add", "Sub", "Mul", "Div", "Max", "Min"]
    nodes = [helper.make_node(op, ["a", "b"], [op.lower()]) for op in ops]
    nodes += [helper.make_node("Abs", ["a"], ["abs"])]
    unary = ["Neg", "Relu"] if np.dtype(dtype).kind != "u" else []
    nodes += [helper.make_node(op, ["a"], [op.lower()]) for op in unary]
    compares = ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"]
    nodes += [helper.make_node(op, ["a", "b"], [op.lower()]) for op in compares]
    nodes += [helper.make_node("Where", ["less", "a", "b"], ["where"])]
    outs = [vinfo(o.lower(), dtype, None) for o in ops + ["Abs"] + unary]
    outs += [vinfo(o.lower(), np.bool_, None) for o in compares] + [vinfo("where", dtype, None)]
    m = make_model(nodes, [vinfo("a", dtype, ["n", 5]), vinfo("b", dtype, [1, 5])], outs)
    rng = np.random.default_rng(1)
    check_model(m, target, [{"a": sample(rng, (n, 5), dtype), "b": sample(rng, (1, 5), dtype, nonzero=True)}
                            for n in (1, 4, 0)], rtol=0, atol=0)


def test_bool_ops(target):
    ops = {"And": "and", "Or": "or", "Xor": "xor", "Equal": "eq"}
    nodes = [helper.make_node(op, ["a", "b"], [out]) for op, out in ops.items()]
    nodes += [helper.make_node("Not", ["a"], ["not"]), helper.make_node("Where", ["a", "b", "not"], ["where"])]
    m = make_model(nodes, [vinfo("a", np.bool_, ["n", 5]), vinfo("b", np.bool_, [5])],
                   [vinfo(o, np.bool_, None) for o in list(ops.values()) + ["not", "where"]])
    rng = np.random.default_rng(2)
    check_model(m, target, [{"a": sample(rng, (n, 5), np.bool_), "b": sample(rng, (5,), np.bool_)} for n in (1, 3)])


@pytest.mark.parametrize("src", ALL, ids=_name)
def test_cast_to_every_dtype(src, target):
    """One Cast to each dtype from ``src``. Floats hold values in [0, 100) (a negative float
    cast to an unsigned type is undefined in numpy); integers wrap like numpy's."""
    nodes = [helper.make_node("Cast", ["x"], [f"to_{_name(dst)}"], to=helper.np_dtype_to_tensor_dtype(np.dtype(dst)))
             for dst in ALL]
    m = make_model(nodes, [vinfo("x", src, ["n", 3])], [vinfo(f"to_{_name(d)}", d, None) for d in ALL])
    rng = np.random.default_rng(3)

    def feed(n):
        x = sample(rng, (n, 3), src)
        return np.abs(x) if np.dtype(src).kind == "f" else x

    check_model(m, target, [{"x": feed(n)} for n in (2, 5)], rtol=0, atol=0)


@pytest.mark.parametrize("dtype", ALL, ids=_name)
def test_movement_chain(dtype, target):
    """Transpose, Slice, Concat, Gather, Unsqueeze, Expand, Flatten, Reshape, Squeeze, Where
    and Identity on one dtype: they move elements as stored."""
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
    check_model(m, target, [{"x": sample(rng, (n, 4, 3), dtype), "mask": sample(rng, (1, n, 1), np.bool_)}
                            for n in (1, 5, 0)], rtol=0, atol=0)


def test_float16_special_values(target):
    """NaN, infinities, subnormals, overflow to infinity and ties round through the float16
    conversions exactly as numpy rounds them."""
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 6e-8, 5.96e-8, 1e-5, 65504, 65519, 65520, 1e6,
                        1.00048828125, 1.00146484375, -2.5, 3.14159], np.float32)
    m = make_model([helper.make_node("Cast", ["x"], ["h"], to=helper.np_dtype_to_tensor_dtype(np.dtype(np.float16))),
                    helper.make_node("Cast", ["h"], ["back"], to=1),
                    helper.make_node("Add", ["h", "h"], ["twice"])],
                   [vinfo("x", np.float32, ["n"])],
                   [vinfo("h", np.float16, None), vinfo("back", np.float32, None), vinfo("twice", np.float16, None)])
    check_model(m, target, [{"x": special}, {"x": special[::-1].copy()}], rtol=0, atol=0)
