"""Conv and ConvTranspose in 1-D, 2-D and 3-D, DeformConv (2-D), Col2Im, the pools (max
with Indices, average, Lp, global), MaxUnpool and the normalizations (Instance, Group,
Lp, Batch in every inference version, LRN) on both targets. Each model is compiled once and run with several bindings
of its symbolic batch and spatial dims.

References: onnx.reference, except where it is wrong, each said at its test:
onnxruntime for grouped ConvTranspose (onnx.reference slices the weight by output
channels and adds the bias per group), for MaxPool's Indices (onnx.reference returns them
only when a stride or dilation is not 1) and for LpNormalization p=1 (onnx.reference sums
x, not |x|); numpy (:func:`lp_pool_ref`) for LpPool, whose onnx.reference scales a padded
window's sum by the kernel size over the taps inside."""
import itertools
import math

import numpy as np
import pytest
from onnx import helper

import wasm_runtime
from toolkit.ir.graph import CompileError
from util import build, check_model, const, lower_model, make_model, ort_reference, rand, reference, vinfo

TOL = dict(rtol=1e-4, atol=1e-5)


def spatial_model(node, channels, rank, inits=(), dtype=np.float32, outputs=("y",), out_dtypes=None, opset=17,
                  extra_inputs=()):
    names = ["D", "H", "W"][3 - rank:]
    out_dtypes = out_dtypes or [dtype] * len(outputs)
    return make_model([node], [vinfo("x", dtype, ["N", channels] + names)] + list(extra_inputs),
                      [vinfo(o, t, None) for o, t in zip(outputs, out_dtypes)], inits, opset=opset)


def feeds(rng, channels, sizes, dtype=np.float32):
    return [{"x": rand(rng, (n, channels) + tuple(s), dtype)} for n, *s in sizes]


def weights(rng, shape, dtype=np.float32):
    return (rng.standard_normal(shape) / math.sqrt(np.prod(shape[1:]))).astype(dtype)


# ----------------------------------------------------------------------------- Conv

# name: (rank, C, M, kernel, attrs, bias, sizes (N, spatial...))
CONV = {
    "1d_pad_stride_bias": (1, 3, 4, (3,), dict(pads=[1, 2], strides=[2]), True, [(1, 9), (2, 20), (1, 4)]),
    "1d_dilation_group": (1, 4, 6, (2,), dict(dilations=[3], group=2), False, [(1, 9), (2, 17)]),
    "1d_depthwise_same_lower": (1, 5, 5, (4,), dict(group=5, auto_pad="SAME_LOWER", strides=[2]), True,
                                [(1, 7), (3, 12)]),
    "1d_same_upper": (1, 2, 3, (3,), dict(auto_pad="SAME_UPPER"), True, [(1, 1), (2, 10)]),
    "1d_valid": (1, 2, 3, (5,), dict(auto_pad="VALID", strides=[2]), False, [(1, 5), (2, 14)]),
    "3d_pad_bias": (3, 2, 4, (3, 3, 3), dict(pads=[1, 1, 1, 1, 1, 1]), True, [(1, 4, 5, 6), (2, 3, 3, 9)]),
    "3d_stride_dilation_asym": (3, 3, 2, (2, 3, 2), dict(strides=[2, 1, 3], dilations=[1, 2, 2],
                                                           pads=[0, 1, 2, 1, 0, 0]), False,
                                [(1, 5, 6, 7), (2, 8, 5, 10)]),
    "3d_group_same_upper": (3, 4, 6, (3, 1, 2), dict(group=2, auto_pad="SAME_UPPER", strides=[2, 2, 1]), True,
                            [(1, 5, 4, 3), (2, 2, 7, 6)]),
    "3d_depthwise": (3, 3, 3, (3, 3, 3), dict(group=3, pads=[1, 0, 1, 1, 0, 1]), False, [(1, 3, 3, 3), (2, 6, 4, 5)]),
    "3d_pointwise": (3, 5, 2, (1, 1, 1), {}, True, [(1, 2, 3, 4), (3, 1, 1, 1)]),
}


