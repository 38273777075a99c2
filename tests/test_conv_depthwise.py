"""Depthwise convolutions with vectors along the channels (toolkit/codegen/depthwise.py):
the input staged channels-last per block of LANES channels, the output pixels LANES at a
time, the block of sums transposed into the output with the bias and the fused ops. On both
targets and in wasm32's relaxed-SIMD variant, against onnx.reference, one module per model
(batch, height and width symbolic) run at several bindings.

The cases reach each path: flat groups of pixels and rows (wide ones, natively too),
channels a multiple of the lanes and not (20 = 16 + 4 natively,
5 x 4 on wasm32; 33 leaves a block of 1 on both), rows narrower and wider than a vector
(widths 3, 5, 21: the row's last group masked natively, lane by lane on wasm32), planes
whose pixel count is not a multiple of the lanes (the last group's store masked, or element
by element), strides, dilations, asymmetric pads and none, 3x3, 5x5 and 1x3 windows, an
empty batch, and fused epilogues (bias, SiLU, a residual Add and Relu). The routing cases
check which kernel a Conv got."""
import numpy as np
import pytest
from onnx import helper

from toolkit.codegen import depthwise as DW
from toolkit.codegen import plan as P
from util import check_model, compile_target, const, kernel_targets, lower_model, make_model, plans, rand, vinfo

F32 = np.float32
N = helper.make_node


@pytest.fixture(params=kernel_targets())
def target(request) -> str:
    return request.param


def _model(c, kernel, attrs, bias=True, post=None, seed=0, multiplier=1):
    rng = np.random.default_rng(seed)
    m = c * multiplier
    inits = [const("w", rng.uniform(-1, 1, (m, 1) + tuple(kernel)).astype(F32))]
    if bias:
        inits.append(const("b", rng.uniform(-1, 1, m).astype(F32)))
    inputs = [vinfo("x", F32, ["n", c, "h", "w"])]
    nodes = [N("Conv", ["x", "w"] + (["b"] if bias else []), ["t"], group=c, kernel_shape=list(kernel), **attrs)]
    if post == "silu":
        nodes += [N("Sigmoid", ["t"], ["s"]), N("Mul", ["t", "s"], ["y"])]
    elif post == "residual":  # a second depthwise Conv's output, of the same symbolic shape
        inits.append(const("w2", rng.uniform(-1, 1, (m, 1) + tuple(kernel)).astype(F32)))
        nodes += [N("Conv", ["x", "w2"], ["r"], group=c, kernel_shape=list(kernel), **attrs),
                  N("Add", ["t", "r"], ["s"]), N("Relu", ["s"], ["y"])]
    else:
        nodes[-1].output[0] = "y"
    return make_model(nodes, inputs, [vinfo("y", F32, None)], inits)


def _kernels(model, target) -> list[str]:
    _, _, module = lower_model(model, target)
    return sorted(f.name for f in module.functions if f.name.startswith("k"))


# name: (channels, kernel, attrs, bias, fused ops, images (n, h, w))
CASES = {
    "3x3_pads_20ch": (20, (3, 3), dict(pads=[1, 1, 1, 1]), True, None, [(1, 5, 3), (2, 12, 10), (1, 1, 1)]),
    "5x5_stride2_33ch": (33, (5, 5), dict(pads=[2, 2, 2, 2], strides=[2, 2]), True, None,
                         [(1, 12, 10), (2, 9, 21), (1, 3, 3)]),
    "3x3_stride2_asym_pads_silu": (48, (3, 3), dict(pads=[0, 1, 1, 0], strides=[2, 2]), True, "silu",
                                   [(2, 24, 20), (1, 7, 5)]),
    "3x3_dilation_no_pads_residual": (16, (3, 3), dict(dilations=[2, 2]), False, "residual",
                                      [(1, 9, 9), (2, 6, 21)]),
    "1x3_stride_1x2_17ch": (17, (1, 3), dict(pads=[0, 1, 0, 1], strides=[1, 2]), True, "silu",
                            [(1, 4, 40), (3, 2, 5)]),
    # wide rows go a row at a time (by_rows), natively too: 70 = 4 x 16 + 6, 16 one whole
    # group, 33 flat again (as costly either way); 50 = 3 x 16 + 2 with a 5x5 window
    "3x3_wide_rows_32ch": (32, (3, 3), dict(pads=[1, 1, 1, 1]), True, "residual",
                           [(1, 6, 70), (2, 3, 16), (1, 2, 33)]),
    "5x5_wide_rows_20ch": (20, (5, 5), dict(pads=[2, 2, 2, 2], dilations=[1, 1]), False, "silu",
                           [(1, 8, 50), (2, 5, 13)]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_depthwise_matches_reference(case, target):
    c, kernel, attrs, bias, post, images = CASES[case]
    model = _model(c, kernel, attrs, bias, post)
    assert any("conv2d_dw" in n for n in _kernels(model, target))
    if post:  # the fused ops run in the convolution's kernel
        assert not [n for n in _kernels(model, target) if "sigmoid" in n or "relu" in n or "add" in n]
    rng = np.random.default_rng(1)
    feeds = [{"x": rand(rng, (n, c, h, w))} for n, h, w in images]
    mod = check_model(model, target, feeds, rtol=1e-5, atol=1e-5)
    # an empty batch: no output, the shape of a batch of one
    assert mod.run({"x": feeds[0]["x"][:0]})["y"].shape == (0,) + mod.run(feeds[0])["y"].shape[1:]


def test_depthwise_routing(target):
    """Few channels, a channel multiplier above 1 or symbolic pads keep the direct kernel;
    16 channels and more take the channels-last one."""
    least = P.tuning(compile_target(target)).depthwise_min_channels

    def route(model):
        return [p.route for p in plans(model, target).values()]
    assert route(_model(least, (3, 3), dict(pads=[1] * 4))) == ["depthwise"]
    for model in (_model(least - 1, (3, 3), dict(pads=[1] * 4)),
                  _model(16, (3, 3), dict(pads=[1] * 4), multiplier=2),
                  _model(16, (3, 3), dict(auto_pad="SAME_UPPER", strides=[2, 2]))):
        assert route(model) == ["direct"]


def test_pack_puts_each_tap_of_a_block_in_one_vector():
    w = np.arange(20 * 9, dtype=F32).reshape(20, 1, 3, 3)
    p = DW.pack(w, 16)
    assert p.shape == (2, 9, 16)
    np.testing.assert_array_equal(p[0, 4], w[:16, 0, 1, 1])
    np.testing.assert_array_equal(p[1, 8, :4], w[16:, 0, 2, 2])
    assert not p[1, :, 4:].any()
