"""Random ops (toolkit/frontend/onnx/ops/random.py): RandomUniform, RandomNormal, their Like
forms, Multinomial and Bernoulli.

No implementation reproduces another's draws, so the tests are structural and statistical:
both targets give the same bits; a seed makes runs repeat; the float64 draws equal a numpy
re-implementation of the documented generator (splitmix64, toolkit/ops/random.py); the
narrow dtypes are the float64 draws rounded once; sample means, deviations, histograms and
class frequencies lie within 5 standard errors (computed from the sample size) of the
distribution's. Bounds are statistical, never timings: a seeded module gives the same
numbers every time, so a test passes or fails deterministically."""
from __future__ import annotations

import math
import struct

import ml_dtypes
import numpy as np
import pytest
from llvmlite import binding as llvm
from onnx import TensorProto, helper

import wasm_runtime
from util import build, const, lower_model, make_model, vinfo
from toolkit.ir.graph import CompileError

F16, F32, F64, I32, I64 = np.float16, np.float32, np.float64, np.int32, np.int64
BF16 = ml_dtypes.bfloat16
CODE = {F16: TensorProto.FLOAT16, F32: TensorProto.FLOAT, F64: TensorProto.DOUBLE, BF16: TensorProto.BFLOAT16,
        I32: TensorProto.INT32, I64: TensorProto.INT64}
Z = 5.0  # standard errors allowed


def node(op: str, ins: list[str], out: str, **attrs):
    return helper.make_node(op, ins, [out], name=out, **attrs)


def model(nodes, inputs=(), outputs=(), opset: int = 22):
    return make_model(nodes, list(inputs), [vinfo(name, dt, None) for name, dt in outputs], opset=opset)


# ----------------------------------------------------------------------------- the documented generator in numpy


def _mix64(z: np.ndarray) -> np.ndarray:
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _draws(seed: float, n: np.ndarray) -> np.ndarray:
    """splitmix64 at positions ``n`` from the key of ``seed``."""
    with np.errstate(over="ignore"):
        key = _mix64(np.array([struct.unpack("<Q", struct.pack("<d", seed))[0]], np.uint64))[0]
        return _mix64(key + (n.astype(np.uint64) + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15))


def _unit(bits: np.ndarray) -> np.ndarray:
    return (bits >> np.uint64(11)).astype(np.float64) * 2.0 ** -53


def _nearest(values: np.ndarray, dtype) -> np.ndarray:
    """``values`` (float64) rounded once to ``dtype`` (ml_dtypes' astype rounds bfloat16
    through float32, twice): the nearer of astype's result and its two neighbours."""
    first = values.astype(dtype)
    cands = np.stack([first, np.nextafter(first, dtype(np.inf)), np.nextafter(first, dtype(-np.inf))])
    err = np.abs(cands.astype(np.float64) - values)
    return np.take_along_axis(cands, np.argmin(err, axis=0)[None], axis=0)[0]


# ----------------------------------------------------------------------------- structure


def _everything():
    """One node of each op and dtype, seeded, and feeds for it."""
    nodes = [node("RandomUniform", [], f"u_{dt.__name__}", shape=[3, 50], low=-1.0, high=2.5, seed=7.0,
                  dtype=CODE[dt]) for dt in (F16, F32, F64, BF16)]
    nodes += [node("RandomNormal", [], f"n_{dt.__name__}", shape=[40, 3], mean=1.5, scale=2.0, seed=7.0,
                   dtype=CODE[dt]) for dt in (F16, F32, F64, BF16)]
    nodes += [node("RandomUniformLike", ["x"], "ul", seed=1.0), node("RandomNormalLike", ["x"], "nl", seed=2.0),
              node("Multinomial", ["logits"], "m", sample_size=30, seed=3.0),
              node("Bernoulli", ["p"], "b", seed=4.0)]
    outs = [(f"{op}_{dt.__name__}", dt) for op in "un" for dt in (F16, F32, F64, BF16)]
    outs += [("ul", F32), ("nl", F32), ("m", I32), ("b", F32)]
    m = model(nodes, [vinfo("x", F32, ["a", "b"]), vinfo("logits", F64, ["n", "c"]), vinfo("p", F32, ["k"])], outs)
    feeds = {"x": np.zeros((5, 7), F32), "logits": np.log(np.array([[1, 2, 3, 4], [4, 0, 1, 1]], F64) + 1e-300),
             "p": np.linspace(0, 1, 101, dtype=F32)}
    return m, feeds


