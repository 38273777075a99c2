"""The float32 GEMM microkernel (toolkit/codegen/gemm.py) behind MatMul and Gemm, on both
targets and in wasm32's relaxed-SIMD variant, against numpy in float64. The bindings are chosen to reach every path of both
targets' tiles (wasm32 2 x 16, AVX2 6 x 16, AVX-512 12 x 32): rows that fill whole tiles and rows left over,
fewer rows than a tile (one row against several panels at once, on wasm32 over all of k in one
block), M = 0 and 1, symbolic and fixed; N a multiple
of the panel width and not (the partial panel), N below one vector; K = 0, K inside one
cache block, on its edge, and K over several blocks with a partial last one; a constant B
(packed at compile time) and a run-time B (packed a block at a time, by vectors when its
rows are contiguous and element by element when it is transposed); batched and
broadcast MatMul; Gemm's transposes, alpha and C. One module per model, several bindings."""
import numpy as np
import pytest
from onnx import helper

from toolkit.codegen.gemm import GemmTile, pack_b
from util import assert_sums_close, build, const, kernel_targets, make_model, vinfo

F32 = np.float32


@pytest.fixture(params=kernel_targets())
def target(request) -> str:
    """The GEMM kernels run on both targets and in wasm32's relaxed-SIMD variant (FMA)."""
    return request.param


N = helper.make_node
KC = 256


def _rand(rng, shape):
    return rng.uniform(-1, 1, shape).astype(F32)


def _const_matmul(w, m="m"):
    """a [m, K] @ the constant w [K, N]; m a symbol or a fixed row count."""
    return make_model([N("MatMul", ["a", "w"], ["y"])], [vinfo("a", F32, [m, w.shape[0]])], [vinfo("y", F32, None)],
                      [const("w", w)])


@pytest.mark.parametrize("k,n", [(1, 1), (5, 7), (16, 8), (33, 16), (KC, 17), (KC + 1, 40), (600, 67), (40, 300)])
def test_constant_b(target, k, n):
    """A constant [k, n] B with a symbolic M: 0, 1, fewer rows than either tile, whole tiles
    and leftovers, more than one cache block of rows."""
    rng = np.random.default_rng(k * 100 + n)
    w = _rand(rng, (k, n))
    mod = build(_const_matmul(w), target)
    for m in (0, 1, 2, 3, 5, 6, 7, 10, 11, 12, 13, 25, 100):
        a = _rand(rng, (m, k))
        y = mod.run({"a": a})["y"]
        assert y.shape == (m, n)
        assert_sums_close(y, a.astype(np.float64) @ w, k)


@pytest.mark.parametrize("k,n", [(KC + 1, 40), (600, 67), (2 * KC, 32)])
def test_lone_row(target, k, n):
    """One row (M = 1 fixed by the model) against a constant B over K past one cache block:
    on wasm32 all of k is one block, with Gemm's bias and a Relu fused into its epilogue."""
    rng = np.random.default_rng(k + n)
    w, c = _rand(rng, (n, k)), _rand(rng, (n,))
    mod = build(make_model([N("Gemm", ["a", "w", "c"], ["g"], transB=1), N("Relu", ["g"], ["y"])],
                           [vinfo("a", F32, [1, k])], [vinfo("y", F32, None)], [const("w", w), const("c", c)]), target)
    for _ in range(2):
        a = _rand(rng, (1, k))
        assert_sums_close(mod.run({"a": a})["y"], np.maximum(a.astype(np.float64) @ w.T + c, 0), k)


@pytest.mark.parametrize("k", [2, 3, 6, 7, 9, 1021])
def test_narrow_lone_row(target, k):
    """A row against one panel or less of B (a classifier's 10 columns) sums k in
    interleaved chains (2 on wasm32, 4 natively) added at the end, then the k the chains did
    not share: every k modulo 8, a fixed M = 1 with Gemm's bias, and a symbolic M whose last
    row is a tile of its own."""
    rng = np.random.default_rng(k)
    for n in (10, 3):
        w, c = _rand(rng, (n, k)), _rand(rng, (n,))
        fixed = build(make_model([N("Gemm", ["a", "w", "c"], ["y"], transB=1)], [vinfo("a", F32, [1, k])],
                                 [vinfo("y", F32, None)], [const("w", w), const("c", c)]), target)
        a = _rand(rng, (1, k))
        assert_sums_close(fixed.run({"a": a})["y"], a.astype(np.float64) @ w.T + c, k)
        rows = build(_const_matmul(w.T.copy()), target)
        for m in (1, 3, 13):
            a = _rand(rng, (m, k))
            assert_sums_close(rows.run({"a": a})["y"], a.astype(np.float64) @ w.T, k)