@pytest.mark.parametrize("case", sorted(CONV))
def test_conv_nd(case, target):
    rank, c, m, kernel, attrs, bias, sizes = CONV[case]
    rng = np.random.default_rng(1)
    inits = [const("w", weights(rng, (m, c // attrs.get("group", 1)) + kernel))]
    if bias:
        inits.append(const("b", rng.standard_normal(m).astype(np.float32)))
    node = helper.make_node("Conv", ["x", "w"] + (["b"] if bias else []), ["y"], **attrs)
    check_model(spatial_model(node, c, rank, inits), target, feeds(rng, c, sizes), **TOL)


def test_conv_float64_and_runtime_weights(target):
    """float64 runs the N-D kernel in 2-D too; weights and bias as inputs, with symbolic
    channels."""
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 0, 1, 2], strides=[1, 2], group=1)
    model = make_model([node], [vinfo("x", np.float64, ["N", "C", "H", "W"]), vinfo("w", np.float64, ["M", "C", 3, 2]),
                                vinfo("b", np.float64, ["M"])], [vinfo("y", np.float64, None)])
    rng = np.random.default_rng(2)
    fs = [{"x": rand(rng, (n, c, h, w), np.float64), "w": rand(rng, (m, c, 3, 2), np.float64),
           "b": rand(rng, (m,), np.float64)} for n, c, m, h, w in [(1, 3, 2, 5, 7), (2, 1, 4, 3, 12)]]
    check_model(model, target, fs, rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------------- ConvTranspose

# name: (rank, C, M/group, kernel, attrs, bias, sizes, reference)
CONV_T = {
    "1d_stride_pads": (1, 2, 3, (3,), dict(strides=[2], pads=[1, 0]), True, [(1, 4), (2, 7)], "onnx"),
    "1d_output_padding_dilation": (1, 1, 2, (2,), dict(strides=[3], dilations=[2], output_padding=[1]), False,
                                   [(1, 3), (2, 1)], "onnx"),
    "2d_plain": (2, 3, 2, (3, 3), {}, True, [(1, 3, 4), (2, 5, 2)], "onnx"),
    "2d_strides_pads_output_padding": (2, 2, 3, (3, 2), dict(strides=[2, 3], pads=[1, 0, 0, 1],
                                                             output_padding=[1, 2]), True,
                                       [(1, 3, 3), (2, 4, 6)], "onnx"),
    "2d_same_upper": (2, 2, 2, (3, 3), dict(strides=[2, 2], auto_pad="SAME_UPPER"), False, [(1, 3, 3), (2, 4, 5)],
                      "onnx"),
    "2d_same_lower": (2, 1, 2, (4, 3), dict(strides=[2, 3], auto_pad="SAME_LOWER"), True, [(1, 3, 3), (1, 2, 5)],
                      "onnx"),
    # a total padding of -1 (the output one larger than the input reaches): onnx.reference,
    # onnxruntime and the spec split other totals differently
    "2d_output_shape": (2, 1, 2, (3, 3), dict(strides=[3, 2], output_shape=[10, 8]), False, [(1, 3, 3), (2, 3, 3)],
                        "onnx"),
    "2d_group_bias": (2, 4, 3, (2, 3), dict(group=2, strides=[2, 1], pads=[0, 1, 1, 0]), True,
                      [(1, 3, 4), (2, 5, 3)], "ort"),
    "3d": (3, 2, 2, (3, 2, 3), dict(strides=[1, 2, 2], pads=[1, 0, 0, 0, 1, 1]), True, [(1, 2, 3, 4), (2, 3, 2, 2)],
           "onnx"),
    "3d_group_dilation": (3, 2, 1, (2, 2, 2), dict(group=2, dilations=[2, 1, 2]), False, [(1, 2, 2, 3), (1, 3, 1, 2)],
                          "ort"),
}


@pytest.mark.parametrize("case", sorted(CONV_T))
def test_conv_transpose(case, target):
    rank, c, mg, kernel, attrs, bias, sizes, ref = CONV_T[case]
    rng = np.random.default_rng(3)
    group = attrs.get("group", 1)
    inits = [const("w", weights(rng, (c, mg) + kernel))]
    if bias:
        inits.append(const("b", rng.standard_normal(mg * group).astype(np.float32)))
    node = helper.make_node("ConvTranspose", ["x", "w"] + (["b"] if bias else []), ["y"], **attrs)
    model = spatial_model(node, c, rank, inits)
    check_model(model, target, feeds(rng, c, sizes), ref=ort_reference if ref == "ort" else reference, **TOL)


# name: (C, M, kernel, attrs, bias: "const", "input" or None, image (H, W))
CONV_T_GEMM = {
    "2x2_stride2": (8, 4, (2, 2), dict(strides=[2, 2]), "const", (5, 6)),
    "3x3_stride2_pads_output_padding": (6, 5, (3, 3), dict(strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1]),
                                        "input", (4, 7)),
    "asymmetric_pads_dilation": (3, 2, (3, 2), dict(strides=[2, 3], dilations=[2, 1], pads=[1, 0, 0, 1]), None,
                                 (3, 5)),
    "same_upper": (4, 3, (3, 3), dict(strides=[2, 2], auto_pad="SAME_UPPER"), "const", (3, 4)),
    "output_shape": (2, 3, (3, 3), dict(strides=[3, 2], output_shape=[8, 6]), None, (3, 3)),
    "plain_1x1": (5, 7, (1, 1), {}, "const", (4, 4)),
}


def conv_t_gemm_model(case: str, target: str, rng: np.random.Generator, x_dims: list):
    """CONV_T_GEMM's ``case`` with input x of dims ``x_dims``, checked to compile for
    ``target`` to a MatMul and a Col2Im (not the direct kernel). Returns the model and a
    function that gives feed sets their run-time bias, for the cases that have one."""
    c, m, kernel, attrs, bias, _ = CONV_T_GEMM[case]
    inits = [const("w", weights(rng, (c, m) + kernel))]
    extra = []
    if bias == "const":
        inits.append(const("b", rng.standard_normal(m).astype(np.float32)))
    elif bias == "input":
        extra = [vinfo("b", np.float32, [m])]
    node = helper.make_node("ConvTranspose", ["x", "w"] + (["b"] if bias else []), ["y"], **attrs)
    model = make_model([node], [vinfo("x", np.float32, x_dims)] + extra, [vinfo("y", np.float32, None)], inits)
    graph, _, _ = lower_model(model, target)
    ops = {type(n.op).__name__ for n in graph.nodes}
    assert "ConvTranspose" not in ops and {"MatMul", "Col2Im"} <= ops, ops

    def with_bias(fs: list[dict]) -> list[dict]:
        if bias == "input":
            for f in fs:
                f["b"] = rng.standard_normal(m).astype(np.float32)
        return fs
    return model, with_bias


@pytest.mark.parametrize("case", sorted(CONV_T_GEMM))
def test_conv_transpose_as_gemm_and_col2im(case, target):
    """A float32 2-D ConvTranspose of one group, constant weights and static image dims
    compiles to a MatMul and a Col2Im (plus the bias's Add), not the direct kernel: checked
    against onnx.reference at batch sizes 1 and 3 of one module, and run at 0."""
    c, _, _, attrs, _, (h, w) = CONV_T_GEMM[case]
    rng = np.random.default_rng(13)
    model, with_bias = conv_t_gemm_model(case, target, rng, ["N", c, h, w])
    fs = with_bias([{"x": rand(rng, (n, c, h, w))} for n in (1, 3, 0)])
    # onnx.reference miscounts the blocks of an output_shape with a padding to split
    mod = check_model(model, target, fs[:2], ref=ort_reference if "output_shape" in attrs else reference, **TOL)
    # an empty batch (onnx.reference cannot run it): the image of a batch of one, none of it
    assert mod.run(fs[2])["y"].shape == (0,) + mod.run(fs[0])["y"].shape[1:]


@pytest.mark.parametrize("case", sorted(set(CONV_T_GEMM) - {"output_shape"}))
def test_conv_transpose_symbolic_image_as_gemm_and_col2im(case, target):
    """Image dims known only at run time take the GEMM and Col2Im too (Col2Im's image shape
    is then a shape value of the output's dims): one module, checked against onnx.reference
    at three bindings of (N, H, W)."""
    c, _, _, _, _, (h, w) = CONV_T_GEMM[case]
    rng = np.random.default_rng(15)
    model, with_bias = conv_t_gemm_model(case, target, rng, ["N", c, "H", "W"])
    check_model(model, target, with_bias(feeds(rng, c, [(1, h, w), (2, h + 3, w - 1), (1, 1, 2)])), **TOL)


def test_conv_transpose_symbolic_pads_stay_direct(target):
    """An output_shape with symbolic image dims makes the pads symbolic: the direct kernel."""
    rng = np.random.default_rng(14)
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], output_shape=[9, 10])
    model = spatial_model(node, 3, 2, [const("w", weights(rng, (3, 2, 2, 2)))])
    graph, _, _ = lower_model(model, target)
    assert "ConvTranspose" in {type(n.op).__name__ for n in graph.nodes}
    check_model(model, target, feeds(rng, 3, [(1, 4, 5), (2, 5, 5)]), ref=ort_reference, **TOL)


