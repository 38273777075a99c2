"""The small dtypes (format 3.2): bfloat16, float8 (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz),
float4 e2m1, int4/uint4, int2/uint2; and (format 3.3) float8 e8m0. Cast to and from each,
moved through data-movement ops, and (bfloat16) computed on by arithmetic ops, on both
targets, from one module at several bindings of a symbolic dim. Expected values come from
onnx.reference, which converts with ml_dtypes (and e8m0 with onnx's to_float8e8m0), or
from numpy in float32 rounded to the format (ml_dtypes)."""
import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

from toolkit.ir.graph import CompileError
from util import build, check_model, make_model, rand, reference

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


@pytest.mark.parametrize("name", list(NARROW) + list(SMALL_INTS) + ["float8_e8m0fnu"])
def test_moved_by_data_movement_ops(name, target):
    """Inputs and outputs of the format (the host passes its codes through), moved by
    Transpose, Concat, Gather, Slice and Reshape without conversion."""
    code = {**NARROW, **SMALL_INTS, "float8_e8m0fnu": TensorProto.FLOAT8E8M0}[name]
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


# ----------------------------------------------------------------------------- float8 e8m0

E8M0 = TensorProto.FLOAT8E8M0
E8M0_SOURCES = {"x32": (TensorProto.FLOAT, np.float32), "x16": (TensorProto.FLOAT16, np.float16),
                "xb": (TensorProto.BFLOAT16, ml_dtypes.bfloat16), "x64": (TensorProto.DOUBLE, np.float64)}


def _assert_bits_match(got, want) -> None:
    """Outputs equal bit for bit (every NaN too: ml_dtypes makes one quiet NaN per format)."""
    assert set(got) == set(want)
    for name, w in want.items():
        g, w = got[name], np.asarray(w)
        assert (g.dtype, g.shape) == (w.dtype, w.shape), name
        bits = f"u{w.dtype.itemsize}"
        bad = g.view(bits) != w.view(bits)
        assert not bad.any(), (name, [(hex(a), hex(b)) for a, b in zip(g.view(bits)[bad], w.view(bits)[bad])][:8])


def _check_bits(model, target, feeds_list, ref_model=None) -> None:
    """Each feed set's outputs bit for bit against onnx.reference on ``ref_model`` (the
    model itself unless given)."""
    m = build(model, target)
    for feeds in feeds_list:
        with np.errstate(over="ignore"):  # onnx's float64 -> float32 step overflows 1e300, as it should
            want = reference(ref_model or model, {k: v for k, v in feeds.items() if k != "like" or ref_model is None})
        _assert_bits_match(m.run(feeds), want)


