"""Kernel plans (toolkit/codegen/plan.py, the select-kernels pass in toolkit/passes/kernels.py):
the table of per-target constants, the routes the policy picks, every Conv route asked for by
name and run against onnx.reference on every target and CPU level from one module per model
at several bindings, the errors for a route that cannot run a node, fusion reading the plan,
lowering emitting it, and ``symwasm inspect`` printing it."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

from toolkit.codegen import gemm as G
from toolkit.codegen import plan as P
from toolkit.codegen.target import get_target
from toolkit.ir.graph import CompileError
from util import check_model, compile_target, const, is_native, kernel_targets, lower_model, make_model, plans, vinfo

ROOT = Path(__file__).resolve().parents[1]

F32 = np.float32
N = helper.make_node
ROUTE_KERNELS = {"nd": "conv_nd", "direct": "conv2d", "gemm": "conv2d_gemm", "winograd": "conv2d_winograd",
                 "transposed": "conv2d_t", "depthwise": "conv2d_dw"}


pytestmark = pytest.mark.every_level  # the fast tier too runs every route at every level


@pytest.fixture(params=kernel_targets())
def target(request) -> str:
    return request.param


def _convs(routes, image, c=16, m=32, seed=0):
    """One Conv (3x3, pads 1, bias) then a Relu per route, all reading x [n, c, image...];
    and a depthwise Conv of the same input."""
    rng = np.random.default_rng(seed)
    nodes, inits, outs = [], [const("w", rng.uniform(-1, 1, (m, c, 3, 3)).astype(F32)),
                              const("b", rng.uniform(-1, 1, m).astype(F32)),
                              const("wd", rng.uniform(-1, 1, (c, 1, 3, 3)).astype(F32))], []
    for r in routes:
        w = ["wd"] if r == "depthwise" else ["w", "b"]
        nodes += [N("Conv", ["x", w[0]] + w[1:], [f"t_{r}"], name=r, pads=[1] * 4,
                    **({"group": c} if r == "depthwise" else {})),
                  N("Relu", [f"t_{r}"], [f"y_{r}"])]
        outs.append(vinfo(f"y_{r}", F32, None))
    return make_model(nodes, [vinfo("x", F32, ["n", c, *image])], outs, inits)


def test_the_table_per_target():
    """wasm32 keeps Winograd on images of run-time size and not the transposed GEMM's
    patches nor both routes per call; every native level does the opposite. Tiles are
    gemm.tile_for's."""
    wasm = P.tuning(get_target("wasm32"))
    assert (wasm.symbolic_winograd, wasm.transposed_patches, wasm.dual) == (True, False, False)
    assert wasm.tile == G.tile_for(get_target("wasm32"))
    for level in ("x86-64-v2", "x86-64-v3", "x86-64-v4"):
        t = get_target("native", level)
        native = P.tuning(t)
        assert (native.symbolic_winograd, native.transposed_patches, native.dual) == (False, True, True)
        assert native.tile == G.tile_for(t)


def test_policy_picks(target):
    """What the policy picks. An image of run-time size, 16 -> 32 channels: Winograd on wasm32
    (16 x 32 = 512 products, at least 5 of its 2 x 16 tiles), the GEMM carrying both routes
    natively. 64 -> 64 channels at 32 x 32: Winograd everywhere (4096 products, 5 of
    AVX-512's 12 x 32 tiles; 256 tiles of 2 x 2 pixels). 16 -> 32 at 6 x 6: too few 2 x 2
    tiles (9) for any panel width, and the transposed GEMM natively, whose patches wasm32
    does not copy (the GEMM there). A depthwise Conv of 16 channels: channels-last."""
    native = is_native(target)
    got = {k: p.route for k, p in plans(_convs(["gemm", "depthwise"], ["h", "w"]), target).items()}
    assert got == {"gemm": "gemm" if native else "winograd", "depthwise": "depthwise"}
    p = plans(_convs(["gemm"], ["h", "w"]), target)["gemm"]
    assert p.dual == native and p.packing == ("conv_t" if native else "winograd")
    big = {k: p.route for k, p in plans(_convs(["gemm"], [32, 32], c=64, m=64), target).items()}
    assert big == {"gemm": "winograd"}
    small = {k: p.route for k, p in plans(_convs(["gemm"], [6, 6]), target).items()}
    assert small == {"gemm": "transposed" if native else "gemm"}


STATIC_ROUTES = ["nd", "direct", "gemm", "winograd", "transposed", "depthwise"]
SYMBOLIC_ROUTES = ["nd", "direct", "gemm", "winograd", "depthwise"]


def test_every_conv_route_asked_for_by_name(target):
    """Each Conv route that can run a 3x3 convolution, asked for by name, on a static 6 x 6
    image at batches 1, 2 and 0, and (all but the transposed GEMM, which needs the pixels at
    compile time) on an image of run-time size at three sizes; each against onnx.reference.
    The plans say the route asked for, and the fused Relu follows the plan (fused where the
    kernel has an epilogue, a node of its own after the direct kernels)."""
    rng = np.random.default_rng(1)
    for image, routes, sizes in (([6, 6], STATIC_ROUTES, [(1, 6, 6), (2, 6, 6), (0, 6, 6)]),
                                 (["h", "w"], SYMBOLIC_ROUTES, [(1, 5, 7), (2, 9, 4), (1, 1, 1)])):
        model = _convs(routes, image)
        asked = {r: r for r in routes}
        got = plans(model, target, routes=asked)
        assert {k: p.route for k, p in got.items()} == asked
        graph, _, _ = lower_model(model, target, routes=asked)  # (fusion, then lowering, follow the plans)
        fused = {n.name for n in graph.nodes if getattr(n.op, "post", ())}
        assert fused == {r for r in routes if r not in ("nd", "direct")}, fused
        feeds = [{"x": rng.uniform(-1, 1, (n, 16, h, w)).astype(F32)} for n, h, w in sizes]
        check_model(model, target, feeds, rtol=1e-4, atol=1e-5, routes=asked)