def test_targets_give_the_same_bits():
    """wasm32 and native: one model of every op and dtype, compared bit for bit."""
    m, feeds = _everything()
    wasm = build(m, "wasm32").run(feeds)
    native = build(m, "native").run(feeds)
    assert set(wasm) == set(native)
    for name in wasm:
        assert wasm[name].dtype == native[name].dtype, name
        np.testing.assert_array_equal(wasm[name].view(f"u{wasm[name].itemsize}"),
                                      native[name].view(f"u{native[name].itemsize}"), err_msg=name)


def test_seeded_runs_repeat(target):
    m, feeds = _everything()
    mod = build(m, target)
    first, second = mod.run(feeds), mod.run(feeds)
    for name in first:
        np.testing.assert_array_equal(first[name], second[name], err_msg=name)


def test_unseeded_nodes_differ_and_runs_repeat(target):
    """Without a seed each node has its own stream (from its name); the VM keeps no state
    between runs, so a second run repeats the first (documented in toolkit/ops/random.py)."""
    mod = build(model([node("RandomUniform", [], "a", shape=[64]), node("RandomUniform", [], "b", shape=[64]),
                       node("RandomUniform", [], "c", shape=[64], seed=0.0),
                       node("RandomUniform", [], "d", shape=[64], seed=1.0)],
                      outputs=[("a", F32), ("b", F32), ("c", F32), ("d", F32)]), target)
    first, second = mod.run({}), mod.run({})
    for name in "abcd":
        np.testing.assert_array_equal(first[name], second[name])
    for x, y in ("ab", "ac", "cd"):
        assert not np.array_equal(first[x], first[y]), (x, y)


def test_float64_draws_follow_the_documented_generator(target):
    """The float64 outputs equal splitmix64 re-implemented in numpy: uniform exactly (the
    same IEEE operations), normal to a few ulps (numpy's log and cos against the module's)."""
    n, seed = 20000, 11.0
    low, high, mean, scale = -3.0, float(F32(0.3)), -1.0, 4.0  # ONNX float attributes are float32
    mod = build(model([node("RandomUniform", [], "u", shape=[n], low=low, high=high, seed=seed,
                            dtype=TensorProto.DOUBLE),
                       node("RandomNormal", [], "z", shape=[n], mean=mean, scale=scale, seed=seed,
                            dtype=TensorProto.DOUBLE)],
                      outputs=[("u", F64), ("z", F64)]), target)
    got = mod.run({})
    i = np.arange(n)
    u = low + (high - low) * _unit(_draws(seed, i))
    np.testing.assert_array_equal(got["u"], np.minimum(u, np.nextafter(high, -np.inf)))
    u1 = _unit(_draws(seed, 2 * i)) + 2.0 ** -53
    u2 = _unit(_draws(seed, 2 * i + 1))
    z = mean + scale * np.sqrt(-2.0 * np.log(u1)) * np.cos(2 * np.pi * u2)
    np.testing.assert_allclose(got["z"], z, rtol=1e-12, atol=1e-12 * scale)


@pytest.mark.parametrize("dtype", [F16, BF16, F32])
def test_narrow_dtypes_are_float64_rounded_once(target, dtype):
    """A seed gives the same draws in every dtype: the float64 values rounded once (and the
    uniform ones clamped below high)."""
    low, high = -1.0, float(F32(0.3))  # ONNX float attributes are float32
    nodes = [node("RandomUniform", [], f"u{k}", shape=[50000], low=low, high=high, seed=5.0, dtype=CODE[dt])
             for k, dt in ((0, F64), (1, dtype))]
    nodes += [node("RandomNormal", [], f"n{k}", shape=[50000], mean=1.0, scale=40.0, seed=5.0, dtype=CODE[dt])
              for k, dt in ((0, F64), (1, dtype))]
    got = build(model(nodes, outputs=[("u0", F64), ("u1", dtype), ("n0", F64), ("n1", dtype)]), target).run({})
    assert got["u1"].dtype == dtype and got["n1"].dtype == dtype
    top = dtype(high) if float(dtype(high)) < high else np.nextafter(dtype(high), dtype(-np.inf))
    want_u = np.minimum(_nearest(got["u0"], dtype).astype(F64), float(top))
    np.testing.assert_array_equal(got["u1"].astype(F64), want_u)
    np.testing.assert_array_equal(got["n1"].astype(F64), _nearest(got["n0"], dtype).astype(F64))


