"""3x3 convolutions by Winograd's F(2x2, 3x3) (toolkit/codegen/winograd.py), on both targets
and in wasm32's relaxed-SIMD variant, against onnx.reference, one module per model run at
several bindings of its symbolic dims.

The bindings reach each path of the transforms: vectors of 8 and of 4 tiles and single tiles
(a tile row of 15 tiles is 8 + 4 + 3), an odd output height and width (the last tile row and
column have one output row or column), an output of one pixel and an empty one, padding on
any side, a batch, several chunks of tile rows per image, and the fused epilogue (bias,
activation, a residual read on whole vectors of pixels). The routing cases check which kernel
a Conv's plan got: too few channels, too few in all for the target's register tile, weights
given at run time, a stride, (natively, with AVX-512's 32-column panels) too few tiles, and
natively an image whose size is known only at run time keep the plain GEMM convolution. The
tests of images known only at run time ask for Winograd by name natively (``routes``), so
its kernel runs them at every CPU level too; images bound at compile time take it by the
policy (test_static_images)."""
import numpy as np
import pytest
from onnx import helper

from toolkit.codegen import plan as P
from toolkit.codegen import winograd as W
from toolkit.codegen.gemm import tile_for
from util import check_model, compile_target, const, is_native, kernel_targets, lower_model, make_model, plans, vinfo

F32 = np.float32
N = helper.make_node


@pytest.fixture(params=kernel_targets())
def target(request) -> str:
    return request.param


# an image known only at run time takes Winograd on wasm32, not natively (plan.winograd_route);
# natively these tests ask for the route by name, so the kernel runs on such images too
def symbolic_image(target: str) -> dict:
    """What a test of an image known only at run time compiles with: natively, the route
    asked for (the policy keeps the plain GEMM there, checked by :func:`_check_routes`)."""
    return {"routes": {"conv": "winograd"}} if is_native(target) else {}


def _route(model, target, binds=None, routes=None) -> str:
    """The route of the model's one Conv."""
    got = [p.route for n, p in plans(model, target, binds, routes).items()]
    assert len(got) == 1, got
    return got[0]


def _check_routes(model, target) -> dict:
    """A symbolic image: Winograd by the policy on wasm32, the GEMM natively, where it runs
    when asked for. The compile options that run Winograd."""
    assert _route(model, target) == ("gemm" if is_native(target) else "winograd")
    kw = symbolic_image(target)
    assert _route(model, target, routes=kw.get("routes")) == "winograd"
    return kw


def _rand(rng, shape):
    return rng.uniform(-1, 1, shape).astype(F32)


def _conv(c, m, pads=(1, 1, 1, 1), post=(), bias=True, seed=0, strides=(1, 1), weights_input=False):
    rng = np.random.default_rng(seed)
    w, b = _rand(rng, (m, c, 3, 3)), _rand(rng, (m,))
    inputs = [vinfo("x", F32, ["n", c, "h", "w"])]
    inits = [const("b", b)] if bias else []
    if weights_input:
        inputs.append(vinfo("w", F32, [m, c, 3, 3]))
    else:
        inits.append(const("w", w))
    nodes = [N("Conv", ["x", "w"] + (["b"] if bias else []), ["t0"], name="conv", pads=list(pads),
               strides=list(strides))]
    for i, (op, inputs_, attrs) in enumerate(post):
        nodes.append(N(op, [f"t{i}"] + inputs_, [f"t{i + 1}"], **attrs))
    nodes[-1].output[0] = "y"
    extra = [vinfo(name, F32, ["n", m, "h", "w"]) for op, names, _ in post for name in names]
    return make_model(nodes, inputs + extra, [vinfo("y", F32, None)], inits), w


def _winograd(model, target, binds=None) -> bool:
    return _route(model, target, binds) == "winograd"


@pytest.mark.parametrize("pads", [(1, 1, 1, 1), (0, 0, 0, 0), (0, 2, 1, 0)])
def test_transform_paths(target, pads):
    """Tile rows of 15 (8 + 4 + 3 tiles), 16 and 2; odd and even output sizes; one pixel;
    a batch of two."""
    model, _ = _conv(16, 128, pads, seed=sum(pads))
    kw = _check_routes(model, target)
    rng = np.random.default_rng(1)
    top, left, bottom, right = pads[0], pads[1], pads[2], pads[3]
    shapes = [(1, 30, 30), (2, 7, 31), (1, 5, 34), (1, 3, 4)]
    feeds = [{"x": _rand(rng, (n, 16, h - top - bottom + 2, w - left - right + 2))} for n, h, w in shapes]
    feeds.append({"x": _rand(rng, (1, 16, 3 - top - bottom, 3 - left - right))})  # a 1 x 1 output
    check_model(model, target, feeds, rtol=1e-4, atol=1e-5, **kw)


def test_empty_output(target):
    """An input smaller than the filter without padding: a [1, 128, 0, w] output, no trap."""
    model, _ = _conv(16, 128, (0, 0, 0, 0))
    kw = _check_routes(model, target)
    check_model(model, target, [{"x": _rand(np.random.default_rng(2), (1, 16, 2, 6))},
                                {"x": _rand(np.random.default_rng(3), (1, 16, 5, 5))}], rtol=1e-4, atol=1e-5, **kw)


