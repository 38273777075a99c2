"""The lone sparse row (toolkit/codegen/gemm.py: sparse_row): a MatMul or Gemm whose A is a
Relu's output and whose B is a finite constant keeps B row-major, and at one row of A skips
the rows of B that A's zeros would multiply; with more rows it runs the GEMM (natively
reading B in place, on wasm32 packing it a block at a time). Checked on both targets and in
wasm32's relaxed-SIMD variant, one module per model over several bindings of M, against
numpy in float64 and onnx.reference; on wasm32 also bit for bit against the GEMM's own lone
row (the same sums in the same order), and the route itself through the program."""
import numpy as np
import pytest
from onnx import helper

from toolkit.codegen.gemm import SPARSE_UNROLL
from util import RELAXED, assert_sums_close, build, compile_target, const, kernel_targets, make_model, plans, reference, vinfo

F32 = np.float32
N = helper.make_node


@pytest.fixture(params=kernel_targets())
def target(request) -> str:
    return request.param


def _relu_input(rng, shape, zeros: float) -> np.ndarray:
    """Values in [-1, 1] with about ``zeros`` of them <= 0 (a Relu makes those zero)."""
    x = rng.uniform(0.05, 1, shape).astype(F32)
    return np.where(rng.random(shape) < zeros, -x, x).astype(F32)


def _check(got, a_relu, w, k, bias=None):
    want = np.maximum(a_relu, 0).astype(np.float64) @ w.astype(np.float64)
    assert_sums_close(got, want if bias is None else want + bias, k)


def _routes(model, target) -> bool:
    """Whether a product's kernel plan reads B as rows."""
    return ("gemm", "rows") in [(p.route, p.packing) for p in plans(model, target).values()]


def _matmul(k, n, w, rows=("m",)):
    return make_model([N("Relu", ["x"], ["r"]), N("MatMul", ["r", "w"], ["y"])],
                      [vinfo("x", F32, [*rows, k])], [vinfo("y", F32, None)], [const("w", w)])


# (k, n): K across counts of nonzero rows with every remainder of 4; N whole chunks of the
# column loop, whole vectors after them, and columns after the last whole vector (wasm32: one
# by one; natively: masked); with more rows, natively, N a multiple of the panels' width (B
# read in place, K in several cache blocks) and not (packed)
@pytest.mark.parametrize("k,n", [(1, 64), (7, 64), (130, 67), (301, 100), (64, 129), (1000, 80), (600, 128)])
def test_matmul_rows(target, k, n):
    rng = np.random.default_rng(k * 7 + n)
    w = rng.uniform(-1, 1, (k, n)).astype(F32)
    model = _matmul(k, n, w)
    assert _routes(model, target)
    mod = build(model, target)
    for m, zeros in [(1, 0.5), (1, 0.0), (1, 0.97), (1, 1.0), (0, 0.5), (2, 0.5), (5, 0.3), (13, 0.5), (1, 0.5),
                     (40, 0.5)]:
        x = _relu_input(rng, (m, k), zeros)
        y = mod.run({"x": x})["y"]
        assert y.shape == (m, n)
        _check(y, x, w, k)


