"""A GEMM whose k fits one cache block applies a cheap epilogue (bias, a residual, Relu, Clip:
ops of a vector instruction or two, fused.CHEAP) to the accumulators as it stores them; a
costlier epilogue (Sigmoid), or more than one k block, still runs it over each stored tile
read back (gemm.gemm's finish loop). The routing is read from the kernels' IR: the finish
loop's blocks are named "er". Every case runs against onnx.reference at several batch sizes
from one module, on wasm32, in its relaxed-SIMD variant and natively."""
import numpy as np
import pytest
from onnx import helper

from util import RELAXED, check_model, const, lower_model, make_model, vinfo

F32 = np.float32
N = helper.make_node
TARGETS = ["wasm32", RELAXED, "native"]


def _conv(c: int, act: str):
    """A 1 x 1 Conv of c channels into 29 (whole row tiles and leftover rows on every target)
    of an 8 x 8 image (64 pixels: whole panels on every target, so no partial panel's copy),
    plus a residual, then ``act``."""
    rng = np.random.default_rng(c)
    nodes = [N("Conv", ["x", "w", "b"], ["t"]), N("Add", ["t", "r"], ["s"]), N(act, ["s"], ["y"])]
    return make_model(nodes, [vinfo("x", F32, ["n", c, 8, 8]), vinfo("r", F32, ["n", 29, 8, 8])],
                      [vinfo("y", F32, None)],
                      [const("w", rng.uniform(-1, 1, (29, c, 1, 1)).astype(F32)),
                       const("b", rng.uniform(-1, 1, 29).astype(F32))])


def _finish_loops(model, target: str) -> int:
    _, _, module = lower_model(model, target)
    kernels = [str(f) for f in module.functions if "conv2d_gemm" in f.name]
    assert len(kernels) == 1, [f.name for f in module.functions]
    return sum(line.startswith("er.head") for line in kernels[0].splitlines())


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("c,act,inline", [(24, "Relu", True), (24, "Sigmoid", False), (300, "Relu", False)],
                         ids=["cheap_one_block", "sigmoid", "two_k_blocks"])
def test_conv_epilogue_route(target, c, act, inline):
    model = _conv(c, act)
    assert (_finish_loops(model, target) == 0) == inline
    rng = np.random.default_rng(9)
    feeds = [{"x": rng.uniform(-1, 1, (n, c, 8, 8)).astype(F32), "r": rng.uniform(-1, 1, (n, 29, 8, 8)).astype(F32)}
             for n in (1, 2, 0)]
    check_model(model, target, feeds, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", TARGETS)
def test_matmul_bias_relu_clip_inline(target):
    """MatMul + bias + Relu + Clip with k in one block and a symbolic M, N = 40: whole panels
    take the epilogue in registers, the partial panel's columns through its copy."""
    rng = np.random.default_rng(4)
    nodes = [N("MatMul", ["a", "w"], ["t"]), N("Add", ["t", "bias"], ["u"]), N("Relu", ["u"], ["v"]),
             N("Clip", ["v", "lo", "hi"], ["y"])]
    model = make_model(nodes, [vinfo("a", F32, ["m", 33])], [vinfo("y", F32, None)],
                       [const("w", rng.uniform(-1, 1, (33, 40)).astype(F32)),
                        const("bias", rng.uniform(-1, 1, 40).astype(F32)),
                        const("lo", np.array(0.1, F32)), const("hi", np.array(1.5, F32))])
    check_model(model, target, [{"a": rng.uniform(-1, 1, (m, 33)).astype(F32)} for m in (1, 3, 13, 0)],
                rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", TARGETS)
def test_gemm_alpha_beta_c_inline(target):
    """Gemm with alpha, beta and a C of one row (read as whole vectors), k in one block."""
    rng = np.random.default_rng(5)
    model = make_model([N("Gemm", ["a", "w", "c"], ["y"], alpha=0.5, beta=2.0)], [vinfo("a", F32, ["m", 17])],
                       [vinfo("y", F32, None)],
                       [const("w", rng.uniform(-1, 1, (17, 64)).astype(F32)),
                        const("c", rng.uniform(-1, 1, (1, 64)).astype(F32))])
    check_model(model, target, [{"a": rng.uniform(-1, 1, (m, 17)).astype(F32)} for m in (1, 2, 25, 0)],
                rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("c_shape", [["m", 1], [], [1, 1]], ids=["column", "scalar", "one_by_one"])
def test_gemm_splat_c_inline(target, c_shape):
    """Gemm whose C is one value per row, or one value: read as a splat, in registers, k in one
    block; C an input, so its values change between runs of one module."""
    rng = np.random.default_rng(6)
    model = make_model([N("Gemm", ["a", "w", "c"], ["y"], beta=-1.5)],
                       [vinfo("a", F32, ["m", 20]), vinfo("c", F32, c_shape)], [vinfo("y", F32, None)],
                       [const("w", rng.uniform(-1, 1, (20, 48)).astype(F32))])

    def feeds(m):
        shape = [m if d == "m" else d for d in c_shape]
        return {"a": rng.uniform(-1, 1, (m, 20)).astype(F32), "c": rng.uniform(-1, 1, shape).astype(F32)}

    check_model(model, target, [feeds(m) for m in (1, 3, 14, 0)], rtol=1e-4, atol=1e-4)
