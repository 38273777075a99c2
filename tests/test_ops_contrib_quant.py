"""onnxruntime's quantization contrib ops (domain com.microsoft;
toolkit/frontend/onnx/ops/contrib_quant.py) against onnxruntime's own CPU kernels: each
model compiled once per target and run at several bindings of its symbolic dims. Integer
outputs must be equal (QLinearSigmoid within one step, see its test); float outputs of
the integer products too, or close where onnxruntime sums in float32 (MatMulNBits)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from util import build, check_model, const, ort_reference, vinfo
from toolkit.ir.graph import CompileError

RNG = np.random.default_rng(2026)
F32, U8, I8, I32 = np.float32, np.uint8, np.int8, np.int32
MS = "com.microsoft"


@pytest.fixture(autouse=True, scope="module")
def _in_a_scratch_folder(tmp_path_factory):
    """onnxruntime's quantizers write scratch files (sym_shape_infer_temp.onnx, external data
    named by UUIDs) into the working directory: keep them out of the checkout."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path_factory.mktemp("quantizer_scratch"))
        yield


def contrib_model(nodes, inputs, outputs, initializers=()):
    g = helper.make_graph(list(nodes), "test", list(inputs), list(outputs), initializer=list(initializers))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    m.ir_version = 8
    return m


def ms_node(op: str, ins: list[str], outs: list[str], **attrs):
    return helper.make_node(op, ins, outs, name=outs[0], domain=MS, **attrs)


def check(model, target, feeds_list, steps: int = 0, rtol: float = 0.0, atol: float = 0.0):
    """One module (its family's, tests/family.py), every feed set against onnxruntime:
    integers within ``steps``, floats within rtol/atol (both 0: bit for bit)."""
    def compare(got, want):
        for name, w in want.items():
            g = got[name]
            assert g.shape == w.shape and g.dtype == w.dtype, (name, g.shape, w.shape, g.dtype, w.dtype)
            if w.dtype.kind == "f":
                np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=name)
            else:
                diff = np.abs(g.astype(np.int64) - w.astype(np.int64))
                assert diff.max(initial=0) <= steps, (name, int(diff.max()), int((diff > steps).sum()))

    return check_model(model, target, feeds_list, ref=ort_reference, compare=compare)


def q(dtype, shape) -> np.ndarray:
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max + 1, size=shape).astype(dtype)


def scale(lo: float = 0.002, hi: float = 0.1) -> np.ndarray:
    return np.array(RNG.uniform(lo, hi), F32)


def zp(dtype, shape=()) -> np.ndarray:
    return q(dtype, shape)


