"""A GEMM convolution's constant weights packed at compile time into panels of a register
tile's rows (gemm.PanelA, gemm.pack_a): each k step's broadcasts read consecutive floats. The
layout is checked element by element; models whose output channels are fewer than a tile, a
tile and one more row, and two tiles, with a depth of two k blocks (32 x 9 = 288), run on
both targets against onnx.reference, next to the same convolution with its weights given at
run time, which is read as it is."""
import numpy as np
import pytest
from onnx import helper

from toolkit.codegen.gemm import pack_a, tile_for
from util import check_model, compile_target, const, kernel_targets, lower_model, make_model, vinfo

F32 = np.float32


def test_pack_a_layout():
    """Panel p, column k, lane r is a[p * MR + r, k], zero past M."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((29, 7)).astype(F32)
    packed = pack_a(a, 12)
    assert packed.shape == (3, 7, 12)
    for p in range(3):
        for k in range(7):
            for r in range(12):
                want = a[p * 12 + r, k] if p * 12 + r < 29 else 0.0
                assert packed[p, k, r] == want


def _model(m: int, weights_input: bool):
    rng = np.random.default_rng(m)
    w = rng.uniform(-1, 1, (m, 32, 3, 3)).astype(F32)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1], strides=[2, 1])
    inputs = [vinfo("x", F32, ["n", 32, 9, 11])]
    inits = [const("b", rng.uniform(-1, 1, m).astype(F32))]
    if weights_input:
        inputs.append(vinfo("w", F32, [m, 32, 3, 3]))
    else:
        inits.append(const("w", w))
    return make_model([node], inputs, [vinfo("y", F32, None)], inits), w


@pytest.mark.parametrize("target", kernel_targets())
@pytest.mark.parametrize("weights_input", [False, True], ids=["constant", "run-time"])
def test_conv_with_panel_weights(target, weights_input):
    mr = tile_for(compile_target(target)).mr
    for m in (mr - 1, mr + 1, 2 * mr):
        model, w = _model(m, weights_input)
        _, prog, module = lower_model(model, target)
        assert any("conv2d_gemm" in f.name for f in module.functions)
        names = [name for name, _ in prog.consts]
        assert (f"w/panel_a{mr}" in names) == (not weights_input), names
        rng = np.random.default_rng(1)
        feeds = []
        for n in (1, 2, 0):
            f = {"x": rng.uniform(-1, 1, (n, 32, 9, 11)).astype(F32)}
            if weights_input:
                f["w"] = w
            feeds.append(f)
        check_model(model, target, feeds, rtol=1e-4, atol=1e-4)
