"""The small dtypes (format 3.2): bfloat16, float8 (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz),
float4 e2m1, int4/uint4, int2/uint2. Cast to and from each, moved through data-movement
ops, and (bfloat16) computed on by arithmetic ops, on both targets, from one module at
several bindings of a symbolic dim. Expected values come from onnx.reference, which
converts with ml_dtypes, or from numpy in float32 rounded to the format (ml_dtypes)."""
import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

from util import check_model, make_model, rand

NARROW = {
    "bfloat16": TensorProto.BFLOAT16,
    "float8_e4m3fn": TensorProto.FLOAT8E4M3FN,
    "float8_e4m3fnuz": TensorProto.FLOAT8E4M3FNUZ,
    "float8_e5m2": TensorProto.FLOAT8E5M2,
    "float8_e5m2fnuz": TensorProto.FLOAT8E5M2FNUZ,
    "float4_e2m1fn": TensorProto.FLOAT4E2M1,
}
SMALL_INTS = {"int4": TensorProto.INT4, "uint4": TensorProto.UINT4, "int2": TensorProto.INT2,
              "uint2": TensorProto.UINT2}


def _vi(name, code, shape):
    return helper.make_tensor_value_info(name, code, shape)


def _values(rng, n, scale):
    """Ordinary values, values at the formats' edges, and the specials."""
    x = (rng.standard_normal((n, 7)) * scale).astype(np.float32)
    x.flat[:7] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e6, -1e-7][: x.size]
    return x


@pytest.mark.parametrize("name", list(NARROW))
def test_cast_float32_there_and_back(name, target):
    """float32 -> format (rounding to nearest even, saturating) -> float32."""
    code = NARROW[name]
    m = make_model([helper.make_node("Cast", ["x"], ["q"], to=code), helper.make_node("Cast", ["q"], ["y"], to=1)],
                   [_vi("x", TensorProto.FLOAT, ["n", 7])], [_vi("q", code, None), _vi("y", TensorProto.FLOAT, None)],
                   opset=23)
    rng = np.random.default_rng(0)
    scale = float(ml_dtypes.finfo(getattr(ml_dtypes, name)).max) / 4
    check_model(m, target, [{"x": _values(rng, n, scale)} for n in (1, 3, 0)])


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz"])
def test_cast_without_saturation(name, target):
    """saturate=0: out of range becomes infinity (e5m2) or NaN."""
    code = NARROW[name]
    m = make_model([helper.make_node("Cast", ["x"], ["q"], to=code, saturate=0)],
                   [_vi("x", TensorProto.FLOAT, ["n"])], [_vi("q", code, None)], opset=23)
    rng = np.random.default_rng(1)
    big = float(ml_dtypes.finfo(getattr(ml_dtypes, name)).max)
    check_model(m, target, [{"x": np.concatenate([rng.uniform(-2 * big, 2 * big, n), [np.inf, -np.inf, 1e9]])
                             .astype(np.float32)} for n in (2, 9)])


@pytest.mark.parametrize("name", list(SMALL_INTS))
def test_cast_small_ints(name, target):
    """float32 and int32 -> small int wrap (keep the low bits), and back sign- or zero-extend."""
    code = SMALL_INTS[name]
    m = make_model([helper.make_node("Cast", ["x"], ["q"], to=code), helper.make_node("Cast", ["i"], ["r"], to=code),
                    helper.make_node("Cast", ["q"], ["y"], to=TensorProto.INT32)],
                   [_vi("x", TensorProto.FLOAT, ["n"]), _vi("i", TensorProto.INT32, ["n"])],
                   [_vi("q", code, None), _vi("r", code, None), _vi("y", TensorProto.INT32, None)], opset=23)
    rng = np.random.default_rng(2)
    check_model(m, target, [{"x": rng.integers(-20, 20, n).astype(np.float32), "i": rng.integers(-20, 20, n,
                                                                                               dtype=np.int32)}
                            for n in (1, 5, 16)])