@pytest.mark.parametrize("route", STATIC_ROUTES)
def test_lowering_emits_the_plan(route):
    """The kernel each route's plan lowers to (its LLVM function), on both targets."""
    for target in ("wasm32", "native"):
        _, _, module = lower_model(_convs([route], [6, 6]), target, routes={route: route})
        names = [f.name.split("_", 1)[1] for f in module.functions if f.name.startswith("k")]
        assert [n for n in names if n.startswith("conv")] == [f"{ROUTE_KERNELS[route]}_float32"], names


def test_a_route_that_cannot_run_the_node():
    """A route the node's kernel cannot take, or a node with no choice of kernel, is a
    CompileError naming the node and what it can run."""
    model = _convs(["gemm"], ["h", "w"])
    with pytest.raises(CompileError, match=r"node 'gemm' \(Conv\): route 'transposed' cannot run it \(it can run "
                                           r"nd, direct, gemm, winograd\)"):
        plans(model, "wasm32", routes={"gemm": "transposed"})
    with pytest.raises(CompileError, match="routes asked for nodes with no kernel choice: nothing"):
        plans(model, "wasm32", routes={"nothing": "gemm"})
    mm = make_model([N("MatMul", ["x", "w"], ["y"], name="mm")], [vinfo("x", F32, ["m", 4])], [vinfo("y", F32, None)],
                    [const("w", np.ones((4, 4), F32))])
    with pytest.raises(CompileError, match=r"node 'mm' \(MatMul\): route 'loops' cannot run it \(it runs gemm\)"):
        plans(mm, "wasm32", routes={"mm": "loops"})


def test_matmul_and_resize_plans(target):
    """A constant B packed in panels, B kept as rows after a Relu at batch 1 (with the nonzero
    rows' scratch), a run-time B packed in the kernel, an int64 product in loops; a Resize of
    the last two axes by constant scales by rows, by run-time ones element by element."""
    w = np.ones((8, 64), F32)
    mm = make_model([N("Relu", ["x"], ["r"]), N("MatMul", ["r", "w"], ["y1"], name="rows"),
                     N("MatMul", ["x", "w"], ["y2"], name="panels"), N("MatMul", ["x", "v"], ["y3"], name="runtime"),
                     N("MatMul", ["i", "j"], ["y4"], name="loops")],
                    [vinfo("x", F32, [1, 8]), vinfo("v", F32, [8, 3]), vinfo("i", np.int64, [2, 2]),
                     vinfo("j", np.int64, [2, 2])],
                    [vinfo(n, F32, None) for n in ("y1", "y2", "y3")] + [vinfo("y4", np.int64, None)],
                    [const("w", w)])
    got = plans(mm, target)
    lanes = compile_target(target).f32_lanes
    assert 64 >= P.tuning(compile_target(target)).sparse_min_vectors * lanes
    assert {k: (p.route, p.packing) for k, p in got.items()} == {
        "rows": ("gemm", "rows"), "panels": ("gemm", "panels"), "runtime": ("gemm", ""), "loops": ("loops", "")}
    assert [s.what for s in got["rows"].scratch] == ["nonzero rows"]
    rs = make_model([N("Resize", ["x", "", "s"], ["y"], name="c", mode="linear"),
                     N("Resize", ["x", "", "t"], ["z"], name="r", mode="linear")],
                    [vinfo("x", F32, ["n", "c", "h", "w"]), vinfo("t", F32, [4])],
                    [vinfo("y", F32, None), vinfo("z", F32, None)], [const("s", np.array([1, 1, 2, 2], F32))],
                    opset=19)
    assert {k: p.route for k, p in plans(rs, target).items()} == {"c": "rows", "r": "elements"}


def test_inspect_prints_the_plans(tmp_path):
    """The module's metadata holds each plan; ``symwasm inspect`` prints them with the fused ops."""
    from toolkit.compiler import compile_model

    out = tmp_path / "m.wasm"
    compile_model(_convs(["gemm", "depthwise"], [6, 6]), out)
    res = subprocess.run([sys.executable, "-m", "toolkit.cli", "inspect", str(out), "--no-program"],
                         capture_output=True, text=True, cwd=ROOT, check=True)
    assert "kernel plans (2 nodes; routes: depthwise 1, gemm 1):" in res.stdout, res.stdout
    assert "  Conv 'gemm': gemm, tile 2x16, weights panel_a, scratch staged input float32(n, 16, 1, 8, 8); " \
           "then relu" in res.stdout, res.stdout
    meta = json.loads(subprocess.run([sys.executable, "-m", "toolkit.cli", "inspect", str(out), "--json"],
                                     capture_output=True, text=True, cwd=ROOT, check=True).stdout)
    assert meta["plans"]["depthwise"]["route"] == "depthwise" and meta["plans"]["depthwise"]["fused"] == ["relu"]