def test_conv_transpose_errors():
    model = spatial_model(helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="ct", strides=[2, 2],
                                           output_padding=[2, 0]), 1, 2, [const("w", np.ones((1, 1, 3, 3), np.float32))])
    with pytest.raises(CompileError, match=r"node 'ct' \(ConvTranspose\): output_padding=\[2, 0\]: entry 0 must be "
                                           r"less than its stride"):
        build(model, "native")


# ----------------------------------------------------------------------------- pools

def lp_pool_ref(x, kernel, strides, pads, p, dilations=None, ceil_mode=False):
    """(sum of |x| ** p over the window's taps inside x) ** (1 / p), by loops."""
    r = len(kernel)
    dilations = dilations or [1] * r
    out = []
    for a in range(r):
        span = x.shape[2 + a] + pads[a] + pads[r + a] - (dilations[a] * (kernel[a] - 1) + 1)
        o = (-(-span // strides[a]) if ceil_mode else span // strides[a]) + 1
        if ceil_mode and (o - 1) * strides[a] >= x.shape[2 + a] + pads[a]:
            o -= 1
        out.append(o)
    y = np.zeros(x.shape[:2] + tuple(out), np.float64)
    for pos in itertools.product(*[range(o) for o in out]):
        total = np.zeros(x.shape[:2])
        for k in itertools.product(*[range(kk) for kk in kernel]):
            at = [pos[a] * strides[a] - pads[a] + k[a] * dilations[a] for a in range(r)]
            if all(0 <= i < x.shape[2 + a] for a, i in enumerate(at)):
                total += np.abs(x[(slice(None), slice(None)) + tuple(at)].astype(np.float64)) ** p
        y[(slice(None), slice(None)) + pos] = total ** (1.0 / p)
    return y.astype(x.dtype)


# name: (op, rank, attrs, sizes)
POOLS = {
    "max_1d_pad_stride": ("MaxPool", 1, dict(kernel_shape=[3], strides=[2], pads=[1, 1]), [(1, 9), (2, 4)]),
    "max_1d_ceil_dilation": ("MaxPool", 1, dict(kernel_shape=[2], dilations=[2], strides=[2], ceil_mode=1),
                             [(1, 8), (2, 5)]),
    # onnxruntime: onnx.reference's 3-D pool with pads and unit strides indexes past its padded input
    "max_3d_pads": ("MaxPool", 3, dict(kernel_shape=[2, 3, 2], pads=[1, 1, 0, 0, 1, 1]), [(1, 3, 4, 5), (2, 2, 3, 3)]),
    # onnxruntime: onnx.reference's MaxPool with a stride gives SAME_LOWER floor(in / stride) outputs, not the
    # spec's ceil
    "max_3d_same_lower_stride": ("MaxPool", 3, dict(kernel_shape=[3, 3, 3], strides=[2, 2, 2], auto_pad="SAME_LOWER"),
                                 [(1, 5, 4, 6), (2, 3, 3, 3)]),
    "avg_1d_include_pad": ("AveragePool", 1, dict(kernel_shape=[4], pads=[2, 1], count_include_pad=1),
                           [(1, 6), (3, 3)]),
    "avg_1d_ceil": ("AveragePool", 1, dict(kernel_shape=[3], strides=[2], pads=[1, 0], ceil_mode=1),
                    [(1, 8), (2, 5)]),
    "avg_3d_ceil_dilations": ("AveragePool", 3, dict(kernel_shape=[2, 2, 2], strides=[2, 2, 2], dilations=[2, 1, 2],
                                                     ceil_mode=1), [(1, 5, 6, 7), (2, 4, 4, 4)]),
    "avg_3d_pads_include_pad": ("AveragePool", 3, dict(kernel_shape=[3, 2, 2], pads=[1, 0, 1, 1, 1, 0],
                                                       count_include_pad=1), [(1, 3, 4, 5), (2, 2, 2, 2)]),
    "avg_3d_same_upper": ("AveragePool", 3, dict(kernel_shape=[2, 3, 3], auto_pad="SAME_UPPER", strides=[1, 2, 2]),
                          [(1, 3, 5, 4), (2, 4, 2, 7)]),
    # more taps than are unrolled: the outer axes loop
    "max_3d_large_window": ("MaxPool", 3, dict(kernel_shape=[4, 5, 5], strides=[3, 3, 3]),
                            [(1, 8, 9, 10), (2, 4, 5, 5)]),
}


@pytest.mark.parametrize("case", sorted(POOLS))
def test_pool_nd(case, target):
    op, rank, attrs, sizes = POOLS[case]
    rng = np.random.default_rng(4)
    check_model(spatial_model(helper.make_node(op, ["x"], ["y"], **attrs), 3, rank, opset=19), target,
                feeds(rng, 3, sizes), ref=ort_reference if case in ("max_3d_pads", "max_3d_same_lower_stride") else reference)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.float16, np.float64])
