"""Conv, pooling, BatchNormalization, Dropout and Sum on both targets against onnx.reference.
Each model is compiled once and run with several bindings of its symbolic dims: the batch
and, where the output-size formula allows, height and width. Conv output rows are narrower
than one vector, between one vector and one register tile, exactly one or two tiles, and
several tiles plus a ragged end (a tile is 8 columns on wasm32, 16 on AVX2 hosts)."""
import math

import numpy as np
import pytest
from onnx import helper

import wasm_runtime
from toolkit.ir.graph import CompileError
from util import build, check_model, const, make_model, rand, vinfo

# (N, H, W): output widths 20, 3, 8, 6 and 16 for a 3x3 "same" convolution
SIZES = [(1, 9, 20), (3, 6, 3), (2, 11, 8), (1, 5, 6), (1, 4, 16)]
TOL = dict(rtol=1e-4, atol=1e-5)  # sums of up to a few hundred products, in another order


def image_model(nodes, channels, inits=(), outputs=("y",)):
    return make_model(nodes, [vinfo("x", np.float32, ["N", channels, "H", "W"])],
                      [vinfo(o, np.float32, None) for o in outputs], inits)


def image_feeds(rng, channels, sizes=SIZES):
    return [{"x": rand(rng, (n, channels, h, w))} for n, h, w in sizes]


def weights(rng, m, cg, kh, kw):
    return (rng.standard_normal((m, cg, kh, kw)) / math.sqrt(cg * kh * kw)).astype(np.float32)


# name: (C, M, (kh, kw), attrs, bias, sizes)
CONV = {
    "3x3_pad1_bias": (3, 6, (3, 3), dict(pads=[1, 1, 1, 1]), True, SIZES),
    "stride2_dilation2_asym_pads": (4, 8, (3, 3), dict(strides=[2, 2], dilations=[2, 2], pads=[1, 0, 2, 1]),
                                    False, [(1, 9, 20), (2, 6, 7), (1, 11, 12)]),
    "group2": (4, 6, (3, 3), dict(group=2, pads=[1, 1, 1, 1]), True, SIZES),
    "depthwise": (5, 5, (3, 3), dict(group=5, pads=[1, 1, 1, 1], strides=[2, 2]), True, SIZES),
    "depthwise_multiplier2": (3, 6, (3, 3), dict(group=3), False, [(1, 9, 20), (2, 4, 5)]),
    "same_upper_stride2": (3, 5, (3, 3), dict(auto_pad="SAME_UPPER", strides=[2, 2]), True, SIZES),
    "same_lower_4x4": (2, 4, (4, 4), dict(auto_pad="SAME_LOWER"), False, SIZES),
    "valid_5x5_stride3": (3, 4, (5, 5), dict(auto_pad="VALID", strides=[3, 3]), True,
                          [(1, 9, 20), (2, 5, 8), (1, 13, 30)]),
    "pointwise": (8, 12, (1, 1), {}, True, SIZES),
    # more input channels than one reduction pass takes: later passes add to stored sums
    "3x3_many_channels": (130, 8, (3, 3), dict(pads=[1, 1, 1, 1]), True, SIZES),
    "pointwise_many_channels": (600, 4, (1, 1), {}, False, [(1, 3, 7), (2, 5, 5)]),
    "pointwise_stride2": (8, 4, (1, 1), dict(strides=[2, 2]), False, SIZES),
    "7x7_stride2_pad3": (3, 4, (7, 7), dict(strides=[2, 2], pads=[3, 3, 3, 3]), True,
                         [(1, 16, 20), (2, 7, 5)]),
    "1x3_rows": (3, 4, (1, 3), dict(pads=[0, 1, 0, 1]), True, SIZES),
    "3x1_cols": (3, 4, (3, 1), dict(pads=[2, 0, 0, 0], strides=[1, 2]), False, SIZES),
}