def test_like_ops_take_the_input_shape_and_dtype(target):
    """Symbolic shapes: one module, two bindings. dtype defaults to the input's. Element i
    is draw i however the shape is bound, so a smaller binding gives a prefix."""
    nodes = [node("RandomUniformLike", ["x"], "u", seed=3.0, low=10.0, high=11.0),
             node("RandomNormalLike", ["x"], "n", seed=3.0),
             node("RandomUniformLike", ["ints"], "ui", dtype=TensorProto.FLOAT16, seed=3.0),
             node("RandomNormalLike", ["x"], "nd", dtype=TensorProto.DOUBLE, seed=3.0)]
    mod = build(model(nodes, [vinfo("x", F64, ["a", "b"]), vinfo("ints", I64, ["b", 2, "a"])],
                      [("u", F64), ("n", F64), ("ui", F16), ("nd", F64)]), target)
    big = mod.run({"x": np.zeros((6, 5)), "ints": np.zeros((5, 2, 6), I64)})
    small = mod.run({"x": np.ones((2, 3)), "ints": np.zeros((3, 2, 2), I64)})
    for got, (a, b) in ((big, (6, 5)), (small, (2, 3))):
        assert got["u"].shape == got["n"].shape == got["nd"].shape == (a, b)
        assert got["ui"].shape == (b, 2, a) and got["ui"].dtype == F16
        assert got["u"].dtype == got["n"].dtype == F64
        assert np.all((got["u"] >= 10.0) & (got["u"] < 11.0))
    for name in ("u", "n", "nd"):
        np.testing.assert_array_equal(small[name].reshape(-1), big[name].reshape(-1)[:6])
    np.testing.assert_array_equal(big["n"], big["nd"])  # the same seed and dtype


def test_constant_inputs_are_not_folded(target):
    """A Like op of a constant is not computed at compile time (by onnx.reference's numpy
    draws): it gives the same numbers as of a graph input of that shape."""
    nodes = [node("RandomUniformLike", ["c"], "from_const", seed=9.0),
             node("RandomUniformLike", ["x"], "from_input", seed=9.0)]
    m = make_model(nodes, [vinfo("x", F32, [4, 3])], [vinfo("from_const", F32, None), vinfo("from_input", F32, None)],
                   [const("c", np.zeros((4, 3), F32))], opset=22)
    got = build(m, target).run({"x": np.zeros((4, 3), F32)})
    np.testing.assert_array_equal(got["from_const"], got["from_input"])


def test_kernels_are_valid_llvm():
    m, _ = _everything()
    _, _, module = lower_model(m)
    llvm.parse_assembly(str(module)).verify()


# ----------------------------------------------------------------------------- statistics


@pytest.mark.parametrize("dtype,mean,scale", [(F32, 0.0, 1.0), (F64, 2.5, 3.0), (F32, -100.0, 0.01)])
def test_normal_moments(target, dtype, mean, scale):
    n = 200_000
    got = build(model([node("RandomNormal", [], "z", shape=[n], mean=mean, scale=scale, seed=21.0,
                            dtype=CODE[dtype])], outputs=[("z", dtype)]), target).run({})["z"].astype(F64)
    assert abs(got.mean() - mean) <= Z * scale / math.sqrt(n)
    assert abs(got.std() - scale) <= Z * scale / math.sqrt(2 * n)
    # the share within one sigma is a binomial proportion of 0.6827
    inside = np.mean(np.abs(got - mean) < scale)
    p = math.erf(1 / math.sqrt(2))
    assert abs(inside - p) <= Z * math.sqrt(p * (1 - p) / n)


def _chi_square_bound(bins: int) -> float:
    """Mean + 5 standard deviations of a chi-square with bins - 1 degrees of freedom."""
    return (bins - 1) + Z * math.sqrt(2 * (bins - 1))