def test_maxpool_dtypes(dtype, target):
    rng = np.random.default_rng(5)
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    lo, hi = (-128, 127) if dtype == np.int8 else (0, 255) if dtype == np.uint8 else (-3, 3)
    fs = [{"x": rand(rng, (n, 2, h, w), dtype, lo, hi)} for n, h, w in [(1, 5, 7), (2, 8, 3)]]
    check_model(spatial_model(node, 2, 2, dtype=dtype, opset=12), target, fs)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_average_pool_dtypes(dtype, target):
    rng = np.random.default_rng(6)
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 3], pads=[1, 1, 0, 1])
    tol = dict(rtol=2e-3, atol=2e-3) if dtype == np.float16 else {}
    check_model(spatial_model(node, 2, 2, dtype=dtype), target, feeds(rng, 2, [(1, 4, 5), (2, 6, 3)], dtype), **tol)


# (rank, attrs, sizes): onnxruntime, because onnx.reference gives Indices only when a stride
# or a dilation is not 1
MAX_INDICES = {
    "1d": (1, dict(kernel_shape=[3], pads=[1, 1]), [(1, 7), (2, 3)]),
    "2d_row_major_stride": (2, dict(kernel_shape=[2, 3], strides=[2, 1], pads=[0, 1, 1, 1]), [(1, 5, 6), (2, 3, 2)]),
    "2d_column_major": (2, dict(kernel_shape=[3, 2], strides=[1, 2], storage_order=1), [(1, 5, 6), (2, 3, 4)]),
    "2d_ceil_dilation": (2, dict(kernel_shape=[2, 2], strides=[2, 2], dilations=[1, 2], ceil_mode=1),
                         [(1, 5, 6), (2, 4, 3)]),
    "3d_row_major": (3, dict(kernel_shape=[2, 2, 2], strides=[2, 1, 2], pads=[1, 0, 0, 0, 1, 1]),
                     [(1, 3, 4, 5), (2, 2, 3, 3)]),
    "3d_column_major": (3, dict(kernel_shape=[2, 2, 3], storage_order=1), [(1, 3, 4, 5), (2, 2, 3, 3)]),
}


