"""Elementwise ops on every dtype ONNX allows them on, on both targets against
onnx.reference, each model compiled once and run with several bindings of its symbolic
dim: Mod, BitShift and the Bitwise ops, the trigonometric and hyperbolic functions,
rounding and classification, Mean, the activations, Cast and CastLike, and the older ops
widened to all integer widths, float16 and float64. Edge values (nan, inf, -0, domain
edges, integer minimum) ride along with random ones."""
import math

import numpy as np
import pytest
from onnx import TensorProto, helper

import wasm_runtime
from toolkit.ir.graph import CompileError
from util import build, check_model, make_model, reference, vinfo

NS = (1, 3, 7)  # bindings of the symbolic dim n; rows of 5
FLOATS = [np.float16, np.float32, np.float64]
SIGNED = [np.int8, np.int16, np.int32, np.int64]
UNSIGNED = [np.uint8, np.uint16, np.uint32, np.uint64]
INTS = SIGNED + UNSIGNED
NUMERIC = FLOATS + INTS
# relative tolerance by dtype: float32 and float64 a few ulp, float16 its own rounding
RTOL = {np.float16: 2e-3, np.float32: 1e-6, np.float64: 1e-13}


def tol(dt):
    return {"rtol": RTOL.get(dt, 0), "atol": 1e-30}


def arr(rng, shape, dt, lo=-4.0, hi=4.0, edges=()):
    """Random values in [lo, hi) of ``dt`` (clipped to its range), the edge values first."""
    dt = np.dtype(dt)
    size = int(np.prod(shape))
    if dt.kind in "iu":
        info = np.iinfo(dt)
        v = rng.integers(max(int(lo), info.min), min(int(hi), info.max), size=size, dtype=dt, endpoint=True)
    elif dt.kind == "b":
        v = rng.random(size) < 0.5
    else:
        v = rng.uniform(lo, hi, size)
    v = v.astype(dt)
    e = np.array(edges, dtype=dt)[:size]
    v[:len(e)] = e
    return v.reshape(shape)


def values(rng, n, dt, lo=-4.0, hi=4.0, edges=()):
    """n rows of 5 (see :func:`arr`)."""
    return arr(rng, (n, 5), dt, lo, hi, edges)


def unary_models(ops, dt, out_dt=None, opset=17, **attrs):
    """One model: input x [n, 5] and one output per op."""
    nodes = [helper.make_node(op, ["x"], [f"y{k}"], **attrs.get(op, {})) for k, op in enumerate(ops)]
    return make_model(nodes, [vinfo("x", dt, ["n", 5])], [vinfo(f"y{k}", out_dt or dt, None) for k in range(len(ops))],
                      opset=opset)


def int_edges(dt):
    info = np.iinfo(dt)
    return [info.min, info.max, 0, 1, info.max - 1, info.min + 1 if info.min else 2]


# ----------------------------------------------------------------------------- Mod


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dt", INTS)
def test_mod_int(dt, fmod, target):
    """Python's % (fmod=0, the divisor's sign) and C's fmod (the dividend's) on every
    integer width, with the minimum divided by -1 and by itself; x % 0 is numpy's 0."""
    rng = np.random.default_rng(1)
    m = make_model([helper.make_node("Mod", ["a", "b"], ["y"], fmod=fmod)],
                   [vinfo("a", dt, ["n", 5]), vinfo("b", dt, ["n", 5])], [vinfo("y", dt, None)])
    info = np.iinfo(dt)
    feeds = []
    for n in NS:
        a = values(rng, n, dt, -100, 100, int_edges(dt))
        b = values(rng, n, dt, -9, 10, [-1 if info.min else 3, info.min if info.min else info.max, 7, 0, 3])
        feeds.append({"a": a, "b": b})
    with np.errstate(all="ignore"):
        check_model(m, target, feeds)