@pytest.mark.parametrize("case", sorted(CONV))
def test_conv(case, target):
    c, m, (kh, kw), attrs, bias, sizes = CONV[case]
    rng = np.random.default_rng(10)
    inits = [const("w", weights(rng, m, c // attrs.get("group", 1), kh, kw))]
    if bias:
        inits.append(const("b", rng.standard_normal(m).astype(np.float32)))
    node = helper.make_node("Conv", ["x", "w"] + (["b"] if bias else []), ["y"], **attrs)
    check_model(image_model([node], c, inits), target, image_feeds(rng, c, sizes), **TOL)


def test_conv_runtime_weight_symbolic_channels(target):
    """A weight that is a model input: channel counts symbolic, kernel dims static; 60
    channels take two reduction passes."""
    model = make_model([helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1], strides=[1, 2])],
                       [vinfo("x", np.float32, ["N", "C", "H", "W"]),
                        vinfo("w", np.float32, ["M", "C", 3, 3]), vinfo("b", np.float32, ["M"])],
                       [vinfo("y", np.float32, None)])
    rng = np.random.default_rng(11)
    feeds = [{"x": rand(rng, (n, c, h, w)), "w": weights(rng, m, c, 3, 3), "b": rand(rng, (m,))}
             for n, c, m, h, w in [(1, 3, 5, 7, 13), (2, 6, 8, 4, 9), (1, 60, 4, 5, 20)]]
    check_model(model, target, feeds, **TOL)


def test_conv_run_time_errors(target):
    """Channels that do not match the weight, and an image smaller than the window, are
    run-time errors naming the node; the module stays usable."""
    model = make_model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv")],
                       [vinfo("x", np.float32, ["N", "C", "H", 5])], [vinfo("y", np.float32, None)],
                       [const("w", np.ones((2, 3, 3, 3), np.float32))])
    mod = build(model, target)
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'conv' \(Conv\): input 'x' channels"):
        mod.run({"x": np.ones((1, 4, 5, 5), np.float32)})
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'conv' \(Conv\): input spatial dim 0 \(H\) is too "
                                                       r"small for a window of 3 .* = -1\)"):
        mod.run({"x": np.ones((1, 3, 1, 5), np.float32)})
    assert mod.run({"x": np.ones((1, 3, 2, 5), np.float32)})["y"].shape == (1, 2, 0, 3)
    assert mod.run({"x": np.ones((2, 3, 5, 5), np.float32)})["y"].shape == (2, 2, 3, 3)


@pytest.mark.parametrize("node,inputs,inits,pattern", [
    ({}, [("x", ["N", 3, 8, 8]), ("w", [2, 3, "k", "k"])], [],
     r"node 'bad' \(Conv\): weight 'w' has kernel dims \(k, k\)"),
    ({}, [("x", ["N", 4, 8, 8])], [("w", (2, 3, 3, 3))],
     r"node 'bad' \(Conv\): input 'x' channels .*: 4 != 3"),
    ({}, [("x", ["N", 3, 4, 8])], [("w", (2, 3, 3, 3, 3))],
     r"node 'bad' \(Conv\): weight 'w' has shape .* expected rank 4"),
    ({"pads": [0, 0, 0, 0]}, [("x", ["N", 3, 1, 8])], [("w", (2, 3, 3, 3))],
     r"node 'bad' \(Conv\): spatial dim 0 of size 1 is too small"),
], ids=["symbolic_kernel", "static_channels", "weight_rank", "too_small"])
def test_conv_compile_errors(node, inputs, inits, pattern):
    model = make_model([helper.make_node("Conv", ["x", "w"], ["y"], name="bad", **node)],
                       [vinfo(n, np.float32, s) for n, s in inputs], [vinfo("y", np.float32, None)],
                       [const(n, np.ones(s, np.float32)) for n, s in inits])
    with pytest.raises(CompileError, match=pattern):
        build(model, "native")


# name: (op, attrs, sizes)
POOL = {
    "max_2x2_stride2": ("MaxPool", dict(kernel_shape=[2, 2], strides=[2, 2]), SIZES),
    "max_3x3_stride2_pad1": ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), SIZES),
    "max_3x3_stride2_ceil": ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
                             [(1, 9, 20), (2, 6, 3), (1, 12, 8)]),
    "max_dilation2_pad1": ("MaxPool", dict(kernel_shape=[2, 3], dilations=[2, 2], pads=[1, 1, 1, 0]), SIZES),
    "max_same_upper_stride2": ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
                               SIZES),
    "avg_3x3_pad1": ("AveragePool", dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1]), SIZES),
    "avg_3x3_pad1_include_pad": ("AveragePool", dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                                                     count_include_pad=1), SIZES),
    "avg_stride2_pad1_ceil": ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                                                  ceil_mode=1), SIZES),
    "avg_stride2_ceil_include_pad": ("AveragePool", dict(kernel_shape=[2, 2], strides=[2, 2],
                                                         pads=[1, 0, 1, 0], ceil_mode=1,
                                                         count_include_pad=1), SIZES),
    "avg_7x7_valid": ("AveragePool", dict(kernel_shape=[7, 7]), [(1, 7, 7), (3, 8, 10)]),
}


@pytest.mark.parametrize("case", sorted(POOL))
def test_pool(case, target):
    op, attrs, sizes = POOL[case]
    rng = np.random.default_rng(20)
    check_model(image_model([helper.make_node(op, ["x"], ["y"], **attrs)], 3), target,
                image_feeds(rng, 3, sizes))