@pytest.mark.parametrize("case", sorted(MAX_INDICES))
def test_maxpool_indices(case, target):
    rank, attrs, sizes = MAX_INDICES[case]
    rng = np.random.default_rng(7)
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], **attrs)
    model = spatial_model(node, 2, rank, outputs=("y", "i"), out_dtypes=[np.float32, np.int64], opset=12)
    fs = feeds(rng, 2, sizes)
    fs.append({"x": np.round(fs[0]["x"])})  # ties: the first maximum in window order wins
    check_model(model, target, fs, ref=ort_reference)


@pytest.mark.parametrize("rank,attrs,sizes", [
    (1, dict(kernel_shape=[3], strides=[2], pads=[1, 1], p=3), [(1, 8), (2, 3)]),
    (2, dict(kernel_shape=[2, 2], p=1, pads=[1, 0, 1, 1]), [(1, 4, 5), (2, 3, 3)]),
    (2, dict(kernel_shape=[3, 2], strides=[2, 2], dilations=[1, 2], ceil_mode=1), [(1, 6, 7), (2, 5, 5)]),
    (3, dict(kernel_shape=[2, 2, 2], auto_pad="SAME_UPPER", strides=[2, 2, 2]), [(1, 3, 4, 5), (2, 2, 2, 3)]),
], ids=["1d_p3", "2d_p1_pads", "2d_ceil_dilation", "3d_same_upper"])
def test_lp_pool(rank, attrs, sizes, target):
    rng = np.random.default_rng(8)
    model = spatial_model(helper.make_node("LpPool", ["x"], ["y"], **attrs), 2, rank, opset=18)
    k = attrs["kernel_shape"]
    r = len(k)
    strides = attrs.get("strides", [1] * r)

    def ref(model, fd):
        x = fd["x"]
        pads = attrs.get("pads", [0] * 2 * r)
        if attrs.get("auto_pad") == "SAME_UPPER":
            pads = [0] * 2 * r
            for a in range(r):
                total = max(0, (-(-x.shape[2 + a] // strides[a]) - 1) * strides[a] + k[a] - x.shape[2 + a])
                pads[a], pads[r + a] = total // 2, total - total // 2
        return {"y": lp_pool_ref(x, k, strides, pads, attrs.get("p", 2), attrs.get("dilations"),
                                 bool(attrs.get("ceil_mode")))}

    check_model(model, target, feeds(rng, 2, sizes), ref=ref, **TOL)


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_global_pools(rank, target):
    """onnxruntime: onnx.reference has no GlobalLpPool."""
    rng = np.random.default_rng(9)
    nodes = [helper.make_node("GlobalMaxPool", ["x"], ["max"]), helper.make_node("GlobalAveragePool", ["x"], ["avg"]),
             helper.make_node("GlobalLpPool", ["x"], ["l2"]), helper.make_node("GlobalLpPool", ["x"], ["l3"], p=3)]
    names = ["D", "H", "W"][3 - rank:]
    model = make_model(nodes, [vinfo("x", np.float32, ["N", 3] + names)],
                       [vinfo(o, np.float32, None) for o in ("max", "avg", "l2", "l3")])
    sizes = [(1,) + (4,) * rank, (2,) + tuple(range(2, 2 + rank))]
    check_model(model, target, feeds(rng, 3, sizes), ref=ort_reference, **TOL)


# ----------------------------------------------------------------------------- MaxUnpool


def _pool_then_unpool(unpool_inputs, extra_inputs=(), **attrs):
    pool = helper.make_node("MaxPool", ["x"], ["p", "i"], kernel_shape=[2, 2], strides=[2, 2])
    unpool = helper.make_node("MaxUnpool", ["p", "i"] + unpool_inputs, ["y"], name="unpool", kernel_shape=[2, 2],
                              strides=[2, 2], **attrs)
    return make_model([pool, unpool], [vinfo("x", np.float32, ["N", "C", "H", "W"])] + list(extra_inputs),
                      [vinfo("y", np.float32, None)], opset=11)


def test_max_unpool(target):
    """MaxPool then MaxUnpool: without output_shape the unpooled size is (in - 1) * 2 + 2;
    with a run-time output_shape, larger, the same tensor sits at its start (the indices
    are positions in the unpooled size, as in onnx.reference and the ONNX conformance case)."""
    rng = np.random.default_rng(10)
    plain = _pool_then_unpool([])
    fs = [{"x": rand(rng, (n, c, h, w))} for n, c, h, w in [(1, 1, 4, 4), (2, 3, 6, 8)]]
    check_model(plain, target, fs)
    given = _pool_then_unpool(["shape"], [vinfo("shape", np.int64, [4])])
    fs = [dict(f, shape=np.array(f["x"].shape, np.int64) + np.array([0, 0, 1, 0])) for f in fs]
    check_model(given, target, fs)


def test_max_unpool_errors(target):
    model = make_model([helper.make_node("MaxUnpool", ["x", "i"], ["y"], name="unpool", kernel_shape=[2, 2],
                                         strides=[2, 2])],
                       [vinfo("x", np.float32, ["N", 1, 2, 2]), vinfo("i", np.int64, ["N", 1, 2, 2])],
                       [vinfo("y", np.float32, None)], opset=11)
    mod = build(model, target)
    x = np.ones((1, 1, 2, 2), np.float32)
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'unpool' \(MaxUnpool\): element 3 of the indices is 16, "
                                                      r"outside \[0, 16\)"):
        mod.run({"x": x, "i": np.array([0, 1, 2, 16]).reshape(1, 1, 2, 2)})
    assert mod.run({"x": x, "i": np.array([0, 5, 10, 15]).reshape(1, 1, 2, 2)})["y"].sum() == 4


# ----------------------------------------------------------------------------- normalizations


@pytest.mark.parametrize("rank", [3, 4, 5])
def test_instance_norm(rank, target):
    rng = np.random.default_rng(11)
    node = helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-3)
    model = spatial_model(node, 3, rank - 2, [const("s", rand(rng, (3,))), const("b", rand(rng, (3,)))])
    sizes = [(1,) + (4,) * (rank - 2), (2,) + tuple(range(2, rank))]
    check_model(model, target, feeds(rng, 3, sizes), **TOL)


@pytest.mark.parametrize("opset", [18, 21])
def test_group_norm(opset, target):
    """GroupNormalization-18 scales per group, -21 per channel."""
    rng = np.random.default_rng(12)
    n = 2 if opset == 18 else 6
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2, epsilon=1e-4)
    model = make_model([node], [vinfo("x", np.float32, ["N", 6, "L"]), vinfo("s", np.float32, [n]),
                                vinfo("b", np.float32, [n])], [vinfo("y", np.float32, None)], opset=opset)
    fs = [{"x": rand(rng, (b, 6, length)), "s": rand(rng, (n,)), "b": rand(rng, (n,))}
          for b, length in [(1, 5), (3, 1), (2, 9)]]
    check_model(model, target, fs, **TOL)