def all_pairs(dtype) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of 8-bit values, as two (256, 256) operands: with random scales, some
    sums land within float32 rounding of a tie, where the order of roundings decides."""
    info = np.iinfo(dtype)
    v = np.arange(info.min, info.max + 1).astype(dtype)
    return np.repeat(v, 256).reshape(256, 256), np.tile(v, 256).reshape(256, 256)


# ----------------------------------------------------------------------------- QLinearAdd, QLinearMul

PARAMS = ["sa", "za", "sb", "zb", "sc", "zc"]


def _binary_model(op, dtype, a_shape, b_shape, zp_shape=()):
    ins = [vinfo("a", dtype, a_shape), vinfo("b", dtype, b_shape)]
    ins += [vinfo(p, F32 if p[0] == "s" else dtype, list(zp_shape)) for p in PARAMS]
    return contrib_model([ms_node(op, ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"], ["y"])], ins,
                         [vinfo("y", dtype, None)])


def _parameters(op, dtype) -> dict:
    feeds = {p: scale() if p[0] == "s" else zp(dtype) for p in PARAMS}
    if op == "QLinearMul":  # products of up to 2 ** 16 brought back to about the 8-bit range
        feeds["sc"] = np.asarray(feeds["sa"] * feeds["sb"] * F32(RNG.uniform(30, 300)), F32)
    return feeds


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("dtype", [U8, I8])
def test_qlinear_binary_every_pair(target, op, dtype):
    # parameters at run time (scalars: onnxruntime's shape inference refuses 1-D ones here);
    # every pair of values at 48 random scale sets: the fused multiply-adds of QLinearAdd
    # (and the rounding of its fixed part) and QLinearMul's zero point added in float32
    # before rounding decide the values within float32 rounding of a tie, a few in a
    # million, which another order of roundings gets wrong
    model = _binary_model(op, dtype, ["n", "m"], ["n", "m"])
    a, b = all_pairs(dtype)
    feeds = [{"a": a, "b": b, **_parameters(op, dtype)} for _ in range(48)]
    feeds.append({"a": q(dtype, (3, 5)), "b": q(dtype, (3, 5)), **_parameters(op, dtype)})
    check(model, target, feeds)


BROADCASTS = {  # (A's shape, B's shape): every pair of values at n = m = 256
    "B column": (["n", "m"], ["n", 1]),
    "B row": (["n", "m"], ["m"]),
    "A column": (["n", 1], ["n", "m"]),
    "A one": ([], ["n", "m"]),
    "B one": (["n", "m"], [1]),
}


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("case", list(BROADCASTS))
def test_qlinear_binary_broadcast(target, op, case):
    # one value of A or B per span (onnxruntime's kernel then takes that operand second,
    # QLinearAdd's operands trading places), or B a row of A
    a_shape, b_shape = BROADCASTS[case]
    dims = {"n": 256, "m": 256}
    for dtype in (U8, I8):
        model = _binary_model(op, dtype, a_shape, b_shape)
        rows, cols = all_pairs(dtype)
        feeds = []
        for _ in range(12):
            if case == "B column":
                a, b = cols, rows[:, :1]
            elif case == "B row":
                a, b = rows, cols[0]
            elif case == "A column":
                a, b = rows[:, :1], cols
            else:  # one value against all the others, a different one each time
                one = q(dtype, (1,) if case == "B one" else ())
                a, b = (rows, one) if case == "B one" else (one, rows)
            feeds.append({"a": a, "b": b, **_parameters(op, dtype)})
        small = {"n": 3, "m": 7}
        feeds.append({"a": q(dtype, tuple(small.get(d, d) for d in a_shape)),
                      "b": q(dtype, tuple(small.get(d, d) for d in b_shape)), **_parameters(op, dtype)})
        assert all(f["a"].shape == tuple(dims.get(d, d) for d in a_shape) for f in feeds[:-1])
        check(model, target, feeds)


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
def test_qlinear_binary_constant_parameters(target, op):
    # constant scales and zero points (combined at compile time), every pair of values; A of
    # one element, which trades places with B
    for dtype in (U8, I8):
        c_scale = F32(0.05) if op == "QLinearAdd" else F32(0.0004)
        inits = [const("sa", F32(0.031)), const("sb", F32(0.017)), const("sc", c_scale), const("za", zp(dtype)),
                 const("zb", zp(dtype)), const("zc", zp(dtype))]
        rows, cols = all_pairs(dtype)
        for a_shape in (["n", "m"], [1]):
            model = contrib_model([ms_node(op, ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"], ["y"])],
                                  [vinfo("a", dtype, a_shape), vinfo("b", dtype, ["n", "m"])],
                                  [vinfo("y", dtype, None)], inits)
            if a_shape == [1]:
                feeds = [{"a": rows[k, :1], "b": cols} for k in range(0, 256, 5)]
            else:
                feeds = [{"a": rows, "b": cols}]
            feeds.append({"a": q(dtype, (5, 9) if a_shape != [1] else (1,)), "b": q(dtype, (5, 9))})
            check(model, target, feeds)


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
def test_qlinear_binary_absent_zero_points(target, op):
    # zero points left out mean 0; onnxruntime's shape inference refuses the node without
    # them, so its reference is the same node given zero points of 0
    rows, cols = all_pairs(I8)
    inits = [const("sa", F32(0.023)), const("sb", F32(0.041)), const("sc", F32(0.05 if op == "QLinearAdd" else 0.003))]
    ins, outs = [vinfo("a", I8, ["n", "m"]), vinfo("b", I8, ["n", "m"])], [vinfo("y", I8, None)]
    ours = contrib_model([ms_node(op, ["a", "sa", "", "b", "sb", "", "sc"], ["y"])], ins, outs, inits)
    theirs = contrib_model([ms_node(op, ["a", "sa", "z", "b", "sb", "z", "sc", "z"], ["y"])], ins, outs,
                           inits + [const("z", np.int8(0))])
    m = build(ours, target)
    for feeds in ({"a": rows, "b": cols}, {"a": q(I8, (2, 3)), "b": q(I8, (2, 3))}):
        np.testing.assert_array_equal(m.run(feeds)["y"], ort_reference(theirs, feeds)["y"])


def test_qlinear_binary_refusals():
    model = _binary_model("QLinearAdd", U8, ["n"], ["n"], [3])
    with pytest.raises(CompileError, match=r"QLinearAdd\): A_scale 'sa' has shape float32\(3,\); it must have one element"):
        build(model, "native")
    g = contrib_model([ms_node("QLinearMul", ["a", "s", "", "b", "s", "", "s", ""], ["y"])],
                      [vinfo("a", U8, [4]), vinfo("b", I8, [4]), vinfo("s", F32, [])], [vinfo("y", U8, None)])
    with pytest.raises(CompileError, match=r"A and B differ in dtype"):
        build(g, "native")


# ----------------------------------------------------------------------------- QLinearSigmoid, QLinearLeakyRelu


def _activation(op, dtype, constant: bool, ratio=None, shape=(), **attrs):
    """The op with its scales and zero points constant or inputs, of ``shape``: () or (1,)
    (per tensor either way)."""
    names = ["x", "xs", "xz", "ys", "yz"]
    params = {"xs": scale(0.01, 0.08), "xz": zp(dtype), "ys": scale(1 / 300, 1 / 200), "yz": zp(dtype)}
    if op == "QLinearLeakyRelu":
        params["ys"] = scale(0.005, 0.05) if ratio is None else np.asarray(params["xs"] * F32(ratio), F32)
    params = {k: v.reshape(shape) for k, v in params.items()}
    ins = [vinfo("x", dtype, ["n", "m"])]
    inits = []
    if constant:
        inits = [const(k, v) for k, v in params.items()]
    else:
        ins += [vinfo(k, v.dtype, list(shape)) for k, v in params.items()]
    model = contrib_model([ms_node(op, names, ["y"], **attrs)], ins, [vinfo("y", dtype, None)], inits)
    return model, ({} if constant else params)


def _every_value(dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.arange(info.min, info.max + 1).astype(dtype).reshape(16, 16)


@pytest.mark.parametrize("dtype", [U8, I8])
def test_qlinear_sigmoid(target, dtype):
    # every input value, parameters constant and at run time. onnxruntime maps each value
    # through a table built with MLAS's own sigmoid approximation; where sigmoid(x) / y_scale
    # lies within float32 rounding of a tie between two steps, the two approximations may
    # round to neighbouring steps, so one step is allowed (and no more)
    for constant, shape in ((True, ()), (False, ()), (False, (1,)), (True, (1,))):
        for _ in range(2):
            model, params = _activation("QLinearSigmoid", dtype, constant, shape=shape)
            check(model, target, [{"x": _every_value(dtype), **params}, {"x": q(dtype, (3, 5)), **params}], steps=1)


@pytest.mark.parametrize("dtype", [U8, I8])
def test_qlinear_leaky_relu(target, dtype):
    # exact: dequantized, a float32 multiply by alpha (default 0.01), divided by y_scale;
    # y_scale twice x_scale puts half the non-negative values on ties
    for constant, ratio, shape, attrs in ((True, None, (), {"alpha": 0.2}), (False, None, (1,), {}),
                                          (False, 2.0, (), {"alpha": 0.01}), (True, 2.0, (1,), {})):
        for _ in range(3):
            model, params = _activation("QLinearLeakyRelu", dtype, constant, ratio, shape, **attrs)
            check(model, target, [{"x": _every_value(dtype), **params}, {"x": q(dtype, (1, 7)), **params}])


# ----------------------------------------------------------------------------- QLinearSoftmax

# (x shape, axis, opset, bindings of n and k): over the last axis, the length symbolic (the
# exp table is built at run time); over a middle axis (onnxruntime transposes it last);
# before opset 13 over all the dims from axis on (static length 20: a constant table)
SOFTMAX_CASES = {
    "last": ((["n", "k"], -1, 13), [(3, 10), (2, 1), (4, 300)]),
    "middle": ((["n", "k", 3], 1, 13), [(2, 7), (1, 1)]),
    "flattened": ((["n", 4, 5], 1, 12), [(3, 0), (1, 0)]),
}


@pytest.mark.parametrize("dtype", [U8, I8])
@pytest.mark.parametrize("case", list(SOFTMAX_CASES))
@pytest.mark.parametrize("constant", [True, False], ids=["constant", "runtime"])
def test_qlinear_softmax(target, dtype, case, constant):
    # onnxruntime's table of exp over the 256 differences from a row's max, its in-order
    # float32 row sum and floor(1 / y_scale): bit for bit. y_scale 1/256 with the zero
    # point the quantizer writes (0, or -128 for int8), then random ones; rows of one
    # element (probability 1) saturate, and with the row's table entries near float32's
    # maximum they would overflow had the kernel multiplied before dividing
    (shape, axis, opset), bindings = SOFTMAX_CASES[case]
    zero = np.array(-128 if dtype == I8 else 0, dtype)
    for ys, yz in ((np.array(1 / 256, F32), zero), (scale(0.001, 0.02), zp(dtype))):
        params = {"xs": scale(0.01, 0.2), "xz": zp(dtype), "ys": ys, "yz": yz}
        ins = [vinfo("x", dtype, shape)]
        inits = [const(k, v) for k, v in params.items()] if constant else []
        if not constant:
            ins += [vinfo(k, v.dtype, []) for k, v in params.items()]
        model = contrib_model([ms_node("QLinearSoftmax", ["x", "xs", "xz", "ys", "yz"], ["y"], axis=axis,
                                       opset=opset)], ins, [vinfo("y", dtype, None)], inits)
        dims = [[{"n": n, "k": k}.get(d, d) for d in shape] for n, k in bindings]
        check(model, target, [{"x": q(dtype, d), **({} if constant else params)} for d in dims])


def test_qlinear_softmax_refusals():
    ins = [vinfo("x", U8, ["n", 4]), vinfo("s", F32, []), vinfo("z", U8, [])]
    out = [vinfo("y", U8, None)]
    with pytest.raises(CompileError, match=r"QLinearSoftmax\): attribute 'opset' is required"):
        build(contrib_model([ms_node("QLinearSoftmax", ["x", "s", "z", "s", "z"], ["y"])], ins, out), "native")
    with pytest.raises(CompileError, match=r"QLinearSoftmax\): axis 2 is out of range for input 'x' of rank 2"):
        build(contrib_model([ms_node("QLinearSoftmax", ["x", "s", "z", "s", "z"], ["y"], axis=2, opset=13)], ins,
                            out), "native")


# ----------------------------------------------------------------------------- QLinearConcat


@pytest.mark.parametrize("dtype", [U8, I8])
def test_qlinear_concat(target, dtype):
    # three inputs: one at the output's own scale and zero point (the same values, copied),
    # one at constant other ones, one at run-time ones (1-D of one element); concatenated
    # along the symbolic axis 1
    ys, yz = scale(0.02, 0.05), zp(dtype)
    inits = [const("ys", ys), const("yz", yz), const("s1", scale()), const("z1", zp(dtype))]
    names = ["ys", "yz", "x0", "ys", "yz", "x1", "s1", "z1", "x2", "s2", "z2"]
    ins = [vinfo("x0", dtype, ["n", 2]), vinfo("x1", dtype, ["n", "k"]), vinfo("x2", dtype, ["n", 3]),
           vinfo("s2", F32, [1]), vinfo("z2", dtype, [1])]
    model = contrib_model([ms_node("QLinearConcat", names, ["y"], axis=1)], ins, [vinfo("y", dtype, None)], inits)
    feeds = [{"x0": q(dtype, (n, 2)), "x1": q(dtype, (n, k)), "x2": q(dtype, (n, 3)),
              "s2": scale(0.01, 0.2).reshape(1), "z2": zp(dtype, (1,))} for n, k in ((256, 4), (5, 1), (1, 0))]
    check(model, target, feeds)


def test_qlinear_concat_refusals():
    ins = [vinfo("x", U8, [2]), vinfo("s", F32, []), vinfo("z", U8, [])]
    bad = contrib_model([ms_node("QLinearConcat", ["s", "z", "x", "s"], ["y"], axis=0)], ins, [vinfo("y", U8, None)])
    with pytest.raises(CompileError, match=r"QLinearConcat\): has 4 inputs"):
        build(bad, "native")
    no_axis = contrib_model([ms_node("QLinearConcat", ["s", "z", "x", "s", "z"], ["y"])], ins, [vinfo("y", U8, None)])
    with pytest.raises(CompileError, match=r"attribute 'axis' is required"):
        build(no_axis, "native")


# ----------------------------------------------------------------------------- pooling


@pytest.mark.parametrize("dtype", [U8, I8])
@pytest.mark.parametrize("channels_last", [0, 1])
def test_qlinear_global_average_pool(target, dtype, channels_last):
    # symbolic spatial dims (the image size found at run time) and fixed ones (a constant
    # multiplier); parameters at run time and constant
    shape = ["n", "h", "w", 3] if channels_last else ["n", 3, "h", "w"]
    names = ["x", "xs", "xz", "ys", "yz"]
    pshape = [1] if channels_last else []  # per-tensor parameters as 1-D tensors of one, or scalars
    runtime = [vinfo(p, F32 if p[1] == "s" else dtype, pshape) for p in ("xs", "xz", "ys", "yz")]
    model = contrib_model([ms_node("QLinearGlobalAveragePool", names, ["y"], channels_last=channels_last)],
                          [vinfo("x", dtype, shape)] + runtime, [vinfo("y", dtype, None)])

    def feeds(n, h, w, ratio=None):
        dims = {"n": n, "h": h, "w": w}
        f = {"xs": scale(), "xz": zp(dtype), "ys": scale(0.001, 0.01), "yz": zp(dtype)}
        if ratio is not None:  # x_scale / (y_scale * image size) a float32 rounding of ratio
            f["xs"] = np.asarray(np.float64(f["ys"]) * h * w * ratio, F32)
        f = {k: v.reshape(pshape) for k, v in f.items()}
        return {"x": q(dtype, tuple(dims.get(d, d) for d in shape)), **f}

    # each sum times a multiplier near 0.5 or 0.25 lies at or next to a tie, where the
    # float32 rounding of x_scale / (y_scale * image size), in that order, decides
    ties = [feeds(64, h, w, r) for h, w in ((3, 1), (5, 3), (7, 7)) for r in (0.5, 0.25, 1.5) for _ in range(3)]
    check(model, target, [feeds(n, h, w) for n, h, w in ((2, 7, 9), (1, 1, 1), (3, 32, 32), (2, 5, 3))] + ties)
    fixed = ["x", "xs", "xz", "ys", "yz"]
    static = [2, 6, 5, 3] if channels_last else [2, 3, 6, 5]
    params = {"xs": scale(), "xz": zp(dtype), "ys": scale(0.001, 0.01), "yz": zp(dtype)}
    model = contrib_model([ms_node("QLinearGlobalAveragePool", fixed, ["y"], channels_last=channels_last)],
                          [vinfo("x", dtype, static)], [vinfo("y", dtype, None)],
                          [const(k, v) for k, v in params.items()])
    check(model, target, [{"x": q(dtype, tuple(static))} for _ in range(5)])


POOLS = [
    {"kernel_shape": [3, 3]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1},
    {"kernel_shape": [2, 3], "strides": [2, 1], "ceil_mode": 1},
    {"kernel_shape": [3, 2], "auto_pad": "SAME_UPPER"},
]


@pytest.mark.parametrize("attrs", range(len(POOLS)))
@pytest.mark.parametrize("channels_last", [0, 1])
def test_qlinear_average_pool(target, attrs, channels_last):
    # the float32 window sums (in the window's row-major order) and onnxruntime's
    # rint(avg / y_scale + y_zero_point), for uint8 and int8, parameters at run time
    for dtype in (U8, I8):
        shape = ["n", "h", "w", 4] if channels_last else ["n", 4, "h", "w"]
        names = ["x", "xs", "xz", "ys", "yz"]
        ins = [vinfo("x", dtype, shape), vinfo("xs", F32, []), vinfo("xz", dtype, []), vinfo("ys", F32, []),
               vinfo("yz", dtype, [])]
        model = contrib_model([ms_node("QLinearAveragePool", names, ["y"], channels_last=channels_last,
                                       **POOLS[attrs])], ins, [vinfo("y", dtype, None)])

        def feeds(n, h, w, ratio=None):
            dims = {"n": n, "h": h, "w": w}
            f = {"x": q(dtype, tuple(dims.get(d, d) for d in shape)), "xs": scale(), "xz": zp(dtype),
                 "ys": scale(0.002, 0.05), "yz": zp(dtype)}
            if ratio is not None:  # averages of multiples of y_scale * ratio: often near ties
                f["xs"] = np.asarray(f["ys"] * F32(ratio), F32)
            return f

        # near ties, the float32 division by y_scale and the zero point added before
        # rounding decide
        ties = [feeds(8, 12, 12, r) for r in (0.5, 0.25, 1.5, 0.75) for _ in range(3)]
        check(model, target, [feeds(n, h, w) for n, h, w in ((2, 9, 11), (1, 4, 3), (3, 16, 16))] + ties)


# ----------------------------------------------------------------------------- integer products to float


def _weights(dtype, k, n, per_column: bool, with_zp: bool):
    b_scale = RNG.uniform(0.001, 0.02, n).astype(F32) if per_column else scale(0.001, 0.02)
    b_zp = (zp(dtype, (n,)) if per_column else zp(dtype)) if with_zp else None
    return q(dtype, (k, n)), b_scale, b_zp


@pytest.mark.parametrize("a_dtype,b_dtype", [(U8, I8), (U8, U8), (I8, I8)])
def test_matmul_integer_to_float(target, a_dtype, b_dtype):
    # constant B (per tensor or per column of B, zero points or none, bias or none), then a
    # run-time B; the float32 output bit for bit: the int32 product is exact, then one
    # multiply by a_scale * b_scale and one add of the bias, as MLAS's output processor does
    k, n = 37, 12
    for per_column, with_zp, with_bias in ((False, True, True), (True, True, False), (True, False, True),
                                           (False, False, False)):
        b, b_scale, b_zp = _weights(b_dtype, k, n, per_column, with_zp)
        inits = [const("b", b), const("bs", b_scale)] + ([const("bz", b_zp)] if with_zp else [])
        inits += [const("bias", RNG.uniform(-1, 1, n).astype(F32))] if with_bias else []
        names = ["a", "b", "as", "bs", "az" if with_zp else "", "bz" if with_zp else "", "bias" if with_bias else ""]
        ins = [vinfo("a", a_dtype, ["batch", "m", k]), vinfo("as", F32, [])] + ([vinfo("az", a_dtype, [])]
                                                                               if with_zp else [])
        model = contrib_model([ms_node("MatMulIntegerToFloat", names, ["y"])], ins, [vinfo("y", F32, None)], inits)
        check(model, target, [{"a": q(a_dtype, (bt, m, k)), "as": scale(), **({"az": zp(a_dtype)} if with_zp else {})}
                              for bt, m in ((2, 5), (1, 1), (3, 64))])
    ins = [vinfo("a", a_dtype, ["m", "k"]), vinfo("b", b_dtype, ["k", "n"]), vinfo("as", F32, []),
           vinfo("bs", F32, ["n"]), vinfo("az", a_dtype, []), vinfo("bz", b_dtype, ["n"])]
    model = contrib_model([ms_node("MatMulIntegerToFloat", ["a", "b", "as", "bs", "az", "bz"], ["y"])], ins,
                          [vinfo("y", F32, None)])
    check(model, target, [{"a": q(a_dtype, (m, kk)), "b": q(b_dtype, (kk, nn)), "as": scale(),
                           "bs": RNG.uniform(0.001, 0.02, nn).astype(F32), "az": zp(a_dtype), "bz": zp(b_dtype, (nn,))}
                          for m, kk, nn in ((4, 9, 3), (1, 300, 17))])


@pytest.mark.parametrize("b_dtype", [I8, U8])
def test_dynamic_quantize_matmul(target, b_dtype):
    # A quantized to uint8 over its own range at run time (so each feed has its own scale and
    # zero point), B per tensor or per column, with and without zero point and bias
    k, n = 64, 24
    for per_column, with_zp, with_bias in ((False, True, True), (True, True, False), (True, False, True)):
        b, b_scale, b_zp = _weights(b_dtype, k, n, per_column, with_zp)
        inits = [const("b", b), const("bs", b_scale)] + ([const("bz", b_zp)] if with_zp else [])
        inits += [const("bias", RNG.uniform(-1, 1, n).astype(F32))] if with_bias else []
        names = ["a", "b", "bs", "bz" if with_zp else "", "bias" if with_bias else ""]
        model = contrib_model([ms_node("DynamicQuantizeMatMul", names, ["y"])], [vinfo("a", F32, ["m", k])],
                              [vinfo("y", F32, None)], inits)
        feeds = [{"a": RNG.uniform(lo, hi, (m, k)).astype(F32)} for m, lo, hi in
                 ((7, -2, 3), (1, 0.5, 4), (33, -5, -1), (4, 0, 0))]
        check(model, target, feeds)


QGEMMS = [  # (A dtype, B dtype, transA, transB, C shape, quantized output, alpha, per-column b)
    (U8, I8, 0, 0, None, True, 1.0, False),
    (U8, U8, 0, 1, ["n"], True, 1.0, True),
    (I8, I8, 1, 0, ["m", "n"], False, 0.5, True),
    (U8, I8, 1, 1, [1], False, 1.0, False),
    (I8, I8, 0, 1, ["n"], True, 2.0, True),
]


@pytest.mark.parametrize("case", range(len(QGEMMS)))
def test_qgemm(target, case):
    a_dtype, b_dtype, ta, tb, c_shape, quantized, alpha, per_column = QGEMMS[case]
    k, n = 40, 16
    b, b_scale, b_zp = _weights(b_dtype, k, n, per_column, True)
    b = np.ascontiguousarray(b.T) if tb else b
    inits = [const("b", b), const("bs", b_scale), const("bz", b_zp)]
    names = ["a", "as", "az", "b", "bs", "bz", "c" if c_shape else ""]
    ins = [vinfo("a", a_dtype, [k, "m"] if ta else ["m", k]), vinfo("as", F32, []), vinfo("az", a_dtype, [])]
    if c_shape:
        ins.append(vinfo("c", I32, c_shape))
    if quantized:
        names += ["ys", "yz"]
        inits += [const("ys", scale(0.05, 0.2)), const("yz", zp(a_dtype))]
    model = contrib_model([ms_node("QGemm", names, ["y"], transA=ta, transB=tb, alpha=alpha)], ins,
                          [vinfo("y", a_dtype if quantized else F32, None)], inits)

    def feeds(m):
        f = {"a": q(a_dtype, (k, m) if ta else (m, k)), "as": scale(), "az": zp(a_dtype)}
        if c_shape:
            f["c"] = RNG.integers(-5000, 5000, tuple({"m": m, "n": n}.get(d, d) for d in c_shape)).astype(I32)
        return f

    check(model, target, [feeds(m) for m in (5, 1, 70)])


# ----------------------------------------------------------------------------- 4-bit weights


def _pack4(vals: np.ndarray) -> np.ndarray:
    """Pairs of 4-bit values along the last axis into bytes, the first in the low bits (the
    layout the spec gives)."""
    if vals.shape[-1] % 2:
        vals = np.concatenate([vals, np.zeros(vals.shape[:-1] + (1,), vals.dtype)], axis=-1)
    return (vals[..., 0::2] | (vals[..., 1::2] << 4)).astype(U8)


def _nbits_model(k, n, block, with_zp: bool, with_bias: bool, accuracy_level: int = 0):
    blocks = -(-k // block)
    weights = RNG.integers(0, 16, (n, blocks * block)).astype(U8)
    inits = [const("b", _pack4(weights).reshape(n, blocks, block // 2)),
             const("s", RNG.uniform(0.01, 0.1, (n, blocks)).astype(F32))]
    names = ["a", "b", "s"]
    if with_zp:
        inits.append(const("z", _pack4(RNG.integers(0, 16, (n, blocks)).astype(U8))))
        names.append("z")
    if with_bias:
        inits.append(const("bias", RNG.uniform(-1, 1, n).astype(F32)))
        names += ["", "bias"] if with_zp else ["", "", "bias"]
    node = ms_node("MatMulNBits", names, ["y"], K=k, N=n, bits=4, block_size=block, accuracy_level=accuracy_level)
    return contrib_model([node], [vinfo("a", F32, ["batch", "m", k])], [vinfo("y", F32, None)], inits)


@pytest.mark.parametrize("k,n,block", [(64, 24, 32), (40, 9, 16), (300, 33, 128)])
def test_matmul_nbits(target, k, n, block):
    # K a multiple of block_size or not (the last block's padding unused), with and without
    # zero points (absent: 8) and bias. onnxruntime sums in its own float32 order, so close,
    # not equal
    for with_zp, with_bias in ((True, False), (False, True), (True, True)):
        model = _nbits_model(k, n, block, with_zp, with_bias)
        check(model, target, [{"a": RNG.uniform(-1, 1, (b, m, k)).astype(F32)} for b, m in ((2, 3), (1, 1), (1, 40))],
              rtol=1e-5, atol=2e-5 * k ** 0.5)


def test_matmul_nbits_accuracy_level(target):
    # accuracy_level 4 lets onnxruntime quantize A to int8 (about 1% off); it is ignored
    # here, the product float32 as at level 0, so onnxruntime's level-0 result is the reference
    precise = _nbits_model(48, 8, 16, True, False)
    fast = precise.__deepcopy__()
    for attr in fast.graph.node[0].attribute:
        if attr.name == "accuracy_level":
            attr.i = 4
    m = build(fast, target)
    for shape in ((1, 2, 48), (3, 5, 48)):
        a = RNG.uniform(-1, 1, shape).astype(F32)
        np.testing.assert_allclose(m.run({"a": a})["y"], ort_reference(precise, {"a": a})["y"], rtol=1e-5, atol=2e-4)


def test_matmul_nbits_refusals():
    model = _nbits_model(32, 4, 16, False, False)
    for attr in model.graph.node[0].attribute:
        if attr.name == "bits":
            attr.i = 3
    with pytest.raises(CompileError, match=r"MatMulNBits\): bits=3 is not supported \(supported: 4\)"):
        build(model, "native")
    runtime_b = contrib_model([ms_node("MatMulNBits", ["a", "b", "s"], ["y"], K=32, N=4, bits=4, block_size=16)],
                              [vinfo("a", F32, [1, 32]), vinfo("b", U8, [4, 2, 8]), vinfo("s", F32, [4, 2])],
                              [vinfo("y", F32, None)])
    with pytest.raises(CompileError, match=r"B 'b' must be a constant"):
        build(runtime_b, "native")


@pytest.mark.parametrize("bits", [4, 8])
def test_gather_block_quantized(target, bits):
    # an embedding table of uint8 (two 4-bit values a byte, or one 8-bit), blocks along the
    # last axis, gathered by a symbolic (n, s) batch of ids, with and without zero points
    # (absent: 8 or 128); each output element (q - zero point) * scale, exact
    vocab, dim = 50, 96
    for block, with_zp in ((32, True), (16, False), (64, True)):
        nb = -(-dim // block)
        values = RNG.integers(0, 1 << bits, (vocab, dim)).astype(U8)
        data = _pack4(values) if bits == 4 else values
        zps = RNG.integers(0, 1 << bits, (vocab, nb)).astype(U8)
        inits = [const("data", data), const("scales", RNG.uniform(0.01, 0.1, (vocab, nb)).astype(F32))]
        names = ["data", "ids", "scales"]
        if with_zp:
            inits.append(const("zp", _pack4(zps) if bits == 4 else zps))
            names.append("zp")
        node = ms_node("GatherBlockQuantized", names, ["y"], bits=bits, block_size=block, quantize_axis=1,
                       gather_axis=0)
        model = contrib_model([node], [vinfo("ids", np.int64, ["n", "s"])], [vinfo("y", F32, None)], inits)
        check(model, target, [{"ids": RNG.integers(-vocab, vocab, shape).astype(np.int64)}
                              for shape in ((2, 7), (1, 1), (4, 30))])


# ----------------------------------------------------------------------------- onnxruntime's quantizers


def _float_model(nodes, inputs, outputs, weights: dict) -> object:
    inits = [const(k, np.asarray(v, F32)) for k, v in weights.items()]
    g = helper.make_graph(nodes, "float", inputs, outputs, initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _small_cnn():
    """Conv, Relu, Conv, Add, Sigmoid, Mul (swish), AveragePool, LeakyRelu, Concat,
    GlobalAveragePool, Flatten, Gemm: what the static quantizer turns into contrib ops."""
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "r1"], ["s"]), helper.make_node("Sigmoid", ["s"], ["sg"]),
             helper.make_node("Mul", ["s", "sg"], ["sw"]),
             helper.make_node("AveragePool", ["sw"], ["ap"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("LeakyRelu", ["ap"], ["lr"], alpha=0.1),
             helper.make_node("Concat", ["lr", "ap"], ["cc"], axis=1),
             helper.make_node("GlobalAveragePool", ["cc"], ["g"]), helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "wg", "bg"], ["y"], transB=1)]
    weights = {"w1": RNG.normal(0, 0.3, (8, 3, 3, 3)), "b1": RNG.normal(0, 0.1, 8),
               "w2": RNG.normal(0, 0.2, (8, 8, 3, 3)), "b2": RNG.normal(0, 0.1, 8),
               "wg": RNG.normal(0, 0.3, (10, 16)), "bg": RNG.normal(0, 0.1, 10)}
    return _float_model(nodes, [vinfo("x", F32, ["n", 3, "h", "w"])], [vinfo("y", F32, ["n", 10])], weights)


def _contrib_ops(model) -> set[str]:
    return {n.op_type for n in model.graph.node if n.domain == MS}


@pytest.fixture(scope="module")
def static_quantized_cnn(tmp_path_factory):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{"x": RNG.normal(0, 1, (2, 3, 16, 16)).astype(F32)} for _ in range(4)])

        def get_next(self):
            return next(self.batches, None)

    import onnx
    d = tmp_path_factory.mktemp("static")
    onnx.save(_small_cnn(), d / "cnn.onnx")
    quantize_static(d / "cnn.onnx", d / "cnn_q.onnx", Reader(), quant_format=QuantFormat.QOperator,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    return onnx.load(d / "cnn_q.onnx")


def test_static_quantizer_cnn(target, static_quantized_cnn):
    # onnxruntime's static quantizer (QOperator) writes the QLinear contrib ops and QGemm;
    # the whole quantized network, symbolic batch and image size, equal to onnxruntime's
    model = static_quantized_cnn
    assert _contrib_ops(model) == {"QLinearAdd", "QLinearSigmoid", "QLinearMul", "QLinearAveragePool",
                                   "QLinearLeakyRelu", "QLinearConcat", "QLinearGlobalAveragePool", "QGemm"}
    check(model, target, [{"x": RNG.normal(0, 1, (n, 3, h, w)).astype(F32)} for n, h, w in
                          ((2, 16, 16), (1, 12, 20), (3, 8, 6))])


@pytest.fixture(scope="module")
def dynamic_quantized_mlp(tmp_path_factory):
    """An MLP quantized by onnxruntime's dynamic quantizer, then optimized by onnxruntime
    (which fuses DynamicQuantizeLinear, MatMulInteger, the scale Mul and the bias Add into
    DynamicQuantizeMatMul) and saved: the graph onnxruntime itself runs."""
    import onnx
    import onnxruntime
    from onnxruntime.quantization import QuantType, quantize_dynamic

    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]), helper.make_node("MatMul", ["r", "w2"], ["o"]),
             helper.make_node("Add", ["o", "b2"], ["y"])]
    weights = {"w1": RNG.normal(0, 0.2, (64, 128)), "b1": RNG.normal(0, 0.1, 128), "w2": RNG.normal(0, 0.2, (128, 32)),
               "b2": RNG.normal(0, 0.1, 32)}
    d = tmp_path_factory.mktemp("dynamic")
    onnx.save(_float_model(nodes, [vinfo("x", F32, ["n", 64])], [vinfo("y", F32, ["n", 32])], weights),
              d / "mlp.onnx")
    quantize_dynamic(d / "mlp.onnx", d / "mlp_q.onnx", weight_type=QuantType.QInt8)
    so = onnxruntime.SessionOptions()
    so.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.optimized_model_filepath = str(d / "mlp_opt.onnx")
    onnxruntime.InferenceSession(str(d / "mlp_q.onnx"), so, providers=["CPUExecutionProvider"])
    return onnx.load(d / "mlp_q.onnx"), onnx.load(d / "mlp_opt.onnx")


def test_dynamic_quantizer_mlp(target, dynamic_quantized_mlp):
    # as written by the quantizer (DynamicQuantizeLinear, MatMulInteger: ONNX ops) and as
    # onnxruntime optimizes it (DynamicQuantizeMatMul with its bias): both equal to
    # onnxruntime's outputs
    written, optimized = dynamic_quantized_mlp
    assert _contrib_ops(written) == set()
    assert _contrib_ops(optimized) == {"DynamicQuantizeMatMul"}
    feeds = [{"x": RNG.normal(0, s, (n, 64)).astype(F32)} for n, s in ((4, 1.0), (1, 3.0), (17, 0.2))]
    check(written, target, feeds, rtol=1e-6, atol=1e-6)
    check(optimized, target, feeds)


@pytest.fixture(scope="module")
def four_bit_models():
    """An embedding and a projection quantized by onnxruntime's 4-bit weight quantizer
    (MatMulNBitsQuantizer, blocks of 32), asymmetric (uint4 table, packed zero points) and
    symmetric (int4 table, no zero points)."""
    from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer

    models = []
    for symmetric in (False, True):
        nodes = [helper.make_node("Gather", ["table", "ids"], ["e"]), helper.make_node("MatMul", ["e", "w"], ["y"])]
        weights = {"table": RNG.normal(0, 1, (100, 64)), "w": RNG.normal(0, 0.2, (64, 16))}
        model = _float_model(nodes, [vinfo("ids", np.int64, ["n", "s"])], [vinfo("y", F32, ["n", "s", 16])], weights)
        config = DefaultWeightOnlyQuantConfig(block_size=32, is_symmetric=symmetric,
                                              op_types_to_quantize=("MatMul", "Gather"))
        quantizer = MatMulNBitsQuantizer(model, algo_config=config)
        quantizer.process()
        models.append(quantizer.model.model)
    return models


def test_four_bit_quantizer(target, four_bit_models):
    for model in four_bit_models:
        assert _contrib_ops(model) == {"GatherBlockQuantized", "MatMulNBits"}
        check(model, target, [{"ids": RNG.integers(0, 100, shape).astype(np.int64)} for shape in ((2, 5), (1, 1), (3, 9))],
              rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["int4", "uint4"])
def test_gather_block_quantized_int4(target, dtype):
    # int4/uint4 data, zero points of the same dtype or none (0); blocks along axis 0 and
    # rows gathered along axis 1 by a symbolic batch of ids, or the converse on rank 3
    import ml_dtypes

    np_dtype = getattr(ml_dtypes, dtype)
    lo, hi = (-8, 8) if dtype == "int4" else (0, 16)
    for shape, gather_axis, quantize_axis, block in (((64, 20), 1, 0, 16), ((3, 10, 48), 1, 2, 32)):
        values = RNG.integers(lo, hi, shape).astype(np_dtype)
        nb = -(-shape[quantize_axis] // block)
        sshape = tuple(nb if a == quantize_axis else d for a, d in enumerate(shape))
        for with_zp in (True, False):
            inits = [const("data", values), const("scales", RNG.uniform(0.01, 0.1, sshape).astype(F32))]
            names = ["data", "ids", "scales"]
            if with_zp:
                inits.append(const("zp", RNG.integers(lo, hi, sshape).astype(np_dtype)))
                names.append("zp")
            node = ms_node("GatherBlockQuantized", names, ["y"], block_size=block, quantize_axis=quantize_axis,
                           gather_axis=gather_axis)
            model = contrib_model([node], [vinfo("ids", np.int64, ["n"])], [vinfo("y", F32, None)], inits)
            n = shape[gather_axis]
            check(model, target, [{"ids": RNG.integers(-n, n, k).astype(np.int64)} for k in (5, 1, 13)])


def test_contrib_quant_refusals():
    # forms not implemented fail at compile time naming node, op and reason
    a = vinfo("a", F32, [1, 32])
    w = [const("b", np.zeros((4, 2, 8), U8)), const("s", np.ones((4, 2), F32))]
    g_idx = contrib_model([ms_node("MatMulNBits", ["a", "b", "s", "", "g"], ["y"], K=32, N=4, bits=4, block_size=16)],
                          [a], [vinfo("y", F32, None)], w + [const("g", np.zeros(32, I32))])
    with pytest.raises(CompileError, match=r"node 'y' \(MatMulNBits\): g_idx .* is not supported"):
        build(g_idx, "native")
    float_zp = contrib_model([ms_node("MatMulNBits", ["a", "b", "s", "z"], ["y"], K=32, N=4, bits=4, block_size=16)],
                             [a], [vinfo("y", F32, None)], w + [const("z", np.full((4, 2), 8, F32))])
    with pytest.raises(CompileError, match=r"float zero points are not supported"):
        build(float_zp, "native")
    runtime_table = contrib_model([ms_node("GatherBlockQuantized", ["d", "i", "s"], ["y"], block_size=16)],
                                  [vinfo("d", U8, [4, 8]), vinfo("i", np.int64, [2])], [vinfo("y", F32, None)],
                                  [const("s", np.ones((4, 1), F32))])
    with pytest.raises(CompileError, match=r"GatherBlockQuantized\): data and scales must be constants"):
        build(runtime_table, "native")
    pool = contrib_model([ms_node("QLinearAveragePool", ["x", "s", "z", "s", "z"], ["y"], kernel_shape=[3, 3],
                                  strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1)],
                         [vinfo("x", U8, [1, 1, 9, 9]), vinfo("s", F32, []), vinfo("z", U8, [])], [vinfo("y", U8, None)])
    with pytest.raises(CompileError, match=r"QLinearAveragePool\): ceil_mode=1 with count_include_pad=1 is not supported"):
        build(pool, "native")
    qgemm = contrib_model([ms_node("QGemm", ["a", "s", "z", "a", "s", "z", "", "s"], ["y"])],
                          [vinfo("a", U8, [2, 2]), vinfo("s", F32, []), vinfo("z", U8, [])], [vinfo("y", U8, None)])
    with pytest.raises(CompileError, match=r"QGemm\): y_scale and y_zero_point must be given together"):
        build(qgemm, "native")


def test_matmul_nbits_weights(target):
    """Natively the unpacked weights' Dequantize folds into float32 constant weights (the
    GEMM packs them at compile time); a wasm32 module keeps one byte per weight (1.2 MB for
    1024 x 1024, against 4.1 MB of float32) and dequantizes them on every run. Either way
    the weights are onnxruntime's bit for bit: A the identity gives them back exactly."""
    from util import lower_model

    k, n = 72, 10
    model = _nbits_model(k, n, 32, True, False)
    graph, _, _ = lower_model(model, target)
    dequantized = [nd for nd in graph.nodes if type(nd.op).__name__ == "Dequantize"]
    assert len(dequantized) == (0 if target == "native" else 1)
    check(model, target, [{"a": np.eye(k, dtype=F32)[None]}, {"a": np.eye(k, dtype=F32)[None, 5:9]}])