def test_global_average_pool(target):
    rng = np.random.default_rng(21)
    check_model(image_model([helper.make_node("GlobalAveragePool", ["x"], ["y"])], 5), target,
                image_feeds(rng, 5), rtol=1e-5, atol=1e-6)


def test_batch_norm_constant_params(target):
    rng = np.random.default_rng(30)
    c = 6
    inits = [const("scale", rand(rng, (c,))), const("bias", rand(rng, (c,))), const("mean", rand(rng, (c,))),
             const("var", rand(rng, (c,), lo=0.1, hi=4))]
    node = helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["y"], epsilon=1e-3)
    check_model(image_model([node], c, inits), target, image_feeds(rng, c), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rank", [2, 3])
def test_batch_norm_runtime_params(rank, target):
    rng = np.random.default_rng(31)
    shape = ["N", "C", "L"][:rank]
    params = ["scale", "bias", "mean", "var"]
    model = make_model([helper.make_node("BatchNormalization", ["x"] + params, ["y"])],
                       [vinfo("x", np.float32, shape)] + [vinfo(p, np.float32, ["C"]) for p in params],
                       [vinfo("y", np.float32, None)])
    feeds = []
    for n, c, length in [(1, 3, 5), (4, 7, 2)]:
        f = {"x": rand(rng, (n, c, length)[:rank])}
        f.update({p: rand(rng, (c,), lo=0.1 if p == "var" else -3) for p in params})
        feeds.append(f)
    check_model(model, target, feeds, rtol=1e-5, atol=1e-5)


def test_dropout(target):
    """Inference: the data passes through; the mask, when asked for, is all true."""
    rng = np.random.default_rng(40)
    nodes = [helper.make_node("Dropout", ["x", "ratio", "training"], ["d", "mask"]),
             helper.make_node("Dropout", ["x"], ["y"])]
    model = make_model(nodes, [vinfo("x", np.float32, ["N", 3, "L"])],
                       [vinfo("d", np.float32, None), vinfo("mask", np.bool_, None),
                        vinfo("y", np.float32, None)],
                       [const("ratio", np.array(0.3, np.float32)), const("training", np.array(False))])
    check_model(model, target, [{"x": rand(rng, (n, 3, length))} for n, length in [(1, 4), (5, 9)]])


def test_sum(target):
    rng = np.random.default_rng(50)
    nodes = [helper.make_node("Sum", ["a", "b", "c"], ["y"]), helper.make_node("Sum", ["a"], ["one"])]
    model = make_model(nodes, [vinfo("a", np.float32, ["N", 1, 4]), vinfo("b", np.float32, ["K", 1]),
                               vinfo("c", np.float32, [4])],
                       [vinfo("y", np.float32, None), vinfo("one", np.float32, None)])
    check_model(model, target, [{"a": rand(rng, (n, 1, 4)), "b": rand(rng, (k, 1)), "c": rand(rng, (4,))}
                                for n, k in [(1, 3), (2, 1), (3, 5)]])


def test_cnn_benchmark_architecture(target):
    """The benchmark set's cnn architecture, built here so the test never depends on a folder
    outside the repository: 3 x (Conv 3x3 pad 1 + Relu + MaxPool 2x2) + Flatten + Gemm(transB)."""
    rng = np.random.default_rng(5)
    chans = [3, 16, 32, 64]
    nodes, inits, x = [], [], "x"
    for i in range(3):
        inits += [const(f"conv{i}.W", weights(rng, chans[i + 1], chans[i], 3, 3)),
                  const(f"conv{i}.b", (rng.standard_normal(chans[i + 1]) * 0.01).astype(np.float32))]
        nodes += [helper.make_node("Conv", [x, f"conv{i}.W", f"conv{i}.b"], [f"conv{i}"], kernel_shape=[3, 3],
                                   pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"conv{i}"], [f"relu{i}"]),
                  helper.make_node("MaxPool", [f"relu{i}"], [f"pool{i}"], kernel_shape=[2, 2], strides=[2, 2])]
        x = f"pool{i}"
    inits += [const("fc.W", (rng.standard_normal((10, 64 * 8 * 8)) / 64).astype(np.float32)),
              const("fc.b", np.zeros(10, np.float32))]
    nodes += [helper.make_node("Flatten", [x], ["flat"], axis=1),
              helper.make_node("Gemm", ["flat", "fc.W", "fc.b"], ["logits"], transB=1)]
    model = make_model(nodes, [vinfo("x", np.float32, ["N", 3, 64, 64])], [vinfo("logits", np.float32, None)], inits)
    check_model(model, target, [{"x": rand(rng, (n, 3, 64, 64))} for n in (1, 2)], **TOL)
