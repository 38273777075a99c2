"""Convolutions whose patch panels the GEMM reads in place (im2col.Im2col.direct): natively,
when the output rows are a known multiple of the panel width, every panel lies in one output
row, and the microkernel reads its rows straight from the staged input through a table of
row offsets instead of packing them. Each case runs on both targets (wasm32 packs, the same
model) against onnx.reference, with batches of 1, 2 and 0 from one module, and checks which
kernel it got: the offsets' table is in the native kernel, and absent where a row length is
not a multiple of the panel or unknown."""
import numpy as np
import pytest
from onnx import helper

from toolkit.codegen.gemm import tile_for
from toolkit.codegen.target import get_target
from util import check_model, const, is_native, kernel_targets, lower_model, make_model, plans, vinfo

F32 = np.float32
NR = tile_for(get_target("native")).nr  # a native panel's columns (32 with AVX-512, 16 with AVX2)

CASES = {
    # name: (channels in, out, kernel, strides, pads, dilations, input height and width, post ops)
    # fewer output channels than a register tile: only the leftover rows' tile (9: more than
    # the direct kernel's direct_max_out)
    "few_channels": (3, 9, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), (5, NR), ()),
    # depth 96 * 3 = 288: two k blocks; 13 output channels: a whole tile and a leftover row;
    # two panels a row; the Relu fused into the epilogue of the last block (a 1 x 3 kernel:
    # a 3 x 3 one takes Winograd at x86-64-v2 and -v3)
    "two_k_blocks": (96, 13, (1, 3), (1, 1), (0, 1, 0, 1), (1, 1), (3, 2 * NR), ("Relu",)),
    # stride 2 through the phases, asymmetric padding, dilation 2
    "strided_dilated": (5, 7, (3, 3), (2, 2), (2, 1, 0, 3), (2, 2), (9, 2 * NR), ()),
    # a 7x7 first layer, stride 2, 24 output channels (two whole 12-row tiles natively)
    "first_layer_7x7": (3, 24, (7, 7), (2, 2), (3, 3, 3, 3), (1, 1), (8, 2 * NR), ("Sigmoid",)),
}


def _model(c, m, k, strides, pads, dil, hw, post, w_symbolic=False):
    rng = np.random.default_rng(c * m)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["t0"], kernel_shape=list(k), strides=list(strides),
                              pads=list(pads), dilations=list(dil))]
    for i, op in enumerate(post):
        nodes.append(helper.make_node(op, [f"t{i}"], [f"t{i + 1}"]))
    nodes[-1].output[0] = "y"
    x_shape = ["n", c, hw[0], "w" if w_symbolic else hw[1]]
    return make_model(nodes, [vinfo("x", F32, x_shape)], [vinfo("y", F32, None)],
                      [const("w", rng.uniform(-1, 1, (m, c) + k).astype(F32)),
                       const("b", rng.uniform(-1, 1, m).astype(F32))])


def _direct(model, target: str) -> bool:
    """Whether the Conv kernel reads its panels in place (its offsets' table is there)."""
    _, _, module = lower_model(model, target)
    return any("koffs" in str(f) for f in module.functions if "conv2d_gemm" in f.name)


@pytest.mark.parametrize("target", kernel_targets())
@pytest.mark.parametrize("case", sorted(CASES))
def test_panels_in_place(target, case):
    c, m, k, strides, pads, dil, hw, post = CASES[case]
    model = _model(c, m, k, strides, pads, dil, hw, post)
    assert _direct(model, target) == is_native(target), "native reads in place, wasm32 packs"
    rng = np.random.default_rng(len(case))
    feeds = [{"x": rng.uniform(-1, 1, (n, c) + hw).astype(F32)} for n in (1, 2, 0)]
    check_model(model, target, feeds, rtol=1e-4, atol=1e-5)


def test_packed_where_a_panel_would_wrap():
    """Rows one pixel short of two panels, or of a length known only at run time: packed."""
    c, m, k, strides, pads, dil, hw, post = CASES["two_k_blocks"]
    assert _direct(_model(c, m, k, strides, pads, dil, hw, post), "native")
    assert not _direct(_model(c, m, k, strides, pads, dil, (hw[0], hw[1] - 1), post), "native")
    assert not _direct(_model(c, m, k, strides, pads, dil, hw, post, w_symbolic=True), "native")


def test_few_channels_take_the_direct_kernel():
    """At most direct_max_in input and direct_max_out output channels (an RGB stem into 8)
    run the direct convolution kernel, not the GEMM, on both targets; one channel more either
    way takes the GEMM. Checked against onnx.reference at two batches."""
    from toolkit.codegen.plan import tuning

    def route(c, m, target):
        model = _model(c, m, (7, 7), (2, 2), (3, 3, 3, 3), (1, 1), (9, 11), ("Relu",))
        return [p.route for p in plans(model, target).values()]

    for target in ("wasm32", "native"):
        tn = tuning(get_target(target))
        c, m = tn.direct_max_in, tn.direct_max_out
        assert (c, m) == (4, 8)
        assert route(c, m, target) == ["direct"]
        assert route(c + 1, m, target) == ["gemm"]
        assert route(c, m + 1, target) == ["gemm"]
        rng = np.random.default_rng(7)
        model = _model(3, 8, (7, 7), (2, 2), (3, 3, 3, 3), (1, 1), (9, 11), ("Relu",))
        check_model(model, target, [{"x": rng.uniform(-1, 1, (n, 3, 9, 11)).astype(F32)} for n in (1, 2)],
                    rtol=1e-4, atol=1e-5)