@pytest.mark.parametrize("dt", FLOATS)
def test_mod_float(dt, target):
    """fmod=1 (any opset) and fmod=0 (Mod-28) are exact remainders, with C's and numpy's
    special cases: zero divisors and infinite dividends give nan, infinite divisors the
    dividend (fmod=0: y when the signs differ), zeros keep a sign."""
    rng = np.random.default_rng(2)
    m = make_model([helper.make_node("Mod", ["a", "b"], ["c"], fmod=1), helper.make_node("Mod", ["a", "b"], ["p"], fmod=0)],
                   [vinfo("a", dt, ["n", 5]), vinfo("b", dt, ["n", 5])], [vinfo("c", dt, None), vinfo("p", dt, None)],
                   opset=28)
    big = float(np.finfo(dt).max)
    feeds = []
    for n in NS:
        a = values(rng, n, dt, -50, 50, [5.5, -5.5, 0.0, -0.0, np.inf, 3.0, -2.0, np.nan, big, 1e-3, 7.25, -7.25])
        b = values(rng, n, dt, -7, 7, [2.0, 2.0, -3.0, 3.0, 2.0, 0.0, np.inf, 1.0, 3.0, -np.inf, -2.5, 2.5])
        feeds.append({"a": a, "b": b})
    with np.errstate(all="ignore"):
        check_model(m, target, feeds, rtol=0, atol=0)


def test_mod_float_fmod0_needs_mod28():
    m = make_model([helper.make_node("Mod", ["a", "b"], ["y"])], [vinfo("a", np.float32, [3]), vinfo("b", np.float32, [3])],
                   [vinfo("y", np.float32, None)])
    with pytest.raises(CompileError, match="fmod=0 on float32 needs Mod-28"):
        build(m, "wasm32")


# ----------------------------------------------------------------------------- bit ops


@pytest.mark.parametrize("dt", INTS)
def test_bitshift(dt, target):
    """LEFT and RIGHT by amounts up to past the width; signed types (BitShift-28) shift
    arithmetically and give 0 or -1 for negative or too large amounts."""
    rng = np.random.default_rng(3)
    bits = np.iinfo(dt).bits
    nodes = [helper.make_node("BitShift", ["a", "s"], ["l"], direction="LEFT"),
             helper.make_node("BitShift", ["a", "s"], ["r"], direction="RIGHT")]
    m = make_model(nodes, [vinfo("a", dt, ["n", 5]), vinfo("s", dt, [5])], [vinfo("l", dt, None), vinfo("r", dt, None)],
                   opset=28 if np.dtype(dt).kind == "i" else 17)
    shifts = [0, 1, bits - 1, bits, bits + 3] if np.dtype(dt).kind == "u" else [-1, 1, bits - 1, bits, 3]
    feeds = [{"a": values(rng, n, dt, -1000, 1000, int_edges(dt)), "s": np.array(shifts, dt)} for n in NS]
    check_model(m, target, feeds)


def test_bitshift_signed_needs_28():
    m = make_model([helper.make_node("BitShift", ["a", "s"], ["y"], direction="LEFT")],
                   [vinfo("a", np.int32, [3]), vinfo("s", np.int32, [3])], [vinfo("y", np.int32, None)])
    with pytest.raises(CompileError, match="BitShift-11 takes unsigned integers only"):
        build(m, "wasm32")