def test_gemm_fused(target):
    """A Gemm with transB, bias and a Relu fused into it, fed by another Gemm's fused Relu (a
    ReLU MLP): its second layer reads rows, and the results match onnx.reference."""
    rng = np.random.default_rng(5)
    k0, k1, n = 50, 300, 72
    w0, b0 = rng.uniform(-1, 1, (k1, k0)).astype(F32), rng.uniform(-1, 1, k1).astype(F32)
    w1, b1 = rng.uniform(-0.2, 0.2, (n, k1)).astype(F32), rng.uniform(-1, 1, n).astype(F32)
    model = make_model([N("Gemm", ["x", "w0", "b0"], ["h"], transB=1), N("Relu", ["h"], ["r"]),
                        N("Gemm", ["r", "w1", "b1"], ["g"], transB=1, alpha=0.5, beta=2.0), N("Relu", ["g"], ["y"])],
                       [vinfo("x", F32, ["batch", k0])], [vinfo("y", F32, None)],
                       [const("w0", w0), const("b0", b0), const("w1", w1), const("b1", b1)])
    assert _routes(model, target)
    mod = build(model, target)
    for batch in (1, 3, 1, 0):
        feeds = {"x": rng.uniform(-1, 1, (batch, k0)).astype(F32)}
        got, want = mod.run(feeds)["y"], reference(model, feeds)["y"]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_gemm_trans_a_and_batched_matmul(target):
    """A transposed A ([K, 1]), a 1-D A, and a MatMul whose batch dims and rows multiply to
    one."""
    rng = np.random.default_rng(6)
    k, n = 90, 70
    w = rng.uniform(-1, 1, (k, n)).astype(F32)
    c = rng.uniform(-1, 1, (1, n)).astype(F32)
    gemm = make_model([N("Relu", ["x"], ["r"]), N("Gemm", ["r", "w", "c"], ["y"], transA=1)],
                      [vinfo("x", F32, [k, "m"])], [vinfo("y", F32, None)], [const("w", w), const("c", c)])
    assert _routes(gemm, target)
    mod = build(gemm, target)
    for m in (1, 4):
        x = _relu_input(rng, (k, m), 0.5)
        _check(mod.run({"x": x})["y"], x.T, w, k, c)
    vector = make_model([N("Relu", ["x"], ["r"]), N("MatMul", ["r", "w"], ["y"])], [vinfo("x", F32, [k])],
                        [vinfo("y", F32, None)], [const("w", w)])
    assert _routes(vector, target)
    x = _relu_input(rng, (k,), 0.5)
    y = build(vector, target).run({"x": x})["y"]
    assert y.shape == (n,)
    _check(y, x, w, k)
    batched = _matmul(k, n, w, rows=("b", "s"))
    assert _routes(batched, target)
    mod = build(batched, target)
    for b, s in ((1, 1), (2, 1), (1, 3), (0, 1)):
        x = _relu_input(rng, (b, s, k), 0.5)
        y = mod.run({"x": x})["y"]
        assert y.shape == (b, s, n)
        _check(y, x, w, k)


def test_nan_and_inf(target):
    """A NaN or an infinity in A is not a zero: it reaches every column as onnx.reference
    has it. A B with an infinity keeps the GEMM's panels, where a zero of A times it is the
    NaN that onnx.reference computes."""
    rng = np.random.default_rng(7)
    k, n = 33, 64
    w = rng.uniform(-1, 1, (k, n)).astype(F32)
    model = _matmul(k, n, w)
    mod = build(model, target)
    for bad in (np.nan, np.inf):
        x = _relu_input(rng, (1, k), 0.5)
        x[0, 5] = bad
        feeds = {"x": x}
        np.testing.assert_allclose(mod.run(feeds)["y"], reference(model, feeds)["y"], rtol=1e-4, atol=1e-5)
    w[3, 10] = np.inf
    model = _matmul(k, n, w)
    assert not _routes(model, target)
    x = _relu_input(rng, (1, k), 0.5)
    x[0, 3] = -1.0  # a zero after the Relu, against the infinity
    got, want = build(model, target).run({"x": x})["y"], reference(model, {"x": x})["y"]
    assert np.isnan(want[0, 10]) and np.isnan(got[0, 10])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_routing(target):
    """Rows only where they pay: not for an A that no Relu makes, nor for a fixed M above one,
    nor for fewer columns than a chunk of the column loop."""
    rng = np.random.default_rng(8)
    lanes = compile_target(target).f32_lanes
    w = rng.uniform(-1, 1, (20, 64)).astype(F32)
    plain = make_model([N("MatMul", ["x", "w"], ["y"])], [vinfo("x", F32, ["m", 20])], [vinfo("y", F32, None)],
                       [const("w", w)])
    assert not _routes(plain, target)
    assert not _routes(_matmul(20, 64, w, rows=(2,)), target)
    assert _routes(_matmul(20, 64, w, rows=(1,)), target)
    narrow = rng.uniform(-1, 1, (20, SPARSE_UNROLL * lanes - 1)).astype(F32)
    assert not _routes(_matmul(20, narrow.shape[1], narrow), target)


@pytest.mark.parametrize("target", ("wasm32", RELAXED))
def test_same_bits_as_the_gemm_row(target):
    """On wasm32 the GEMM's lone row against two panels or more sums all of k in one chain
    per column, as the sparse row does over the nonzero rows: the same model fed the Relu's output directly (no Relu, so
    panels) gives the same bits."""
    rng = np.random.default_rng(9)
    k, n = 700, 96
    w = rng.uniform(-1, 1, (k, n)).astype(F32)
    plain = make_model([N("MatMul", ["x", "w"], ["y"])], [vinfo("x", F32, ["m", k])], [vinfo("y", F32, None)],
                       [const("w", w)])
    rows, panels = build(_matmul(k, n, w), target), build(plain, target)
    for _ in range(3):
        x = _relu_input(rng, (1, k), 0.5)
        np.testing.assert_array_equal(rows.run({"x": x})["y"], panels.run({"x": np.maximum(x, 0)})["y"])