@pytest.mark.parametrize("name", list(NARROW) + list(SMALL_INTS))
def test_moved_by_data_movement_ops(name, target):
    """Inputs and outputs of the format (the host passes its codes through), moved by
    Transpose, Concat, Gather, Slice and Reshape without conversion."""
    code = {**NARROW, **SMALL_INTS}[name]
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
             helper.make_node("Concat", ["t", "t"], ["c"], axis=1),
             helper.make_node("Gather", ["c", "idx"], ["g"], axis=1),
             helper.make_node("Reshape", ["g", "shape"], ["y"])]
    m = make_model(nodes, [_vi("x", code, ["n", 3]), _vi("idx", TensorProto.INT64, [2])],
                   [_vi("y", code, None)],
                   [helper.make_tensor("shape", TensorProto.INT64, [1], [-1])], opset=23)
    rng = np.random.default_rng(3)
    t = getattr(ml_dtypes, name)
    lo, hi = (-4, 4) if name in SMALL_INTS else (-3, 3)
    feeds = [{"x": rng.integers(lo, hi, (n, 3)).astype(t) if name in SMALL_INTS else
              rand(rng, (n, 3)).astype(t), "idx": np.array([0, 2 * n - 1], np.int64)} for n in (1, 4)]
    check_model(m, target, feeds)


def _bf16_reference(fn):
    """fn computed in float32 on the bfloat16 inputs, the result rounded to bfloat16 once
    (what symwasm does: bfloat16 computes in float32)."""
    def ref(model, feeds):
        f32 = {k: v.astype(np.float32) for k, v in feeds.items()}
        return {model.graph.output[0].name: fn(**f32).astype(ml_dtypes.bfloat16)}
    return ref


@pytest.mark.parametrize("op,fn", [
    ("Add", lambda a, b: a + b), ("Mul", lambda a, b: a * b), ("Max", lambda a, b: np.maximum(a, b)),
    ("MatMul", lambda a, b: a @ b.T),
])
def test_bfloat16_arithmetic(op, fn, target):
    bt = TensorProto.BFLOAT16
    nodes = [helper.make_node(op, ["a", "bt"] if op == "MatMul" else ["a", "b"], ["y"])]
    if op == "MatMul":
        nodes.insert(0, helper.make_node("Transpose", ["b"], ["bt"], perm=[1, 0]))
    # b broadcasts (at run time: m is 1 or n) for the elementwise ops
    m = make_model(nodes, [_vi("a", bt, ["n", 8]), _vi("b", bt, ["m", 8] if op != "MatMul" else [4, 8])],
                   [_vi("y", bt, None)], opset=23)
    rng = np.random.default_rng(4)
    feeds = [{"a": rand(rng, (n, 8)).astype(ml_dtypes.bfloat16),
              "b": rand(rng, ((n if n < 6 else 1) if op != "MatMul" else 4, 8)).astype(ml_dtypes.bfloat16)}
             for n in (1, 3, 6)]
    check_model(m, target, feeds, rtol=1e-2, atol=1e-2, ref=_bf16_reference(fn))


def test_bfloat16_softmax_and_reduce(target):
    bt = TensorProto.BFLOAT16
    m = make_model([helper.make_node("Softmax", ["x"], ["s"], axis=-1),
                    helper.make_node("ReduceSum", ["s", "ax"], ["y"], keepdims=0)],
                   [_vi("x", bt, ["n", 5])], [_vi("y", bt, None)],
                   [helper.make_tensor("ax", TensorProto.INT64, [1], [1])], opset=23)

    def fn(x):
        e = np.exp(x - x.max(-1, keepdims=True))
        s = (e / e.sum(-1, keepdims=True)).astype(ml_dtypes.bfloat16).astype(np.float32)
        return s.sum(-1)
    rng = np.random.default_rng(5)
    check_model(m, target, [{"x": rand(rng, (n, 5)).astype(ml_dtypes.bfloat16)} for n in (1, 4)],
                rtol=1e-2, atol=1e-2, ref=_bf16_reference(fn))