def _e8m0_probe32() -> np.ndarray:
    """float32 values at every e8m0 rounding edge: each power of two from the smallest
    subnormal to 2**127, those times 1.25, 1.5 and 1.75, a step either side of each, the
    subnormals whose guard, round and sticky bits decide "nearest", the specials, negatives
    (onnx's reference reads the exponent alone) and random bit patterns."""
    p = np.ldexp(np.float32(1), np.arange(-149, 128)).astype(np.float32)
    with np.errstate(over="ignore"):
        edges = np.concatenate([p, p * np.float32(1.25), p * np.float32(1.5), p * np.float32(1.75)])
    edges = edges[np.isfinite(edges)]
    edges = np.concatenate([edges, np.nextafter(edges, np.float32(np.inf)), np.nextafter(edges, np.float32(0))])
    special = np.array([0x00400000, 0x00400001, 0x00600000, 0x00200000, 0x007FFFFF, 0x7F7FFFFF, 0x7F000000,
                        0x7F400000, 0x7F000001, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x80000000, 0],
                       np.uint32).view(np.float32)
    rng = np.random.default_rng(24)
    noise = rng.integers(0, 2 ** 32, 2000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    return np.concatenate([edges, -edges[::5], special, noise]).astype(np.float32)


def _e8m0_sources() -> dict[str, np.ndarray]:
    """Every float16 and every bfloat16 code; float32 at the edges; float64 where rounding
    to float32 first (as onnx does) and rounding once would differ."""
    x32 = _e8m0_probe32()
    every = np.arange(2 ** 16, dtype=np.uint16)
    p = np.ldexp(1.0, np.arange(-140, 127))
    tiny = 2.0 ** -30
    x64 = np.concatenate([p * (1 + tiny), p * (2 - tiny), p * (1.5 - tiny), p * (1.5 + tiny), p * 1.5, p,
                          [1e300, -1e300, 1e-300, 0.0, np.inf, np.nan, 2.0 ** 128 * (1 - 2.0 ** -25)]])
    return {"x32": x32, "x16": every.view(np.float16), "xb": every.view(ml_dtypes.bfloat16), "x64": x64}


def _cast_to_e8m0_model(op="Cast", **attrs):
    inputs = [_vi(k, code, [f"n_{k}"]) for k, (code, _) in E8M0_SOURCES.items()]
    if op == "Cast":
        nodes = [helper.make_node("Cast", [k], [f"{k}_e8m0"], to=E8M0, **attrs) for k in E8M0_SOURCES]
    else:
        nodes = [helper.make_node("CastLike", [k, "like"], [f"{k}_e8m0"], **attrs) for k in E8M0_SOURCES]
        inputs.append(_vi("like", E8M0, [1]))
    return make_model(nodes, inputs, [_vi(f"{k}_e8m0", E8M0, None) for k in E8M0_SOURCES], opset=25)


@pytest.mark.parametrize("round_mode,saturate", [(r, s) for r in ("up", "down", "nearest") for s in (1, 0)])
def test_cast_to_e8m0(round_mode, saturate, target):
    """float32, float16, bfloat16 and float64 -> e8m0 under each round_mode, saturating or
    not, code for code against onnx.reference (to_float8e8m0)."""
    m = _cast_to_e8m0_model(round_mode=round_mode, saturate=saturate)
    full = _e8m0_sources()
    _check_bits(m, target, [full, {k: v[3::7] for k, v in full.items()}])


def test_castlike_to_e8m0_reads_round_mode(target):
    """CastLike takes round_mode and saturate as Cast does (CastLike-25, whose ONNX function
    is that Cast). The reference is onnx.reference on the Cast: its CastLike ignores
    round_mode."""
    attrs = dict(round_mode="nearest", saturate=0)
    m = _cast_to_e8m0_model("CastLike", **attrs)
    full = {**_e8m0_sources(), "like": np.ones(1, ml_dtypes.float8_e8m0fnu)}
    _check_bits(m, target, [full, {k: v[::11] if k != "like" else v for k, v in full.items()}],
                ref_model=_cast_to_e8m0_model(**attrs))


def test_cast_from_e8m0(target):
    """e8m0 -> float32, float16, bfloat16 and float64, every code (0 is 2**-127, 0xFF NaN),
    bit for bit against ml_dtypes' conversion."""
    outs = {"f32": TensorProto.FLOAT, "f16": TensorProto.FLOAT16, "bf16": TensorProto.BFLOAT16,
            "f64": TensorProto.DOUBLE}
    m = make_model([helper.make_node("Cast", ["q"], [k], to=code) for k, code in outs.items()],
                   [_vi("q", E8M0, ["n"])], [_vi(k, code, None) for k, code in outs.items()], opset=25)
    codes = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e8m0fnu)
    rng = np.random.default_rng(25)
    _check_bits(m, target, [{"q": codes}, {"q": rng.permutation(codes)[:9]}, {"q": codes[:0]}])


def test_cast_e8m0_bad_round_mode():
    m = make_model([helper.make_node("Cast", ["x"], ["q"], to=E8M0, round_mode="zero", name="c")],
                   [_vi("x", TensorProto.FLOAT, [3])], [_vi("q", E8M0, None)], opset=25)
    with pytest.raises(CompileError, match=r"node 'c' \(Cast\): round_mode 'zero' is not one of up, down, nearest"):
        build(m, "wasm32")


def test_host_names_a_dtype_it_does_not_know():
    """A module of a later minor format may carry a dtype this host lacks (as a 3.2 host
    lacks e8m0): the host refuses it by name rather than as a malformed entry."""
    import wasm_runtime

    major, minor = wasm_runtime.FORMAT_VERSION
    meta = {"format": "symwasm", "format_version": [major, minor + 1], "outputs": [],
            "inputs": [{"name": "x", "dtype": "float6_e3m2fn", "shape": ["n"]}]}
    with pytest.raises(ValueError, match=rf"^input 'x' has dtype float6_e3m2fn, which this host does not know \(the "
                                         rf"module is format {major}\.{minor + 1}, this host reads {major}\.{minor}\); "
                                         r"load it with a newer symwasm$"):
        wasm_runtime.check_metadata(meta)
