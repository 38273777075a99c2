"""MatMul, Gemm, Softmax and LayerNormalization on both targets against onnx.reference, each
compiled once and run with several bindings of its symbolic dims (sizes that are not a
multiple of the SIMD width, and 0 where the op allows it)."""
import numpy as np
import pytest
from onnx import helper

import wasm_runtime
from toolkit.compiler import compile_model
from toolkit.ir.graph import CompileError
from util import _TMP, assert_outputs_match, build, check_model, const, make_model, rand, reference, vinfo

F32 = np.float32


def run_op(op, inputs, bindings, target, rng, outputs=("y",), initializers=(), opset=17, atol=1e-5,
           **attrs):
    """Compile one ``op`` node whose ``inputs`` are (name, dtype, symbolic shape), then check
    it for each binding (a dict of symbol -> size)."""
    node = helper.make_node(op, [name for name, _, _ in inputs] + [i.name for i in initializers],
                            list(outputs), name="node", **attrs)
    model = make_model([node], [vinfo(n, dt, list(s)) for n, dt, s in inputs],
                       [vinfo(o, F32, None) for o in outputs if o], initializers, opset)
    feeds = [{n: rand(rng, [b.get(d, d) for d in s], dt) for n, dt, s in inputs} for b in bindings]
    return check_model(model, target, feeds, atol=atol)


# ----------------------------------------------------------------------------- MatMul

MATMUL = [
    # (a shape, b shape, bindings)
    (["n", 6], [6, "m"], [dict(n=1, m=3), dict(n=7, m=37), dict(n=0, m=5), dict(n=3, m=0)]),
    (["n", "k"], ["k"], [dict(n=5, k=37), dict(n=1, k=0), dict(n=0, k=3)]),
    (["k"], ["k", "m"], [dict(k=5, m=9), dict(k=1, m=1)]),
    (["k"], ["k"], [dict(k=13), dict(k=0)]),
    (["b", 1, "m", 4], ["h", 4, "n"], [dict(b=2, h=3, m=5, n=7), dict(b=1, h=1, m=1, n=1), dict(b=3, h=2, m=0, n=2)]),
    # batch dims broadcast in whichever direction the run-time sizes say
    (["p", "m", 3], ["q", 3, 2], [dict(p=1, q=4, m=5), dict(p=3, q=1, m=2), dict(p=2, q=2, m=3)]),
    ([2, "m", 3], [3, 5], [dict(m=1), dict(m=6)]),
]


@pytest.mark.parametrize("a_shape,b_shape,bindings", MATMUL, ids=[f"{a}x{b}".replace(" ", "") for a, b, _ in MATMUL])
def test_matmul(a_shape, b_shape, bindings, target):
    run_op("MatMul", [("a", F32, a_shape), ("b", F32, b_shape)], bindings, target, np.random.default_rng(1))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_matmul_int(dtype, target):
    rng = np.random.default_rng(2)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])],
                       [vinfo("a", dtype, ["b", "n", 5]), vinfo("b", dtype, [5, "m"])], [vinfo("y", dtype, None)])
    check_model(model, target, [{"a": rand(rng, (b, n, 5), dtype, -9, 9), "b": rand(rng, (5, m), dtype, -9, 9)}
                                for b, n, m in [(1, 3, 7), (2, 1, 1), (3, 5, 0)]])


def test_matmul_static_k_mismatch():
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")],
                       [vinfo("a", F32, ["n", 3]), vinfo("b", F32, [4, 2])], [vinfo("y", F32, None)])
    with pytest.raises(CompileError, match=r"node 'mm' \(MatMul\): inner dims \('a' dim 1 vs 'b' dim 0\): 3 != 4"):
        compile_model(model, _TMP / "mm_k.wasm")


def test_matmul_runtime_k_mismatch(target):
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")],
                       [vinfo("a", F32, ["n", "k"]), vinfo("b", F32, ["j", "m"])], [vinfo("y", F32, None)])
    mod = build(model, target)
    rng = np.random.default_rng(3)
    msg = r"node 'mm' \(MatMul\): inner dims \('a' dim 1 vs 'b' dim 0\): k = 3 does not equal j = 4"
    with pytest.raises(wasm_runtime.ModelError, match=msg):
        mod.run({"a": rand(rng, (2, 3)), "b": rand(rng, (4, 5))})
    feeds = {"a": rand(rng, (2, 4)), "b": rand(rng, (4, 5))}
    assert_outputs_match(mod.run(feeds), reference(model, feeds), atol=1e-5)


# ----------------------------------------------------------------------------- Gemm