@pytest.mark.parametrize("p,axis", [(2, -1), (2, 0), (1, 1), (1, -1)])
def test_lp_normalization(p, axis, target):
    """onnxruntime: onnx.reference sums x, not |x|, for p=1. A zero vector stays zero."""
    rng = np.random.default_rng(13)
    model = make_model([helper.make_node("LpNormalization", ["x"], ["y"], p=p, axis=axis)],
                       [vinfo("x", np.float32, ["N", 3, "L"])], [vinfo("y", np.float32, None)])
    fs = [{"x": rand(rng, (n, 3, length))} for n, length in [(1, 4), (2, 1), (3, 5)]]
    fs[0]["x"][0, :, 1] = 0
    fs[0]["x"][0, 1, :] = 0
    check_model(model, target, fs, ref=ort_reference, **TOL)


@pytest.mark.parametrize("opset", [9, 14, 15])
@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_batch_norm_versions_dtypes(opset, dtype, target):
    rng = np.random.default_rng(14)
    params = ["scale", "bias", "mean", "var"]
    model = make_model([helper.make_node("BatchNormalization", ["x"] + params, ["y"], epsilon=1e-3)],
                       [vinfo("x", dtype, ["N", "C", "H", "W"])] + [vinfo(p, dtype, ["C"]) for p in params],
                       [vinfo("y", dtype, None)], opset=opset)
    fs = []
    for n, c, h, w in [(1, 3, 2, 5), (2, 1, 4, 1)]:
        f = {"x": rand(rng, (n, c, h, w), dtype)}
        f.update({p: rand(rng, (c,), dtype, lo=0.1 if p == "var" else -3) for p in params})
        fs.append(f)
    tol = dict(rtol=2e-3, atol=2e-3) if dtype == np.float16 else {}
    check_model(model, target, fs, ref=batch_norm_ref, **tol)


def batch_norm_ref(model, fd):
    """The formula in float64: onnx.reference's float16 BatchNormalization is far from it
    (outputs off by half)."""
    x = fd["x"].astype(np.float64)
    s, b, mu, v = (fd[p].astype(np.float64)[None, :, None, None] for p in ("scale", "bias", "mean", "var"))
    return {"y": ((x - mu) / np.sqrt(v + 1e-3) * s + b).astype(fd["x"].dtype)}