@pytest.mark.parametrize("n", [5, 183])
def test_equal_columns_equal_sums(target, n):
    """Every column of a row is summed in the same order, whichever path computes it: a B
    whose columns are all equal gives equal columns bit for bit, with A's elements spread
    over six decades so that another order would round differently. 183 columns make panel
    groups, a lone whole panel and a partial one on every tile (wasm32 16 wide in pairs,
    AVX2 16 in fours, AVX-512 32 in fours); 5 are one partial panel."""
    rng = np.random.default_rng(n)
    k = 1000
    col = _rand(rng, (k, 1))
    w = np.repeat(col, n, axis=1)
    fixed, rows = build(_const_matmul(w, 1), target), build(_const_matmul(w), target)
    for mod, ms in ((fixed, (1,)), (rows, (1, 2, 3, 13))):
        for m in ms:
            a = (rng.standard_normal((m, k)) * 10.0 ** rng.uniform(-3, 3, (m, k))).astype(F32)
            y = mod.run({"a": a})["y"]
            np.testing.assert_array_equal(y, np.repeat(y[:, :1], n, axis=1))
            assert_sums_close(y, a.astype(np.float64) @ w, k)


def test_runtime_b(target):
    """Every dim symbolic, B an input: packed a block at a time inside the kernel."""
    mod = build(make_model([N("MatMul", ["a", "b"], ["y"])], [vinfo("a", F32, ["m", "k"]), vinfo("b", F32, ["k", "n"])],
                           [vinfo("y", F32, None)]), target)
    rng = np.random.default_rng(1)
    for m, k, n in [(0, 3, 4), (3, 0, 5), (1, 1, 1), (4, 7, 3), (7, 9, 8), (6, 16, 16), (13, KC, 33),
                    (9, KC + 3, 17), (25, 2 * KC + 10, 50), (2, 40, 100), (5, 20, 9), (11, 3, 24)]:
        a, b = _rand(rng, (m, k)), _rand(rng, (k, n))
        y = mod.run({"a": a, "b": b})["y"]
        assert y.shape == (m, n)
        assert_sums_close(y, a.astype(np.float64) @ b, k)


def test_batched_broadcast(target):
    """Batch dims that broadcast both ways; a 1-D A (one row); a batched constant B."""
    rng = np.random.default_rng(2)
    mod = build(make_model([N("MatMul", ["a", "b"], ["y"])],
                           [vinfo("a", F32, ["p", 1, "m", "k"]), vinfo("b", F32, ["q", "k", "n"])],
                           [vinfo("y", F32, None)]), target)
    for p, q, m, k, n in [(2, 3, 5, 9, 17), (1, 2, 1, 300, 8), (3, 1, 7, 4, 1)]:
        a, b = _rand(rng, (p, 1, m, k)), _rand(rng, (q, k, n))
        assert_sums_close(mod.run({"a": a, "b": b})["y"], np.matmul(a.astype(np.float64), b), k)
    w = _rand(rng, (3, 20, 9))
    mod = build(make_model([N("MatMul", ["v", "w"], ["y"])], [vinfo("v", F32, ["k"])], [vinfo("y", F32, None)],
                           [const("w", w)]), target, binds={"k": 20})
    v = _rand(rng, (20,))
    assert_sums_close(mod.run({"v": v})["y"], np.matmul(v.astype(np.float64), w), 20)


@pytest.mark.parametrize("ta,tb,const_b", [(0, 0, False), (1, 0, False), (0, 1, False), (1, 1, False),
                                           (0, 1, True), (1, 0, True)])
def test_gemm_transposes(target, ta, tb, const_b):
    """Gemm's transposed A (a strided view) and B (a constant is transposed and packed at
    compile time; a run-time one is packed element by element along k), alpha and a
    broadcast C, over K across cache blocks."""
    rng = np.random.default_rng(3 + ta + 2 * tb)
    k, n = KC + 70, 21
    b = _rand(rng, (n, k) if tb else (k, n))
    c = _rand(rng, (n,))
    inputs = [vinfo("a", F32, ["k", "m"] if ta else ["m", "k"])]
    inits = [const("c", c)]
    if const_b:
        inits.append(const("b", b))
    else:
        inputs.append(vinfo("b", F32, list(b.shape)))
    mod = build(make_model([N("Gemm", ["a", "b", "c"], ["y"], transA=ta, transB=tb, alpha=0.75, beta=-2.0)], inputs,
                           [vinfo("y", F32, None)], inits), target)
    bb = b.T if tb else b
    for m in (1, 5, 14):
        a = _rand(rng, (k, m) if ta else (m, k))
        feeds = {"a": a} if const_b else {"a": a, "b": b}
        aa = a.T if ta else a
        assert_sums_close(mod.run(feeds)["y"], 0.75 * (aa.astype(np.float64) @ bb) - 2.0 * c, k)


def test_pack_b_layout():
    """Panels of nr columns, k rows each, the last padded with zeros: checked element by
    element against the definition."""
    tile = GemmTile(mr=4, nr=8, lanes=4, kc=KC, mc=64)
    b = np.arange(3 * 19, dtype=F32).reshape(3, 19)
    p = pack_b(b, tile.nr)
    assert p.shape == (3, 3, 8)
    for panel in range(3):
        for kk in range(3):
            for c in range(8):
                j = panel * 8 + c
                assert p[panel, kk, c] == (b[kk, j] if j < 19 else 0)