def test_chunks_of_tile_rows(target):
    """300 output channels: a chunk holds 16384 // 300 = 54 tiles, four rows of 12, so a 24 x 24
    output (12 x 12 tiles) is three chunks and a 23 x 21 one (12 x 11 tiles) too."""
    assert W.chunk_tiles(8, 300) == 54
    model, _ = _conv(8, 300, seed=4)
    kw = _check_routes(model, target)
    rng = np.random.default_rng(4)
    check_model(model, target, [{"x": _rand(rng, (1, 8, 24, 24))}, {"x": _rand(rng, (1, 8, 23, 21))}],
                rtol=1e-4, atol=1e-5, **kw)


def test_fused_epilogue(target):
    """Conv -> Add(., r) -> Relu, fused: the bias, the residual read a vector of pixels at a
    time and the activation run in the output transform."""
    model, _ = _conv(16, 128, post=[("Add", ["r"], {}), ("Relu", [], {})], seed=5)
    graph, _, _ = lower_model(model, target)
    assert [type(n.op).__name__ for n in graph.nodes] == ["Conv"]
    assert [(p.op.fn, p.operand) for p in graph.nodes[0].op.post] == [("add", "full"), ("relu", "")]
    kw = _check_routes(model, target)
    rng = np.random.default_rng(5)
    feeds = [{"x": _rand(rng, (n, 16, h, w)), "r": _rand(rng, (n, 128, h, w))} for n, h, w in [(1, 18, 33), (2, 5, 9)]]
    check_model(model, target, feeds, rtol=1e-4, atol=1e-5, **kw)


def test_no_bias(target):
    model, _ = _conv(32, 64, bias=False, seed=6)
    kw = _check_routes(model, target)
    rng = np.random.default_rng(6)
    check_model(model, target, [{"x": _rand(rng, (1, 32, 17, 40))}, {"x": _rand(rng, (1, 32, 6, 6))}],
                rtol=1e-4, atol=1e-5, **kw)


@pytest.mark.parametrize("why", ["few channels", "small product", "run-time weights", "stride"])
def test_plain_gemm_otherwise(target, why):
    """Fewer than 8 input channels, too few channels in all for the tile (8 x 16 is less than
    five of wasm32's 2 x 16 tiles), weights that are an input, or a stride: the GEMM
    convolution runs (and is right)."""
    least = P.tuning(compile_target(target)).winograd_min_channels
    kw = {"few channels": dict(c=least - 1, m=512), "small product": dict(c=8, m=16),
          "run-time weights": dict(c=16, m=128, weights_input=True), "stride": dict(c=16, m=128, strides=(2, 2))}[why]
    model, w = _conv(**kw, seed=7)
    assert not _winograd(model, target)
    rng = np.random.default_rng(7)
    feeds = {"x": _rand(rng, (1, kw["c"], 12, 13))}
    if kw.get("weights_input"):
        feeds["w"] = w
    check_model(model, target, [feeds], rtol=1e-4, atol=1e-5)


def test_few_tiles_against_the_panel_width(target):
    """A static 7 x 7 output is 16 tiles: Winograd on wasm32 (16-column panels), the plain
    GEMM with AVX-512's 32-column ones."""
    rng = np.random.default_rng(8)
    model = make_model([N("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], [vinfo("x", F32, [1, 16, 7, 7])],
                       [vinfo("y", F32, None)], [const("w", _rand(rng, (128, 16, 3, 3)))])
    nr = tile_for(compile_target(target)).nr
    assert _winograd(model, target) == (16 >= nr)
    check_model(model, target, [{"x": _rand(rng, (1, 16, 7, 7))}], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case", ["rows of 15 tiles, batch 2", "odd sizes, asymmetric pads", "chunks",
                                  "fused epilogue"])
def test_static_images(target, case):
    """Images of a size known at compile time (h and w bound) with at least a panel's width
    of tiles take Winograd on every target, natively too: tile rows of 15 (8 + 4 + 3 tiles),
    odd output sizes, asymmetric pads, several chunks of tile rows, and the fused epilogue."""
    c, m, pads, post, (n, h, w) = {
        "rows of 15 tiles, batch 2": (16, 128, (1, 1, 1, 1), (), (2, 30, 30)),
        "odd sizes, asymmetric pads": (16, 128, (0, 2, 1, 0), (), (1, 32, 29)),
        "chunks": (8, 300, (1, 1, 1, 1), (), (1, 24, 23)),
        "fused epilogue": (16, 128, (1, 1, 1, 1), [("Add", ["r"], {}), ("Relu", [], {})], (1, 18, 33)),
    }[case]
    model, _ = _conv(c, m, pads, post=post, seed=9)
    binds = {"h": h, "w": w}
    assert _winograd(model, target, binds)
    rng = np.random.default_rng(9)
    feeds = {"x": _rand(rng, (n, c, h, w))}
    if post:
        oh, ow = h + pads[0] + pads[2] - 2, w + pads[1] + pads[3] - 2
        feeds["r"] = _rand(rng, (n, m, oh, ow))
    check_model(model, target, [feeds], rtol=1e-4, atol=1e-5, binds=binds)


def test_weight_transform():
    """U = G g Gt against its definition, element by element in float64."""
    w = np.random.default_rng(9).standard_normal((3, 2, 3, 3))
    g = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])
    u = W.transform_weights(w)
    assert u.shape == (16, 3, 2) and u.dtype == F32
    for m in range(3):
        for c in range(2):
            np.testing.assert_allclose(u[:, m, c].reshape(4, 4), g @ w[m, c] @ g.T, rtol=1e-6)