@pytest.mark.parametrize("dtype,low,high", [(F32, 0.0, 1.0), (F64, -7.0, 3.0), (F32, -2.0, 30.0)])
def test_uniform_range_and_histogram(target, dtype, low, high):
    n, bins = 200_000, 20
    got = build(model([node("RandomUniform", [], "u", shape=[n], low=low, high=high, seed=2.0, dtype=CODE[dtype])],
                      outputs=[("u", dtype)]), target).run({})["u"].astype(F64)
    assert got.min() >= low and got.max() < high
    counts = np.histogram(got, bins=bins, range=(low, high))[0]
    expected = n / bins
    assert np.sum((counts - expected) ** 2 / expected) <= _chi_square_bound(bins)
    assert abs(got.mean() - (low + high) / 2) <= Z * (high - low) / math.sqrt(12 * n)


def test_uniform_over_a_few_float32_values(target):
    """[1, 1 + 4 ulp) holds four float32 values: every draw is one of them, all are drawn,
    and draws that round up to high are clamped below it."""
    ulp = 2.0 ** -23
    got = build(model([node("RandomUniform", [], "u", shape=[10000], low=1.0, high=1 + 4 * ulp, seed=2.0)],
                      outputs=[("u", F32)]), target).run({})["u"]
    assert sorted(np.unique(got).tolist()) == [1 + k * ulp for k in range(4)]


def test_uniform_degenerate_range_gives_low(target):
    got = build(model([node("RandomUniform", [], "u", shape=[100], low=0.1, high=0.1, seed=2.0)],
                      outputs=[("u", F32)]), target).run({})["u"]
    np.testing.assert_array_equal(got, np.full(100, 0.1, F32))


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("in_dtype,out_dtype", [(F32, I32), (F64, I64), (F16, I64)])
def test_multinomial_frequencies(target, in_dtype, out_dtype):
    """Class frequencies against softmax(logits); a class of logit -inf is never drawn.
    One module, two bindings of (batch, classes)."""
    samples = 40_000
    mod = build(model([node("Multinomial", ["x"], "m", sample_size=samples, seed=8.0, dtype=CODE[out_dtype])],
                      [vinfo("x", in_dtype, ["n", "c"])], [("m", out_dtype)]), target)
    rng = np.random.default_rng(3)
    for x in (np.array([[0.0, 1.0, 2.0, -1.0, -np.inf, 0.5], [-np.inf, 3.0, 3.0, 0.0, 1.0, -np.inf],
                        [5.0, -np.inf, -np.inf, -np.inf, -np.inf, -np.inf]]),
              rng.normal(0, 1.5, (2, 11))):
        x = x.astype(in_dtype)
        got = mod.run({"x": x})["m"]
        assert got.shape == (x.shape[0], samples) and got.dtype == out_dtype
        probs = _softmax(x.astype(F64))
        for row, p in zip(got, probs):
            freq = np.bincount(row, minlength=len(p)) / samples
            assert len(freq) == len(p)
            np.testing.assert_array_equal(freq[p == 0], 0)
            assert np.all(np.abs(freq - p) <= Z * np.sqrt(p * (1 - p) / samples) + 1e-12), (freq, p)


def test_multinomial_shapes(target):
    mod = build(model([node("Multinomial", ["x"], "m", sample_size=0), node("Multinomial", ["x"], "one")],
                      [vinfo("x", F32, ["n", 3])], [("m", I32), ("one", I32)]), target)
    got = mod.run({"x": np.zeros((4, 3), F32)})
    assert got["m"].shape == (4, 0) and got["one"].shape == (4, 1)
    assert np.all((got["one"] >= 0) & (got["one"] < 3))


@pytest.mark.parametrize("p_dtype,out", [(F32, None), (F64, TensorProto.BOOL), (F16, TensorProto.INT32),
                                         (BF16, TensorProto.FLOAT)])
