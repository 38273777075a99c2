"""Natively, a GEMM convolution whose fused ops read a residual (a tensor of the output's
shape) prefetches each tile's lines of it when the tile's last k block starts
(conv.residual_prefetch, gemm.gemm's ``prefetch``). The prefetch is a hint, so the results
must not change: 1 x 1 and 3 x 3 convolutions with Add and Relu fused, with one k block and
with two (the 3 x 3 ones dilated), run on both targets against onnx.reference at several batch sizes; the native
kernel holds the prefetch and wasm32's does not, nor does a convolution without a residual.
The transposed GEMM's output pass (conv.build_conv2d_t) fetches the next block of channels'
lines of y for a write, and of a residual for a read."""
import numpy as np
import pytest
from onnx import helper

from util import check_model, const, is_native, kernel_targets, lower_model, make_model, native_targets, vinfo

F32 = np.float32
N = helper.make_node


def _model(c: int, m: int, k: int, residual: bool):
    rng = np.random.default_rng(c + m + k)
    # 3 x 3 dilated by 2 (pads 2: the output keeps the input's size), which no Winograd route takes
    dil = 1 if k == 1 else 2
    nodes = [N("Conv", ["x", "w", "b"], ["t"], pads=[dil * (k // 2)] * 4, dilations=[dil, dil])]
    inputs = [vinfo("x", F32, ["n", c, 17, 19])]
    if residual:
        nodes += [N("Add", ["t", "r"], ["s"]), N("Relu", ["s"], ["y"])]
        inputs.append(vinfo("r", F32, ["n", m, 17, 19]))
    else:
        nodes[0].output[0] = "y"
    return make_model(nodes, inputs, [vinfo("y", F32, None)],
                      [const("w", rng.uniform(-1, 1, (m, c, k, k)).astype(F32)),
                       const("b", rng.uniform(-1, 1, m).astype(F32))])


def _prefetches(model, target) -> bool:
    _, _, module = lower_model(model, target)
    kernels = [f for f in module.functions if "conv2d_gemm" in f.name]
    assert kernels, [f.name for f in module.functions]
    return any("llvm.prefetch" in str(f) for f in kernels)


@pytest.mark.parametrize("target", kernel_targets())
@pytest.mark.parametrize("c,m,k", [(24, 13, 1), (300, 13, 1), (8, 29, 3), (40, 13, 3)],
                         ids=["1x1", "1x1_two_k_blocks", "3x3", "3x3_two_k_blocks"])
def test_residual_prefetched(target, c, m, k):
    model = _model(c, m, k, residual=True)
    assert _prefetches(model, target) == is_native(target)
    assert not _prefetches(_model(c, m, k, residual=False), target)
    rng = np.random.default_rng(5)
    feeds = [{"x": rng.uniform(-1, 1, (n, c, 17, 19)).astype(F32), "r": rng.uniform(-1, 1, (n, m, 17, 19)).astype(F32)}
             for n in (1, 2, 0)]
    check_model(model, target, feeds, rtol=1e-4, atol=1e-4)


def _conv_t_model(residual: bool):
    """A 1 x 1 convolution of a 7 x 7 image into 88 channels, which natively runs as the
    transposed GEMM (conv.conv_t_route): 5 blocks of 16 channels and 8 after them."""
    rng = np.random.default_rng(7)
    nodes = [N("Conv", ["x", "w", "b"], ["t" if residual else "y"])]
    inputs = [vinfo("x", F32, ["n", 24, 7, 7])]
    if residual:
        nodes += [N("Add", ["t", "r"], ["s"]), N("Relu", ["s"], ["y"])]
        inputs.append(vinfo("r", F32, ["n", 88, 7, 7]))
    return make_model(nodes, inputs, [vinfo("y", F32, None)],
                      [const("w", rng.uniform(-1, 1, (88, 24, 1, 1)).astype(F32)),
                       const("b", rng.uniform(-1, 1, 88).astype(F32))])


def _conv_t_prefetches(model) -> tuple[int, int]:
    """The native conv_t kernel's prefetches: (for a read, for a write)."""
    _, _, module = lower_model(model, "native")
    kernels = [str(f) for f in module.functions if "conv2d_t" in f.name]
    assert len(kernels) == 1, [f.name for f in module.functions]
    calls = [line for line in kernels[0].splitlines() if "call void" in line and "llvm.prefetch" in line]
    return (sum("i32 0, i32 3, i32 1" in c for c in calls), sum("i32 1, i32 3, i32 1" in c for c in calls))


@pytest.mark.parametrize("target", ["wasm32", *native_targets()])
def test_conv_t_output_prefetched(target):
    """The transposed GEMM's output pass fetches the next block of channels' lines of y (for
    a write) and of the residual (for a read), natively; the prefetch is a hint, so the
    results stay those of onnx.reference, with the last block of channels fetching its own."""
    model = _conv_t_model(residual=True)
    if is_native(target):
        reads, writes = _conv_t_prefetches(model)
        assert writes == 16 and reads == 16, (reads, writes)  # a line per channel of a block
        assert _conv_t_prefetches(_conv_t_model(residual=False)) == (0, 16)
    rng = np.random.default_rng(3)
    feeds = [{"x": rng.uniform(-1, 1, (n, 24, 7, 7)).astype(F32), "r": rng.uniform(-1, 1, (n, 88, 7, 7)).astype(F32)}
             for n in (1, 2, 0)]
    check_model(model, target, feeds, rtol=1e-4, atol=1e-4)