@pytest.mark.parametrize("dt", INTS)
def test_bitwise(dt, target):
    rng = np.random.default_rng(4)
    nodes = [helper.make_node(op, ["a", "b"], [op]) for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor")]
    nodes.append(helper.make_node("BitwiseNot", ["a"], ["BitwiseNot"]))
    m = make_model(nodes, [vinfo("a", dt, ["n", 5]), vinfo("b", dt, [1, 5])],
                   [vinfo(n.output[0], dt, None) for n in nodes], opset=18)
    info = np.iinfo(dt)
    feeds = [{"a": values(rng, n, dt, info.min, info.max, int_edges(dt)), "b": values(rng, 1, dt, info.min, info.max)}
             for n in NS]
    check_model(m, target, feeds)


# ----------------------------------------------------------------------------- trig


TRIG = ["Sin", "Cos", "Tan", "Atan", "Sinh", "Cosh", "Asinh"]
UNIT = ["Asin", "Acos", "Atanh"]  # domain [-1, 1]


@pytest.mark.parametrize("dt", FLOATS)
def test_trig(dt, target):
    """Every trigonometric and hyperbolic function, float32 and float64 to a few ulp, with
    the domain edges (asin/acos/atanh at +-1 and beyond, acosh at 1 and below), signed
    zeros, infinities, nan and overflowing sinh/cosh."""
    rng = np.random.default_rng(5)
    nodes = [helper.make_node(op, ["x"], [op]) for op in TRIG]
    nodes += [helper.make_node(op, ["u"], [op]) for op in UNIT] + [helper.make_node("Acosh", ["v"], ["Acosh"])]
    m = make_model(nodes, [vinfo("x", dt, ["n", 5]), vinfo("u", dt, ["n", 5]), vinfo("v", dt, ["n", 5])],
                   [vinfo(node.output[0], dt, None) for node in nodes])
    feeds = []
    for n in NS:
        feeds.append({
            "x": values(rng, n, dt, -12, 12, [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, 1000.0, -100.0, 1e6, 12.5]),
            "u": values(rng, n, dt, -1, 1, [1.0, -1.0, -0.0, 1.5, np.nan, 1e-30, 0.5, -0.999, 0.9999]),
            "v": values(rng, n, dt, 1, 50, [1.0, 0.5, np.inf, 1e30 if dt != np.float16 else 6e4, np.nan, 1.0001, -3.0]),
        })
    with np.errstate(all="ignore"):
        check_model(m, target, feeds, **tol(dt))


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_trig_wide_arguments(dt, target):
    """sin/cos/tan of arguments up to 1e8, where the reduction by pi/2 needs more bits of
    pi/2 than one double holds."""
    rng = np.random.default_rng(6)
    m = unary_models(["Sin", "Cos", "Tan"], dt)
    feeds = [{"x": (np.exp(rng.uniform(-5, math.log(1e8), (n, 5))) * rng.choice([-1, 1], (n, 5))).astype(dt)}
             for n in NS]
    check_model(m, target, feeds, rtol=RTOL[dt] * 4, atol=1e-30)


# ----------------------------------------------------------------------------- rounding, classes


@pytest.mark.parametrize("dt", FLOATS)
def test_rounding_and_classes(dt, target):
    """Ceil, Floor, Round (halves to even), Sign (nan stays nan, -0 gives 0), Abs, Neg,
    IsNaN and IsInf with each detect_* setting."""
    rng = np.random.default_rng(7)
    ops = ["Ceil", "Floor", "Round", "Sign", "Abs", "Neg"]
    nodes = [helper.make_node(op, ["x"], [op]) for op in ops]
    nodes += [helper.make_node("IsNaN", ["x"], ["nan"]),
              helper.make_node("IsInf", ["x"], ["inf"]),
              helper.make_node("IsInf", ["x"], ["pinf"], detect_negative=0),
              helper.make_node("IsInf", ["x"], ["ninf"], detect_positive=0)]
    outs = [vinfo(op, dt, None) for op in ops] + [vinfo(o, np.bool_, None) for o in ("nan", "inf", "pinf", "ninf")]
    m = make_model(nodes, [vinfo("x", dt, ["n", 5])], outs, opset=20)
    edges = [0.5, 1.5, 2.5, -0.5, -2.5, -0.0, 0.0, np.nan, np.inf, -np.inf, 1e-30, -3.7, 4096.5]
    feeds = [{"x": values(rng, n, dt, -10, 10, edges)} for n in NS]
    check_model(m, target, feeds, rtol=0, atol=0)


@pytest.mark.parametrize("dt", INTS)
def test_sign_abs_neg_int(dt, target):
    """Integer Sign and Abs (and Neg, Relu where ONNX has them); the minimum wraps as in numpy."""
    rng = np.random.default_rng(8)
    ops = ["Sign", "Abs"] + (["Neg", "Relu"] if np.dtype(dt).kind == "i" else [])
    m = unary_models(ops, dt)
    with np.errstate(all="ignore"):
        check_model(m, target, [{"x": values(rng, n, dt, -100, 100, int_edges(dt))} for n in NS])


@pytest.mark.parametrize("dt", FLOATS)
def test_mean(dt, target):
    rng = np.random.default_rng(9)
    m = make_model([helper.make_node("Mean", ["a", "b", "c"], ["y"]), helper.make_node("Mean", ["a"], ["z"])],
                   [vinfo("a", dt, ["n", 5]), vinfo("b", dt, [5]), vinfo("c", dt, ["n", 1])],
                   [vinfo("y", dt, None), vinfo("z", dt, None)])
    feeds = [{"a": values(rng, n, dt), "b": values(rng, 1, dt)[0], "c": values(rng, n, dt)[:, :1]} for n in NS]
    check_model(m, target, feeds, **tol(dt))


# ----------------------------------------------------------------------------- activations


ACTIVATIONS = [("Elu", {"alpha": 0.7}), ("Selu", {}), ("Selu", {"alpha": 1.5, "gamma": 2.0}), ("Celu", {"alpha": 1.3}),
               ("ThresholdedRelu", {"alpha": 0.4}), ("Shrink", {"lambd": 1.0, "bias": 0.3}), ("Gelu", {}),
               ("Gelu", {"approximate": "tanh"}), ("Mish", {}), ("Swish", {}), ("Swish", {"alpha": 0.6}),
               ("LeakyRelu", {"alpha": 0.1}), ("Softplus", {}), ("Softsign", {}), ("HardSigmoid", {}),
               ("HardSwish", {}), ("Relu", {}), ("Sigmoid", {}), ("Tanh", {}), ("Erf", {}), ("Exp", {}),
               ("Reciprocal", {})]


@pytest.mark.parametrize("dt", FLOATS)
def test_activations(dt, target):
    """The activation functions (and the plain float math ops) on float16/32/64."""
    rng = np.random.default_rng(10)
    nodes = [helper.make_node(op, ["x"], [f"y{k}"], **attrs) for k, (op, attrs) in enumerate(ACTIVATIONS)]
    nodes += [helper.make_node("Log", ["p"], ["log"]), helper.make_node("Sqrt", ["p"], ["sqrt"])]
    outs = [vinfo(f"y{k}", dt, None) for k in range(len(ACTIVATIONS))] + [vinfo("log", dt, None), vinfo("sqrt", dt, None)]
    m = make_model(nodes, [vinfo("x", dt, ["n", 5]), vinfo("p", dt, ["n", 5])], outs, opset=24)
    feeds = [{"x": values(rng, n, dt, -5, 5, [0.0, -0.0, 1.0, -1.0, 0.4, 8.0, -8.0, np.nan]),
              "p": values(rng, n, dt, 0.01, 50, [0.0, 1.0, np.inf, 1e-3])} for n in NS]
    # float32/float16: erf, and so Gelu, has a float32 polynomial (absolute error ~1e-7)
    atol = {np.float16: 1e-3, np.float32: 3e-7, np.float64: 1e-15}[dt]
    with np.errstate(all="ignore"):
        check_model(m, target, feeds, rtol=max(RTOL[dt], 2e-6 if dt == np.float32 else 0), atol=atol,
                    ref=_exact_erf_reference if dt == np.float64 else reference)


def _exact_erf_reference(model, feeds):
    """onnx.reference, except Erf, Gelu and HardSwish for float64: its Erf computes in
    float32 whatever the input type, and Gelu and HardSwish use float32 constants
    (sqrt(2/pi), 1/6)."""
    out = reference(model, feeds)
    x = feeds["x"]
    for k, (op, attrs) in enumerate(ACTIVATIONS):
        if op == "Erf":
            out[f"y{k}"] = np.vectorize(math.erf)(x)
        elif op == "Gelu" and not attrs:
            out[f"y{k}"] = 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
        elif op == "Gelu":
            out[f"y{k}"] = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
        elif op == "HardSwish":
            out[f"y{k}"] = x * np.clip(x / 6 + 0.5, 0, 1)
    return out


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_softplus_large(dt, target):
    """Softplus without overflow: log(1 + e^x) is x for large x (onnx.reference computes
    exp(x) first and returns inf from x ~ 89 in float32, so numpy's logaddexp is the reference)."""
    m = unary_models(["Softplus", "Mish"], dt, opset=18)
    x = np.array([[100.0, 500.0, -80.0, -800.0, 30.0]], dt)  # -80: results stay normal floats
    want = np.logaddexp(0, x.astype(np.float64))
    check_model(m, target, [{"x": x}], ref=lambda model, f: {"y0": want.astype(dt), "y1": (x * np.tanh(want)).astype(dt)},
                rtol=1e-6, atol=0)


@pytest.mark.parametrize("dt", INTS)
def test_shrink_int(dt, target):
    """Shrink on integers: the float bias is added in float64 and truncated back."""
    rng = np.random.default_rng(11)
    m = unary_models(["Shrink"], dt, Shrink={"lambd": 1.5, "bias": 2.5})
    check_model(m, target, [{"x": values(rng, n, dt, -9, 9, [0, 1, 2, 3])} for n in NS])


@pytest.mark.parametrize("dt,slope_shape", [(np.float32, [5]), (np.float32, ["n", 1]), (np.float64, [1, 5]),
                                            (np.float16, []), (np.int32, [5]), (np.int64, [1]),
                                            (np.uint32, [5]), (np.uint64, ["n", 5])])
def test_prelu(dt, slope_shape, target):
    rng = np.random.default_rng(12)
    m = make_model([helper.make_node("PRelu", ["x", "s"], ["y"])], [vinfo("x", dt, ["n", 5]), vinfo("s", dt, slope_shape)],
                   [vinfo("y", dt, None)])
    feeds = [{"x": values(rng, n, dt, -9, 9), "s": arr(rng, [n if d == "n" else d for d in slope_shape], dt, -3, 3)}
             for n in NS]
    check_model(m, target, feeds, **tol(dt))


def test_prelu_slope_must_broadcast_to_x():
    """The slope broadcasts to x without widening it: a slope dim that is neither 1 nor
    x's is a run-time error naming the node."""
    m = make_model([helper.make_node("PRelu", ["x", "s"], ["y"], name="act")],
                   [vinfo("x", np.float32, ["n", 5]), vinfo("s", np.float32, ["m", 5])], [vinfo("y", np.float32, None)])
    model = build(m, "wasm32")
    x, s = np.ones((3, 5), np.float32), np.ones((2, 5), np.float32)
    with pytest.raises(wasm_runtime.ModelError, match="act"):
        model.run({"x": x, "s": s})
    assert model.run({"x": x, "s": s[:1]})["y"].shape == (3, 5)


# ----------------------------------------------------------------------------- Cast


CAST_TYPES = NUMERIC + [np.bool_]


def _cast_model(src, dsts, op="Cast"):
    if op == "Cast":
        nodes = [helper.make_node("Cast", ["a"], [f"y{k}"], to=helper.np_dtype_to_tensor_dtype(np.dtype(d)))
                 for k, d in enumerate(dsts)]
        ins = [vinfo("a", src, ["n", 5])]
    else:
        nodes = [helper.make_node("CastLike", ["a", f"like{k}"], [f"y{k}"]) for k in range(len(dsts))]
        ins = [vinfo("a", src, ["n", 5])] + [vinfo(f"like{k}", d, [1]) for k, d in enumerate(dsts)]
    return make_model(nodes, ins, [vinfo(f"y{k}", d, None) for k, d in enumerate(dsts)], opset=21)


@pytest.mark.parametrize("src", CAST_TYPES)
def test_cast_all_pairs(src, target):
    """Cast from each dtype to every dtype: integers wrap, floats truncate toward zero,
    anything to bool is != 0 (nan is true), bool to anything 0 or 1. Float values are
    kept inside every integer target's range (out of range is undefined in ONNX; symwasm
    saturates)."""
    rng = np.random.default_rng(13)
    kind = np.dtype(src).kind
    dsts = CAST_TYPES if kind != "f" else [d for d in CAST_TYPES if np.dtype(d).kind != "u"]
    lo = 0 if kind == "u" else -120
    feeds = [{"a": values(rng, n, src, lo, 120, [0, 1] if kind in "iub" else [0.5, -0.5, 0.0, -0.0, 127.9, -127.9])}
             for n in NS]
    check_model(_cast_model(src, dsts), target, feeds, rtol=1e-3 if src == np.float16 else 1e-7, atol=0)
    if kind == "f":  # non-negative floats to the unsigned types
        check_model(_cast_model(src, UNSIGNED), target,
                    [{"a": values(rng, n, src, 0, 250, [0.0, -0.0, 0.9, 255.5])} for n in NS])


@pytest.mark.parametrize("src", FLOATS)
def test_cast_float_specials(src, target):
    """nan and infinities between float types and to bool."""
    x = np.array([[np.nan, np.inf, -np.inf, -0.0, 1e-8]], src)
    check_model(_cast_model(src, FLOATS + [np.bool_]), target, [{"a": x}], rtol=0, atol=0)


def test_cast_rounds_once(target):
    """float64 -> float16 rounds once (a float32 step would make 1 + 2**-11 + 2**-40 a
    tie and round it to 1); int64 -> float16 overflows to inf."""
    m = make_model([helper.make_node("Cast", ["a"], ["h"], to=TensorProto.FLOAT16),
                    helper.make_node("Cast", ["i"], ["j"], to=TensorProto.FLOAT16)],
                   [vinfo("a", np.float64, ["n"]), vinfo("i", np.int64, ["n"])],
                   [vinfo("h", np.float16, None), vinfo("j", np.float16, None)])
    a = np.array([1 + 2**-11 + 2**-40, 1 + 2**-11, -(1 + 3 * 2**-11 - 2**-40), 65519.0, 65520.0, 1e-8, 6e-8, np.nan])
    i = np.array([1, -2049, 65504, 65519, 65520, 2**40, -(2**62), 3], np.int64)
    check_model(m, target, [{"a": a, "i": i}, {"a": a[:3], "i": i[:3]}], rtol=0, atol=0)


@pytest.mark.parametrize("src", [np.float32, np.int64, np.bool_, np.uint8])
def test_castlike(src, target):
    rng = np.random.default_rng(14)
    dsts = [np.float16, np.float64, np.int8, np.int32, np.bool_]
    m = _cast_model(src, dsts, op="CastLike")
    feeds = [{"a": values(rng, n, src, 0, 100), **{f"like{k}": np.zeros(1, d) for k, d in enumerate(dsts)}} for n in NS]
    check_model(m, target, feeds, rtol=1e-3, atol=0)


@pytest.mark.parametrize("to,message", [(TensorProto.STRING, "cast to string is not supported")])
def test_cast_unsupported_targets(to, message):
    m = make_model([helper.make_node("Cast", ["a"], ["y"], to=to, name="c")], [vinfo("a", np.float32, [3])],
                   [helper.make_tensor_value_info("y", to, None)], opset=25)
    with pytest.raises(CompileError, match=f"node 'c'.*{message}"):
        build(m, "wasm32")


def test_gelu_bad_approximation():
    m = make_model([helper.make_node("Gelu", ["a"], ["y"], approximate="fast")], [vinfo("a", np.float32, [3])],
                   [vinfo("y", np.float32, None)], opset=20)
    with pytest.raises(CompileError, match="approximate must be 'none' or 'tanh'"):
        build(m, "wasm32")


# ----------------------------------------------------------------------------- widened ops


@pytest.mark.parametrize("dt", [np.int8, np.int16, np.uint8, np.uint16, np.uint32, np.uint64, np.float16, np.float64])
def test_arith_compare_widened(dt, target):
    """Add/Sub/Mul/Div/Max/Min/Sum, the comparisons, Where and Clip on the dtypes beyond
    the common ones: integer arithmetic wraps, division truncates."""
    rng = np.random.default_rng(16)
    arith = ["Add", "Sub", "Mul", "Div", "Max", "Min", "Sum"]
    cmp = ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"]
    nodes = [helper.make_node(op, ["a", "b"], [op]) for op in arith + cmp]
    nodes += [helper.make_node("Where", ["c", "a", "b"], ["Where"]), helper.make_node("Clip", ["a", "lo", "hi"], ["Clip"])]
    outs = ([vinfo(op, dt, None) for op in arith] + [vinfo(op, np.bool_, None) for op in cmp]
            + [vinfo("Where", dt, None), vinfo("Clip", dt, None)])
    m = make_model(nodes, [vinfo("a", dt, ["n", 5]), vinfo("b", dt, [1, 5]), vinfo("c", np.bool_, ["n", 1]),
                           vinfo("lo", dt, []), vinfo("hi", dt, [])], outs)
    kind = np.dtype(dt).kind
    feeds = []
    for n in NS:
        b = values(rng, 1, dt, -20 if kind != "u" else 1, 20, [3, 7, 1, 2, 5])
        edges = int_edges(dt) if kind != "f" else [np.nan, np.inf, -0.0]
        feeds.append({"a": values(rng, n, dt, -100, 100, edges), "b": b, "c": values(rng, n, np.bool_)[:, :1],
                      "lo": np.array(2 if kind == "u" else -5, dt), "hi": np.array(40, dt)})
    with np.errstate(all="ignore"):
        check_model(m, target, feeds, **tol(dt))


@pytest.mark.parametrize("dt", [np.int8, np.uint16, np.uint64, np.float16, np.float64, np.bool_])
def test_where_every_dtype(dt, target):
    rng = np.random.default_rng(17)
    m = make_model([helper.make_node("Where", ["c", "a", "b"], ["y"])],
                   [vinfo("c", np.bool_, ["n", 5]), vinfo("a", dt, ["n", 5]), vinfo("b", dt, [5])], [vinfo("y", dt, None)])
    check_model(m, target, [{"c": values(rng, n, np.bool_), "a": values(rng, n, dt, 0, 50), "b": values(rng, 1, dt, 0, 50)[0]}
                            for n in NS])


POW_CASES = [(np.float64, np.float64), (np.float64, np.int32), (np.float32, np.int64), (np.float32, np.float64),
             (np.float16, np.float32), (np.int32, np.float32), (np.int64, np.int64), (np.int32, np.uint8)]


@pytest.mark.parametrize("xdt,ydt", POW_CASES)
def test_pow_types(xdt, ydt, target):
    """Pow's base and exponent dtypes combined as ONNX allows; a float operand with a
    float64 one or an integer base computes in float64 like numpy."""
    rng = np.random.default_rng(18)
    m = make_model([helper.make_node("Pow", ["a", "b"], ["y"])], [vinfo("a", xdt, ["n", 5]), vinfo("b", ydt, [5])],
                   [vinfo("y", xdt, None)], opset=15)
    int_base = np.dtype(xdt).kind != "f"
    feeds = []
    for n in NS:
        b = values(rng, 1, ydt, 0, 5, [2, 0.5, 3, 0, 1] if np.dtype(ydt).kind == "f" else [2, 1, 3, 0, 4])[0]
        if int_base:  # a negative base to a fractional power is nan, whose integer cast is undefined
            b = np.round(b)
        feeds.append({"a": values(rng, n, xdt, -5 if int_base else 1, 6, [2, 3, 0, 1] if n > 1 else [2]), "b": b})
    check_model(m, target, feeds, rtol={np.float64: 1e-14, np.float32: 1e-6, np.float16: 1e-3}.get(xdt, 0), atol=0)


# name -> (numpy reference, argument range, log-spaced magnitudes)
ACCURACY = {"Sin": (np.sin, (-1e4, 1e4), False), "Cos": (np.cos, (-1e4, 1e4), False), "Tan": (np.tan, (-20, 20), False),
            "Asin": (np.arcsin, (-1, 1), False), "Acos": (np.arccos, (-1, 1), False), "Atan": (np.arctan, (1e-20, 1e20), True),
            "Sinh": (np.sinh, (-700, 700), False), "Cosh": (np.cosh, (-700, 700), False), "Tanh": (np.tanh, (1e-20, 30), True),
            "Asinh": (np.arcsinh, (1e-20, 1e300), True), "Acosh": (np.arccosh, (1, 1e300), True),
            "Atanh": (np.arctanh, (-1, 1), False), "Exp": (np.exp, (-740, 705), False), "Log": (np.log, (1e-300, 1e300), True),
            "Erf": (np.vectorize(math.erf), (-7, 7), False), "Sigmoid": (lambda x: np.exp(-np.abs(x)) ** (x < 0) / (1 + np.exp(-np.abs(x))), (-700, 700), False),
            "Softplus": (lambda x: np.logaddexp(0, x), (-700, 700), False)}


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_math_accuracy(dt, target):
    """Every float math function over its range, 4000 points each, against numpy in float64
    (onnx.reference's Erf rounds to float32): float64 within 4 ulp, float32 within 2 (the
    float32-only polynomials of exp, log, tanh, sigmoid and erf within 4)."""
    rng = np.random.default_rng(19)
    ops = sorted(ACCURACY)
    m = make_model([helper.make_node(op, [f"x{k}"], [f"y{k}"]) for k, op in enumerate(ops)],
                   [vinfo(f"x{k}", dt, ["n"]) for k in range(len(ops))], [vinfo(f"y{k}", dt, None) for k in range(len(ops))])
    model = build(m, target)
    feeds = {}
    for k, op in enumerate(ops):
        _, (lo, hi), logspaced = ACCURACY[op]
        if logspaced:
            x = np.exp(rng.uniform(math.log(lo), math.log(hi), 4000))
        else:
            x = rng.uniform(lo, hi, 4000)
        feeds[f"x{k}"] = x.astype(dt)
    got = model.run(feeds)
    eps = float(np.finfo(dt).eps)
    for k, op in enumerate(ops):
        x = feeds[f"x{k}"].astype(np.float64)
        with np.errstate(all="ignore"):
            want = ACCURACY[op][0](x).astype(dt).astype(np.float64)
        ok = np.isfinite(want) & (np.abs(want) > float(np.finfo(dt).tiny))
        err = np.abs(got[f"y{k}"].astype(np.float64)[ok] - want[ok]) / np.abs(want[ok]) / eps
        limit = 4 if dt == np.float64 or op in ("Exp", "Log", "Tanh", "Sigmoid", "Erf") else 2
        if op == "Erf" and dt == np.float32:  # erf's float32 polynomial: absolute error ~1e-7
            err = np.abs(got[f"y{k}"].astype(np.float64)[ok] - want[ok]) / 1.2e-7
            limit = 1
        assert err.max() <= limit, f"{op}: {err.max():.2f} ulp at x = {x[ok][np.argmax(err)]!r}"
        np.testing.assert_array_equal(np.isnan(got[f"y{k}"]), np.isnan(want), err_msg=op)
