"""Convolutions with few pixels as the transposed GEMM (toolkit/codegen/conv.py
build_conv2d_t): pixels as the GEMM's rows, the packed weights as its B, then the product
transposed into the output with the bias and the fused ops. 1 x 1 kernels without pads on
both targets and in wasm32's relaxed-SIMD variant; larger kernels and pads natively, from
the patch matrix copied out (wasm32 keeps the GEMM of the weights as A for them, which is
checked too). Against onnx.reference, one module per model run at several batch sizes (the
batch is symbolic; the route needs the pixels static).

The cases reach each path of the transposition: whole blocks of LANES channels by LANES
pixels, the pixels after the last whole vector (7 x 7 = 49 is 3 x 16 + 1 natively, 12 x 4 + 1
on wasm32; 3 x 3 is less than one AVX-512 vector), the channels after the last whole block
(122 channels: 7 x 16 + 10, 30 x 4 + 2), depths of one and of two k blocks, strides (the
input staged into phases, phase 0 read; odd and even sizes), an empty batch, and the fused
epilogue (bias, a residual read on vectors of pixels, Relu). The routing cases check which
kernel a Conv got."""
import numpy as np
import pytest
from onnx import helper

from toolkit.codegen import conv as C
from toolkit.codegen import plan as P
from toolkit.codegen.gemm import tile_for
from toolkit.codegen.target import get_target
from util import check_model, compile_target, const, is_native, kernel_targets, lower_model, make_model, plans, vinfo

F32 = np.float32
N = helper.make_node


@pytest.fixture(params=kernel_targets())
def target(request) -> str:
    return request.param


def _out(size, pad, k, stride, dilation):
    return (size + pad - dilation * (k - 1) - 1) // stride + 1


def _model(c, m, h, w, bias=True, residual=False, strides=(1, 1), weights_input=False, seed=0, pads=(0, 0, 0, 0),
           kernel=(1, 1), dilations=(1, 1)):
    rng = np.random.default_rng(seed)
    inputs = [vinfo("x", F32, ["n", c, h, w])]
    inits = [const("b", rng.uniform(-1, 1, m).astype(F32))] if bias else []
    wt = rng.uniform(-1, 1, (m, c) + tuple(kernel)).astype(F32)
    if weights_input:
        inputs.append(vinfo("w", F32, [m, c] + list(kernel)))
    else:
        inits.append(const("w", wt))
    nodes = [N("Conv", ["x", "w"] + (["b"] if bias else []), ["t"], strides=list(strides), pads=list(pads),
               dilations=list(dilations))]
    if residual:
        oh = _out(h, pads[0] + pads[2], kernel[0], strides[0], dilations[0]) if isinstance(h, int) else "oh"
        ow = _out(w, pads[1] + pads[3], kernel[1], strides[1], dilations[1]) if isinstance(w, int) else "ow"
        inputs.append(vinfo("r", F32, ["n", m, oh, ow]))
        nodes += [N("Add", ["t", "r"], ["s"]), N("Relu", ["s"], ["y"])]
    else:
        nodes[-1].output[0] = "y"
    return make_model(nodes, inputs, [vinfo("y", F32, None)], inits), wt


def _kernels(model, target) -> list[str]:
    _, _, module = lower_model(model, target)
    return sorted(f.name for f in module.functions if f.name.startswith("k"))


def _route(model, target) -> str:
    """The kernel plan's route of the model's one Conv."""
    got = [p.route for p in plans(model, target).values()]
    assert len(got) == 1, got
    return got[0]


def _transposed(model, target) -> bool:
    return _route(model, target) == "transposed"