# ----------------------------------------------------------------------------- contrib QuantizeLinear, DequantizeLinear


@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint16", "int16", "int4", "uint4"])
def test_contrib_quantize_dequantize(target, dtype):
    # per tensor and per axis (axis 1 of a symbolic (n, 3, m) tensor); x / scale of many
    # values on ties (round half to even) and beyond the range (saturation)
    import ml_dtypes

    np_dtype = getattr(ml_dtypes, dtype) if "4" in dtype else np.dtype(dtype).type
    lo, hi = (-8, 8) if dtype == "int4" else (0, 16) if dtype == "uint4" else (-20, 20)
    zps = {"zt": np.asarray(RNG.integers(max(lo, 0) if dtype.startswith("u") else lo, hi)).astype(np_dtype),
           "za": RNG.integers(max(lo, 0) if dtype.startswith("u") else lo, hi, 3).astype(np_dtype)}
    inits = [const("st", F32(0.5)), const("sa", np.array([0.5, 0.25, 2.0], F32))] + [const(k, v) for k, v in zps.items()]
    nodes = [ms_node("QuantizeLinear", ["x", "st", "zt"], ["qt"]), ms_node("QuantizeLinear", ["x", "sa", "za"], ["qa"], axis=1),
             ms_node("DequantizeLinear", ["qt", "st", "zt"], ["dt"]),
             ms_node("DequantizeLinear", ["qa", "sa", "za"], ["da"], axis=1)]
    onnx_dtype = helper.np_dtype_to_tensor_dtype(np.dtype(np_dtype))
    # (onnxruntime's Python binding returns no 4-bit tensors: those are checked dequantized)
    outs = [] if "4" in dtype else [helper.make_tensor_value_info(n, onnx_dtype, None) for n in ("qt", "qa")]
    outs += [vinfo("dt", F32, None), vinfo("da", F32, None)]
    model = contrib_model(nodes, [vinfo("x", F32, ["n", 3, "m"])], outs, inits)

    def x(n, m):
        v = RNG.integers(-600, 600, (n, 3, m)).astype(F32) * F32(0.25)
        return np.where(RNG.random((n, 3, m)) < 0.1, v * 300, v).astype(F32)

    check(model, target, [{"x": x(n, m)} for n, m in ((2, 50), (1, 1), (4, 7))])


def test_qdq_contrib_quantizer(target, tmp_path):
    # onnxruntime's static quantizer in QDQ format with its contrib Q/DQ ops (16-bit
    # activations): the network runs in float32 between them, so close, not equal
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{"x": RNG.normal(0, 1, (2, 3, 16, 16)).astype(F32)} for _ in range(3)])

        def get_next(self):
            return next(self.batches, None)

    onnx.save(_small_cnn(), tmp_path / "cnn.onnx")
    quantize_static(tmp_path / "cnn.onnx", tmp_path / "cnn_qdq.onnx", Reader(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QUInt16, weight_type=QuantType.QInt8,
                    extra_options={"UseQDQContribOps": True})
    model = onnx.load(tmp_path / "cnn_qdq.onnx")
    assert _contrib_ops(model) == {"QuantizeLinear", "DequantizeLinear"}
    check(model, target, [{"x": RNG.normal(0, 1, (n, 3, h, w)).astype(F32)} for n, h, w in ((2, 16, 16), (1, 10, 14))],
          rtol=1e-4, atol=1e-4)