def test_bernoulli_frequencies(target, p_dtype, out):
    """1 with probability p (the op's documentation; onnx.reference draws the same way).
    ONNX's function body for Bernoulli gives 1 - p; symwasm does not use it."""
    n = 50_000
    probs = np.array([0.0, 0.02, 0.3, 0.5, 0.9, 1.0])
    attrs = {} if out is None else {"dtype": out}
    out_np = {None: p_dtype, TensorProto.BOOL: np.bool_, TensorProto.INT32: I32, TensorProto.FLOAT: F32}[out]
    mod = build(model([node("Bernoulli", ["p"], "b", seed=6.0, **attrs)], [vinfo("p", p_dtype, ["k", "n"])],
                      [("b", out_np)]), target)
    p = np.repeat(probs[:, None], n, axis=1).astype(p_dtype)
    got = mod.run({"p": p})["b"]
    assert got.shape == p.shape and got.dtype == out_np
    assert set(np.unique(got.astype(F64)).tolist()) <= {0.0, 1.0}
    freq = got.astype(F64).mean(axis=1)
    exact = p[:, 0].astype(F64)
    assert np.all(np.abs(freq - exact) <= Z * np.sqrt(exact * (1 - exact) / n)), (freq, exact)


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize("nodes,inputs,opset,message", [
    ([node("RandomNormal", [], "y", shape=[2], dtype=TensorProto.INT32)], [], 22,
     r"node 'y' \(RandomNormal\): dtype is int32; RandomNormal takes float16, float32, float64, bfloat16"),
    ([node("RandomUniform", [], "y", shape=[2], dtype=TensorProto.BFLOAT16)], [], 21,
     r"node 'y' \(RandomUniform\): dtype is bfloat16, which RandomUniform-1 does not take \(version 22 does\)"),
    ([node("RandomUniform", [], "y", shape=[2, -1])], [], 22,
     r"node 'y' \(RandomUniform\): shape \[2, -1\] has a negative dim"),
    ([node("RandomUniform", [], "y", shape=[2], low=2.0, high=1.0)], [], 22,
     r"node 'y' \(RandomUniform\): low 2.0 is greater than high 1.0"),
    ([node("RandomUniform", [], "y", shape=[2], low=1.0001, high=1.0002, dtype=TensorProto.FLOAT16)], [], 22,
     r"node 'y' \(RandomUniform\): no float16 value lies in \[low, high\)"),
    ([node("RandomUniformLike", ["x"], "y")], [vinfo("x", I64, [2])], 22,
     r"node 'y' \(RandomUniformLike\): input 'x' is int64 and there is no dtype attribute"),
    ([node("RandomNormalLike", ["x"], "y", dtype=TensorProto.STRING)], [vinfo("x", F32, [2])], 22,
     r"node 'y' \(RandomNormalLike\): dtype is string; RandomNormalLike takes float16, float32, float64, bfloat16"),
    ([node("Multinomial", ["x"], "y", sample_size=-2)], [vinfo("x", F32, [2, 3])], 22,
     r"node 'y' \(Multinomial\): sample_size -2 is negative"),
    ([node("Multinomial", ["x"], "y", dtype=TensorProto.FLOAT)], [vinfo("x", F32, [2, 3])], 22,
     r"node 'y' \(Multinomial\): dtype float32 is not one of int32, int64"),
    ([node("Multinomial", ["x"], "y")], [vinfo("x", F32, [3])], 22,
     r"node 'y' \(Multinomial\): input 'x' has shape \(3,\); Multinomial takes \(batch, classes\)"),
    ([node("Multinomial", ["x"], "y")], [vinfo("x", F32, [2, 0])], 22,
     r"node 'y' \(Multinomial\): the number of classes \(dim 1 of input 'x'\): 1 > 0"),
    ([node("Bernoulli", ["x"], "y")], [vinfo("x", BF16, [2])], 21,
     r"node 'y' \(Bernoulli\): input 'x' is bfloat16, which Bernoulli-15 does not take"),
])
def test_compile_errors(target, nodes, inputs, opset, message):
    with pytest.raises(CompileError, match=message):
        build(model(nodes, inputs, [("y", F32)], opset=opset), target)


def test_multinomial_without_classes_fails_at_run_time(target):
    mod = build(model([node("Multinomial", ["x"], "y", sample_size=2)], [vinfo("x", F32, ["n", "c"])], [("y", I32)]),
                target)
    with pytest.raises(wasm_runtime.ModelError,
                       match=r"node 'y' \(Multinomial\): the number of classes \(dim 1 of input 'x'\): c = 0 is less "
                             r"than 1"):
        mod.run({"x": np.zeros((2, 0), F32)})