def lrn_ref(model, fd, size=3, alpha=0.01, beta=0.6, bias=2.0):
    """The ONNX formula in float64: onnx.reference sums over the batch dim instead of the
    channels (tests/test_old_opsets.py), onnxruntime takes rank 4 only."""
    x = fd["x"].astype(np.float64)
    c = x.shape[1]
    sq = np.zeros_like(x)
    for ch in range(c):
        sq[:, ch] = (x[:, max(0, ch - (size - 1) // 2):min(c, ch + size // 2 + 1)] ** 2).sum(axis=1)
    return {"y": (x / (bias + alpha / size * sq) ** beta).astype(fd["x"].dtype)}


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_lrn_3d(dtype, target):
    rng = np.random.default_rng(15)
    model = make_model([helper.make_node("LRN", ["x"], ["y"], size=3, alpha=0.01, beta=0.6, bias=2.0)],
                       [vinfo("x", dtype, ["N", "C", "D", "H", "W"])], [vinfo("y", dtype, None)])
    tol = dict(rtol=2e-3, atol=2e-3) if dtype == np.float16 else TOL
    check_model(model, target, [{"x": rand(rng, s, dtype)} for s in [(1, 4, 2, 3, 2), (2, 5, 1, 2, 3)]],
                ref=lrn_ref, **tol)


@pytest.mark.parametrize("beta", [0.75, 0.5, 1.0, 0.6])
def test_lrn_windows_and_powers(beta, target):
    """The window's taps are channels clamped into range with a flag (windows of 1, 2 and 5
    channels, more channels than the window and fewer); beta 0.75, 0.5 and 1 by square roots,
    others by pow. A negative bias makes some bases negative (NaN for a fractional beta, as
    in powf); a negative alpha, and inputs of zeros (0 / 0)."""
    rng = np.random.default_rng(16)
    for size, alpha, bias in ((5, 1e-2, 1.0), (2, 0.5, 0.3), (1, 2.0, -0.5), (3, -1e-3, 0.0)):
        model = make_model([helper.make_node("LRN", ["x"], ["y"], size=size, alpha=alpha, beta=beta, bias=bias)],
                           [vinfo("x", np.float32, ["N", "C", "H", "W"])], [vinfo("y", np.float32, None)])
        feeds = [{"x": rand(rng, s)} for s in [(1, 7, 3, 5), (2, 3, 4, 4), (1, 1, 2, 9)]]
        feeds.append({"x": np.zeros((1, 4, 2, 3), np.float32)})

        def ref(model, fd, size=size, alpha=alpha, bias=bias):
            with np.errstate(all="ignore"):
                return lrn_ref(model, fd, size, alpha, beta, bias)
        check_model(model, target, feeds, ref=ref, **TOL)


# ----------------------------------------------------------------------------- Col2Im


def col2im_cols(image, block, strides, dilations, pads) -> int:
    """How many blocks fit in the image (Col2Im's L)."""
    r = len(image)
    return math.prod((image[a] + pads[a] + pads[r + a] - dilations[a] * (block[a] - 1) - 1) // strides[a] + 1
                     for a in range(r))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.int32, np.int64])
def test_col2im_constant_shapes(target, dtype):
    # 2-D, strides, dilations and uneven pads; the batch and the number of blocks symbolic
    image, block, attrs = (7, 6), (2, 3), dict(strides=[2, 1], dilations=[2, 1], pads=[1, 0, 2, 1])
    cols = col2im_cols(image, block, attrs["strides"], attrs["dilations"], attrs["pads"])
    model = make_model([helper.make_node("Col2Im", ["x", "image", "block"], ["y"], name="y", **attrs)],
                       [vinfo("x", dtype, ["N", 3 * 6, "L"])], [vinfo("y", dtype, None)],
                       [const("image", np.array(image, np.int64)), const("block", np.array(block, np.int64))],
                       opset=18)
    rng = np.random.default_rng(5)
    tol = dict(rtol=2e-3, atol=2e-3) if dtype == np.float16 else TOL  # float16 sums in another order
    m = check_model(model, target, [{"x": rand(rng, (n, 18, cols), dtype)} for n in (2, 1, 3)], **tol)
    with pytest.raises(wasm_runtime.ModelError, match=r"'y' \(Col2Im\)"):
        m.run({"x": rand(rng, (1, 18, cols + 1), dtype)})


def test_col2im_runtime_shapes(target):
    # 3-D, image and block sizes read at run time: each binding changes both
    attrs = dict(strides=[1, 2, 1], dilations=[1, 1, 2], pads=[0, 1, 1, 1, 0, 0])
    model = make_model([helper.make_node("Col2Im", ["x", "image", "block"], ["y"], name="y", **attrs)],
                       [vinfo("x", np.float32, ["N", "CK", "L"]), vinfo("image", np.int64, [3]),
                        vinfo("block", np.int64, [3])], [vinfo("y", np.float32, None)], opset=18)
    rng = np.random.default_rng(6)

    def case(n, c, image, block):
        cols = col2im_cols(image, block, attrs["strides"], attrs["dilations"], attrs["pads"])
        return {"x": rand(rng, (n, c * math.prod(block), cols)), "image": np.array(image, np.int64),
                "block": np.array(block, np.int64)}

    m = check_model(model, target, [case(2, 2, (3, 4, 5), (2, 1, 2)), case(1, 1, (1, 1, 1), (1, 1, 1)),
                                    case(1, 3, (4, 2, 6), (3, 2, 3))], **TOL)
    bad = case(1, 1, (3, 4, 5), (2, 1, 2))
    with pytest.raises(wasm_runtime.ModelError, match=r"'y' \(Col2Im\).*dim 2"):
        m.run({**bad, "x": bad["x"][:, :, 1:]})
    with pytest.raises(wasm_runtime.ModelError, match=r"'y' \(Col2Im\).*not divisible"):
        m.run({**bad, "x": bad["x"][:, 1:]})
    with pytest.raises(wasm_runtime.ModelError, match=r"'y' \(Col2Im\): block_shape element 1 is 0"):
        m.run({**bad, "block": np.array([2, 0, 2], np.int64)})


def test_col2im_errors(target):
    def model(dtype=np.float32, **attrs):
        return make_model([helper.make_node("Col2Im", ["x", "image", "block"], ["y"], name="y", **attrs)],
                          [vinfo("x", dtype, ["N", 4, 9])], [vinfo("y", dtype, None)],
                          [const("image", np.array([4, 4], np.int64)), const("block", np.array([2, 2], np.int64))],
                          opset=18)

    with pytest.raises(CompileError, match=r"Col2Im.*pads=\[1, 1\] must be 4"):
        build(model(pads=[1, 1]), target)
    with pytest.raises(CompileError, match=r"Col2Im.*dtype bool"):
        build(model(np.bool_), target)
    with pytest.raises(CompileError, match=r"Col2Im.*dim 2 vs the blocks in the image: 9 != 4"):
        build(model(strides=[2, 2]), target)


# ----------------------------------------------------------------------------- DeformConv


def test_deform_conv(target):
    # group 2, offset_group 2 (each half of the input channels its own offsets), bias and
    # mask, strides, dilations and pads; offsets large enough to leave the image. (H and W
    # above 1: onnx.reference divides by H - 1 and W - 1.)
    attrs = dict(group=2, offset_group=2, strides=[2, 1], dilations=[1, 2], pads=[1, 0, 1, 2])
    model = make_model([helper.make_node("DeformConv", ["x", "w", "offset", "b", "mask"], ["y"], name="y",
                                         **attrs)],
                       [vinfo("x", np.float32, ["N", 4, "H", "W"]), vinfo("offset", np.float32, ["N", 16, "P", "Q"]),
                        vinfo("mask", np.float32, ["N", 8, "P", "Q"])], [vinfo("y", np.float32, None)],
                       [const("w", weights(np.random.default_rng(7), (6, 2, 2, 2))),
                        const("b", np.array([0.5, -1, 2, 0, 1, 3], np.float32))], opset=19)
    rng = np.random.default_rng(8)

    def case(n, h, w):
        p, q = (h + 2 - 2) // 2 + 1, (w + 2 - 3) + 1
        return {"x": rand(rng, (n, 4, h, w)), "offset": rand(rng, (n, 16, p, q), lo=-2.5, hi=2.5),
                "mask": rand(rng, (n, 8, p, q), lo=0, hi=1)}

    m = check_model(model, target, [case(2, 4, 5), case(1, 2, 2), case(1, 6, 3)], **TOL)
    bad = case(1, 4, 5)  # offsets and mask for one output row too many
    bad = {**bad, "offset": bad["offset"][:, :, :1].repeat(4, axis=2), "mask": bad["mask"][:, :, :1].repeat(4, axis=2)}
    with pytest.raises(wasm_runtime.ModelError, match=r"'y' \(DeformConv\).*offset 'offset' dim 2"):
        m.run(bad)


def test_deform_conv_plain(target):
    # no bias, no mask, one offset group, opset 22, float64
    model = make_model([helper.make_node("DeformConv", ["x", "w", "offset"], ["y"], name="y", kernel_shape=[3, 2])],
                       [vinfo("x", np.float64, ["N", 2, "H", "W"]), vinfo("w", np.float64, [3, 2, 3, 2]),
                        vinfo("offset", np.float64, ["N", 12, "P", "Q"])], [vinfo("y", np.float64, None)], opset=22)
    rng = np.random.default_rng(9)

    def case(n, h, w):
        return {"x": rand(rng, (n, 2, h, w), np.float64), "w": rand(rng, (3, 2, 3, 2), np.float64),
                "offset": rand(rng, (n, 12, h - 2, w - 1), np.float64, lo=-1, hi=1)}

    check_model(model, target, [case(1, 3, 2), case(2, 5, 4)])


def test_deform_conv_errors(target):
    model = make_model([helper.make_node("DeformConv", ["x", "w", "offset"], ["y"], name="y")],
                       [vinfo("x", np.float32, [1, 1, 3, 3, 3]), vinfo("w", np.float32, [1, 1, 2, 2, 2]),
                        vinfo("offset", np.float32, [1, 24, 2, 2, 2])], [vinfo("y", np.float32, None)], opset=19)
    with pytest.raises(CompileError, match=r"DeformConv.*only 2-D DeformConv"):
        build(model, target)