CASES = {
    # name: (channels in, out, h, w, strides, bias, residual); outputs of 7 x 7 and 3 x 3
    "7x7": (20, 122, 7, 7, (1, 1), True, False),
    "7x7_residual_relu": (20, 122, 7, 7, (1, 1), True, True),
    # 2048 channels: a k block of the packed weights is 2 MB, so natively the rows are one
    # block (CONV_T_ONE_BLOCK_BYTES), where 36-row blocks would take 49 pixels in two
    "7x7_2048_channels": (300, 2048, 7, 7, (1, 1), True, True),
    "3x3_two_k_blocks": (300, 128, 3, 3, (1, 1), False, False),
    "3x3_residual_no_bias": (9, 122, 3, 3, (1, 1), False, True),
    "stride2_13x14": (20, 122, 13, 14, (2, 2), True, True),
    "stride_3x2_9x6": (9, 122, 9, 6, (3, 2), True, False),
}


# natively, from the patch matrix: (channels in, out, h, w, strides, bias, residual, kernel,
# pads, dilations). resnet50's 3 x 3 layers on small images (a stride-1 7 x 7 output; stride
# 2 from 14 x 14), an output row of one masked vector and of a whole one and a masked one
# (AVX-512: 16 lanes; 20 pixels wide is 16 + 4), asymmetric pads, dilation, 1 x 1 with
# pads, and a 5 x 3 kernel; depths of one and of two k blocks (300 x 9 = 2700)
PATCH_CASES = {
    "3x3_7x7": (20, 122, 7, 7, (1, 1), True, False, (3, 3), (1, 1, 1, 1), (1, 1)),
    "3x3_s2_14x14_residual_relu": (20, 122, 14, 14, (2, 2), True, True, (3, 3), (1, 1, 1, 1), (1, 1)),
    "3x3_two_k_blocks_20_wide": (300, 64, 6, 20, (1, 1), False, False, (3, 3), (1, 1, 1, 1), (1, 1)),
    "3x3_asymmetric_pads_dilated": (9, 122, 9, 8, (1, 1), True, True, (3, 3), (2, 0, 1, 3), (2, 2)),
    "1x1_pads": (20, 122, 5, 5, (1, 1), True, False, (1, 1), (1, 1, 1, 1), (1, 1)),
    "5x3_stride_3x2": (9, 122, 17, 12, (3, 2), True, False, (5, 3), (2, 1, 2, 1), (1, 1)),
}


# 3 x 3 convolutions of stride 1 on images with enough tiles for the 16-column panels of
# x86-64-v2 and -v3 take Winograd there (winograd.route), the transposed GEMM only against
# AVX-512's 32-column panels
WINOGRAD_ON_16_COLUMNS = {"3x3_7x7", "3x3_two_k_blocks_20_wide"}


def _feeds(rng, c, m, h, w, residual, oh, ow):
    """Inputs of an h x w image (and an oh x ow residual) at batches 1, 3 and 0."""
    feeds = []
    for n in (1, 3, 0):
        f = {"x": rng.uniform(-1, 1, (n, c, h, w)).astype(F32)}
        if residual:
            f["r"] = rng.uniform(-1, 1, (n, m, oh, ow)).astype(F32)
        feeds.append(f)
    return feeds