GEMM_BINDINGS = [dict(m=1, n=3, k=9), dict(m=7, n=37, k=21), dict(m=0, n=4, k=2), dict(m=3, n=0, k=5),
                 dict(m=2, n=3, k=0)]
GEMM = [
    # (transA, transB, C shape or None, alpha, beta)
    (0, 0, None, 1.0, 1.0),
    (0, 1, ["n"], 0.5, 2.0),
    (1, 0, ["m", 1], 1.0, 1.0),
    (1, 1, ["m", "n"], 1.5, 0.25),
    (0, 1, [], 1.0, 0.0),  # beta 0: C is ignored
    (0, 0, [1, "n"], -1.0, 1.0),
]


@pytest.mark.parametrize("ta,tb,c_shape,alpha,beta", GEMM, ids=str)
def test_gemm(ta, tb, c_shape, alpha, beta, target):
    a = ["k", "m"] if ta else ["m", "k"]
    b = ["n", "k"] if tb else ["k", "n"]
    inputs = [("a", F32, a), ("b", F32, b)] + ([("c", F32, c_shape)] if c_shape is not None else [])
    run_op("Gemm", inputs, GEMM_BINDINGS, target, np.random.default_rng(4),
           transA=ta, transB=tb, alpha=alpha, beta=beta)


def test_gemm_constant_weights(target):
    """A constant B with transB (a Linear layer) and a constant bias."""
    rng = np.random.default_rng(5)
    w, bias = const("w", rand(rng, (6, 17))), const("bias", rand(rng, (6,)))
    run_op("Gemm", [("a", F32, ["m", 17])], [dict(m=1), dict(m=5), dict(m=0)], target, rng,
           initializers=[w, bias], transB=1)


def test_gemm_c_does_not_stretch_y(target):
    """C broadcasts one way only: a dim of C may be 1, never larger than Y's."""
    model = make_model([helper.make_node("Gemm", ["a", "b", "c"], ["y"], name="g")],
                       [vinfo("a", F32, ["m", 3]), vinfo("b", F32, [3, 4]), vinfo("c", F32, ["p", 4])],
                       [vinfo("y", F32, None)])
    mod = build(model, target)
    rng = np.random.default_rng(9)
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'g' \(Gemm\): C 'c' dim 0: dim p = 3 does not broadcast with m = 1"):
        mod.run({"a": rand(rng, (1, 3)), "b": rand(rng, (3, 4)), "c": rand(rng, (3, 4))})
    for m, p in [(3, 1), (3, 3)]:
        feeds = {"a": rand(rng, (m, 3)), "b": rand(rng, (3, 4)), "c": rand(rng, (p, 4))}
        assert_outputs_match(mod.run(feeds), reference(model, feeds), atol=1e-5)


# ----------------------------------------------------------------------------- Softmax


@pytest.mark.parametrize("axis", [-1, 1, 0])
def test_softmax(axis, target):
    rng = np.random.default_rng(6)
    node = helper.make_node("Softmax", ["x"], ["y"], axis=axis)
    model = make_model([node], [vinfo("x", F32, ["n", 5, 3])], [vinfo("y", F32, None)])
    # large magnitudes: exp overflows unless the maximum is subtracted first
    check_model(model, target, [{"x": rand(rng, (n, 5, 3), F32, -80, 80)} for n in (1, 3, 7, 0)])


def test_softmax_opset13_default_axis(target):
    rng = np.random.default_rng(7)
    run_op("Softmax", [("x", F32, ["n", "c"])], [dict(n=2, c=13), dict(n=3, c=1), dict(n=1, c=0)], target, rng,
           opset=13)


# ----------------------------------------------------------------------------- LayerNormalization

LAYERNORM = [
    # (axis, scale shape, bias shape or None, outputs)
    (-1, [4], [4], ("y", "mean", "inv")),
    (1, [5, 4], None, ("y",)),
    (-2, [1, 5, 4], [5, 4], ("y", "", "inv")),
    # Scale repeats within a row and B varies along the outer dim: the broadcasting path
    (-1, [1], ["n", 5, 1], ("y", "mean")),
]


@pytest.mark.parametrize("axis,scale,bias,outputs", LAYERNORM, ids=str)
def test_layer_norm(axis, scale, bias, outputs, target):
    inputs = [("x", F32, ["n", 5, 4]), ("s", F32, scale)] + ([("b", F32, bias)] if bias is not None else [])
    run_op("LayerNormalization", inputs, [dict(n=1), dict(n=3), dict(n=7), dict(n=0)], target,
           np.random.default_rng(8), outputs=outputs, axis=axis, epsilon=1e-3)