def _check(model, target, c, m, h, w, residual, oh, ow):
    check_model(model, target, _feeds(np.random.default_rng(3), c, m, h, w, residual, oh, ow), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", sorted(CASES))
def test_conv_t(target, case):
    c, m, h, w, strides, bias, residual = CASES[case]
    model, _ = _model(c, m, h, w, bias, residual, strides=strides, seed=len(case))
    assert _transposed(model, target)
    _check(model, target, c, m, h, w, residual, (h - 1) // strides[0] + 1, (w - 1) // strides[1] + 1)


@pytest.mark.parametrize("case", sorted(PATCH_CASES))
def test_conv_t_patches(target, case):
    c, m, h, w, strides, bias, residual, kernel, pads, dilations = PATCH_CASES[case]
    model, _ = _model(c, m, h, w, bias, residual, strides=strides, seed=len(case), pads=pads, kernel=kernel,
                      dilations=dilations)
    if case in WINOGRAD_ON_16_COLUMNS and is_native(target) and tile_for(compile_target(target)).nr == 16:
        assert _route(model, target) == "winograd"
    else:
        assert _transposed(model, target) == is_native(target)
    _check(model, target, c, m, h, w, residual, _out(h, pads[0] + pads[2], kernel[0], strides[0], dilations[0]),
           _out(w, pads[1] + pads[3], kernel[1], strides[1], dilations[1]))


def test_routing(target):
    """Pixels that fill the panels (56 x 56 = 3136, 98 of AVX-512's and 196 of wasm32's) and
    weights given at run time keep the GEMM convolution of the weights as A; so do pads and
    kernels larger than 1 x 1 on wasm32, and an image of symbolic size (auto_pad SAME)."""
    assert not _transposed(_model(8, 64, 56, 56)[0], target)
    assert not _transposed(_model(20, 122, 7, 7, weights_input=True)[0], target)
    assert not _transposed(_model(8, 64, 30, 30, kernel=(3, 3), pads=(1, 1, 1, 1))[0], target)
    assert _transposed(_model(20, 122, 5, 5, pads=(1, 1, 1, 1))[0], target) == is_native(target)
    rng = np.random.default_rng(0)
    three = make_model([N("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], strides=[2, 2])],
                       [vinfo("x", F32, ["n", 64, 14, 14])], [vinfo("y", F32, None)],
                       [const("w", rng.uniform(-1, 1, (512, 64, 3, 3)).astype(F32))])
    assert _transposed(three, target) == is_native(target)
    same = make_model([N("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER", strides=[2, 2])],
                      [vinfo("x", F32, ["n", 64, "h", "w"])], [vinfo("y", F32, None)],
                      [const("w", rng.uniform(-1, 1, (512, 64, 3, 3)).astype(F32))])
    assert not _transposed(same, target)


def test_route_counts_padded_work():
    """The route takes the orientation whose panels waste no more, up to
    CONV_T_MAX_PIXELS: 49 pixels in 32-column panels (64 computed) against 122 channels
    in them (128); 13 x 13 = 169 pixels (192) against 1000 channels (1024); not 28 x 28."""
    native, wasm = P.tuning(get_target("native")), P.tuning(get_target("wasm32"))
    tile = native.tile
    win = C.Window(kernel=(1, 1), strides=(1, 1), dilations=(1, 1), pads=(0, 0, 0, 0))
    for h, m in ((7, 122), (13, 1000), (14, 1024), (3, 5), (16, 64)):
        px = h * h
        want = px <= C.CONV_T_MAX_PIXELS and px * (-(-m // tile.nr) * tile.nr) <= (-(-px // tile.nr) * tile.nr) * m
        assert P.transposed_route(native, win, 1, 20, m, (1, m, h, h)) == want, (h, m)
        three = C.Window(kernel=(3, 3), strides=(1, 1), dilations=(1, 1), pads=(1, 1, 1, 1))
        assert P.transposed_route(native, three, 1, 20, m, (1, m, h, h)) == want, (h, m)
        assert not P.transposed_route(wasm, three, 1, 20, m, (1, m, h, h))
    assert P.transposed_route(native, win, 1, 512, 1000, (1, 1000, 13, 13))
    assert not P.transposed_route(native, win, 1, 256, 512, (1, 512, 28, 28))
    assert not P.transposed_route(native, win, 2, 20, 122, (1, 122, 7, 7))


def test_weights_packed_as_w_transposed():
    """The packed B holds W^T: panel p, row c, column j is w[p * NR + j, c], zero past M."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((37, 5, 1, 1)).astype(F32)
    packed = C.pack_conv_t(w, 16)
    assert packed.shape == (3, 5, 16)
    for p in range(3):
        for c in range(5):
            for j in range(16):
                want = w[p * 16 + j, c, 0, 0] if p * 16 + j < 37 else 0.0
                assert packed[p, c, j] == want


# an image known only at run time (symbolic height and width): natively the Conv carries both
# routes and each call takes the transposed GEMM when its pixels are few (conv_t_wins).
# (channels in, out, kernel, pads, strides, bias, residual, [(h, w), ...]): sizes on both
# sides of the choice, each run at batches 1, 3 and 0 by one module. Output rows of one
# masked vector (3 x 5), of a whole vector and a masked one (5 x 20 natively), 1 x 1 pixel,
# more than CONV_T_MAX_PIXELS (20 x 17 = 340, the GEMM of the weights as A), depths of one
# and of several k blocks, a 1 x 1 kernel read in place and one on a strided input (phase 0
# of the staged input), and 2048 channels (the transposed GEMM's rows in one block)
DUAL_CASES = {
    "3x3_residual_relu": (20, 122, (3, 3), (1, 1, 1, 1), (1, 1), True, True, [(1, 1), (3, 5), (5, 20), (20, 17)]),
    "3x3_two_k_blocks": (300, 64, (3, 3), (1, 1, 1, 1), (1, 1), False, False, [(2, 2), (7, 7), (18, 18)]),
    "3x3_s2_asymmetric": (9, 122, (3, 3), (2, 0, 1, 1), (2, 2), True, False, [(5, 4), (14, 14), (40, 36)]),
    "1x1": (20, 122, (1, 1), (0, 0, 0, 0), (1, 1), True, True, [(1, 1), (7, 7), (17, 17)]),
    "1x1_stride2": (20, 122, (1, 1), (0, 0, 0, 0), (2, 2), True, False, [(13, 14), (40, 40)]),
    "1x1_2048_channels": (64, 2048, (1, 1), (0, 0, 0, 0), (1, 1), True, False, [(7, 7), (20, 20)]),
}


@pytest.mark.parametrize("case", sorted(DUAL_CASES))
def test_conv_t_chosen_per_call(target, case):
    c, m, kernel, pads, strides, bias, residual, sizes = DUAL_CASES[case]
    model, _ = _model(c, m, "h", "w", bias, residual, strides=strides, seed=len(case), pads=pads, kernel=kernel)
    _, prog, _ = lower_model(model, target)
    consts = [key for key, _ in prog.consts]
    if is_native(target):
        # one copy of the weights, packed as the transposed GEMM's B, which the GEMM of the
        # weights as A reads as its NR-row panels
        tile = tile_for(compile_target(target))
        assert consts.count(f"w/conv_t{tile.nr}") == 1 and not any("panel_a" in k for k in consts), consts
    else:
        assert not any("conv_t" in k for k in consts), consts
    rng = np.random.default_rng(5)
    feeds = []
    for h, w in sizes:
        oh = _out(h, pads[0] + pads[2], kernel[0], strides[0], 1)
        ow = _out(w, pads[1] + pads[3], kernel[1], strides[1], 1)
        feeds += _feeds(rng, c, m, h, w, residual, oh, ow)
    check_model(model, target, feeds, rtol=1e-4, atol=1e-4)


def test_route_per_call_matches_static_route():
    """The choice a call makes (conv_t_wins, the same function on run-time values) is the one
    the plan's transposed_route makes for that many pixels at compile time."""
    native = P.tuning(get_target("native"))
    tile = native.tile
    win = C.Window(kernel=(1, 1), strides=(1, 1), dilations=(1, 1), pads=(0, 0, 0, 0))
    for m in (8, 64, 122, 1000):
        for px in (0, 1, 15, 16, 33, 49, 64, 100, 169, 256, 257, 400):
            h, w = (px, 1)
            assert C.conv_t_wins(px, m, tile.nr) == P.transposed_route(native, win, 1, 20, m, (1, m, h, w)), (m, px)
    assert C.conv_t_wins(1, 64, 32) and not C.conv_t_wins(257, 2048, 32) and not C.conv_t_wins(0, 64, 32)
