"""Kernel plans: which kernel runs an op that has more than one (its route), with the tile,
the compile-time packing of its constant operand, and the scratch buffers that kernel needs.

The select-kernels pass (:mod:`toolkit.passes.kernels`) chooses a plan once per target for
each Conv, MatMul, Gemm, Resize and pool, after simplification and before fusion, from the
constants of one table (:class:`Tuning`, per target). Fusion reads a plan to know whether the
kernel takes elementwise ops in its epilogue (:attr:`Plan.fusable`); lowering emits the plan;
``symwasm inspect`` prints it. Every routing policy of the tuned kernels is in this file, with
the measurements behind its thresholds; the kernels (:mod:`.conv`, :mod:`.gemm`,
:mod:`.winograd`, :mod:`.depthwise`, :mod:`.resize`) hold how each route computes.

Routes by op:

- Conv: ``nd`` (the direct N-D kernel of :mod:`.conv_nd`: not float32 2-D), ``direct`` (the
  register-tiled direct kernel of :func:`.conv.build_conv2d`), ``depthwise``
  (:mod:`.depthwise`), ``gemm`` (:func:`.conv.build_conv2d_gemm`; ``dual``: it also carries
  the transposed GEMM and picks per call), ``transposed`` (:func:`.conv.build_conv2d_t`),
  ``winograd`` (:mod:`.winograd`).
- MatMul and Gemm: ``loops`` (plain loops: not float32) or ``gemm`` (the microkernel), whose
  constant B is packed into ``panels`` or kept as ``rows`` for the sparse row kernel.
- Resize: ``rows`` (each output row's input rows interpolated once) or ``elements``.
- Pool: ``indices`` (MaxPool with its Indices output), ``padded`` (the window loop, over a
  padded copy of the input when the window needs one) or ``clamped`` (a max pool reading
  the input with its taps clamped to the edges, :func:`.conv_pool.clamp_fits`).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import prod

import numpy as np

from ..ir import dims as D
from ..ir.dims import Dim
from ..ir.dtypes import FLOAT32, FLOAT64, INT32, INT64, DType
from . import conv as C
from . import conv_pool as CP
from . import depthwise as DW
from . import gemm as G
from . import winograd as W
from .conv import Window

FUSABLE = frozenset({"gemm", "transposed", "winograd", "depthwise"})  # kernels with an epilogue


@dataclass(frozen=True)
class Tuning:
    """The constants routes are chosen by, for one target (:func:`tuning`). The GEMM tile is
    :func:`.gemm.tile_for`'s, where each is measured."""

    tile: G.GemmTile
    # an image whose size is known only at run time takes Winograd (see winograd_route)
    symbolic_winograd: bool
    # the transposed GEMM takes kernels larger than 1 x 1 and pads, copying the patches out
    # first (see transposed_route)
    transposed_patches: bool
    # a Conv on an image known only at run time carries the GEMM and the transposed GEMM and
    # picks per call (see dual_route)
    dual: bool
    # at most this many input and output channels (known at compile time), a Conv of one group
    # runs the direct kernel (see gemm_route)
    direct_max_in: int = 4
    direct_max_out: int = 8
    # Winograd: input and output channels below which a Conv stays a plain GEMM, and input
    # times output channels in GEMM register tiles (see winograd_route)
    winograd_min_channels: int = 8
    winograd_min_tile_products: int = 5
    # fewer channels than this keep the direct kernel: a block of the widest vectors (16
    # lanes) would be mostly padding (see depthwise_route)
    depthwise_min_channels: int = 16
    # the sparse row kernel wants B at least this many vectors wide (a chunk of its column loop)
    sparse_min_vectors: int = G.SPARSE_UNROLL
    # a max pool that would copy its input padded reads it with clamped taps (see plan_pool)
    clamped_pool: bool = False


def tuning(target) -> Tuning:
    """The route constants of ``target`` (a :class:`.target.Target`): the same on every
    native CPU but for the tile; wasm32 keeps Winograd on images of run-time size and the
    GEMM of the weights as A where natively the transposed GEMM measured faster."""
    tile = G.tile_for(target)
    if target.is_wasm:
        return Tuning(tile, symbolic_winograd=True, transposed_patches=False, dual=False)
    return Tuning(tile, symbolic_winograd=False, transposed_patches=True, dual=True, clamped_pool=True)


def check_route(route: str | None, routes: Sequence[str]) -> None:
    """A route asked for by name (``None``: none asked for) must be one of ``routes``, those
    whose kernel can run the node: else a ValueError naming them."""
    if route is not None and route not in routes:
        can = f"it runs {routes[0]}" if len(routes) == 1 else f"it can run {', '.join(routes)}"
        raise ValueError(f"route '{route}' cannot run it ({can})")


@dataclass(frozen=True)
class Scratch:
    """A scratch buffer a kernel takes: what it holds (for messages), dtype and shape."""

    what: str
    dtype: DType
    shape: tuple[Dim, ...]


@dataclass(frozen=True)
class Plan:
    """A kernel plan: ``route`` (see the module's docstring), the GEMM ``tile`` when the
    route has one, ``packing`` (how a constant operand is laid out at compile time: "" as
    given, else the name of its layout, :meth:`packed_weights`), ``dual`` (a Conv's GEMM
    route carrying the transposed GEMM too) and the ``scratch`` buffers, in the order the
    kernel takes them."""

    route: str
    tile: G.GemmTile | None = None
    packing: str = ""
    dual: bool = False
    scratch: tuple[Scratch, ...] = ()

    @property
    def fusable(self) -> bool:
        """Whether the kernel takes elementwise ops as its epilogue (:mod:`toolkit.passes.fuse`)."""
        return self.route in FUSABLE

    def packed_weights(self, group: int = 1) -> tuple[str, Callable[[np.ndarray], np.ndarray]] | None:
        """A Conv's constant weights as its route reads them: (the derived constant's key,
        the function making it from [M, C/group, kh, kw]), or None when read as given."""
        t = self.tile
        match self.packing:
            case "":
                return None
            case "direct":
                return f"packed_g{group}", lambda a: C.pack_weights(a, group)
            case "panel_a":
                return f"panel_a{t.mr}", lambda a: G.pack_a(a.reshape(a.shape[0], -1), t.mr)
            case "conv_t":
                return f"conv_t{t.nr}", lambda a: C.pack_conv_t(a, t.nr)
            case "winograd":
                return "winograd", W.transform_weights
            case "depthwise":
                return f"depthwise{t.lanes}", lambda a: DW.pack(a, t.lanes)
        raise ValueError(f"unknown packing {self.packing!r}")

    def describe(self) -> str:
        """One line for ``symwasm inspect``."""
        parts = [self.route]
        if self.tile is not None and self.route not in ("direct", "depthwise"):
            parts.append(f"tile {self.tile.mr}x{self.tile.nr}")
        if self.route == "depthwise":
            parts.append(f"{self.tile.lanes} lanes")
        if self.dual:
            parts.append("or transposed per call")
        if self.packing:
            parts.append(f"weights {self.packing}")
        for s in self.scratch:
            parts.append(f"scratch {s.what} {s.dtype.name}{D.fmt_shape(s.shape)}")
        return ", ".join(parts)


# ----------------------------------------------------------------------------- Conv routes


def gemm_route(tn: Tuning, win: Window, group: int, c: Dim, m: Dim) -> bool:
    """Whether a float32 2-D Conv of ``c`` input and ``m`` output channels runs as a GEMM
    (:func:`.conv.build_conv2d_gemm`): one group. A grouped convolution (depthwise: one
    channel per group) has too few rows per group for the GEMM's tiles and runs
    :mod:`.depthwise` or the direct kernel; so does one of at most 4 input and 8 output
    channels, where copying each pixel's patch (c * kh * kw floats) into the GEMM's panels
    costs as much as its few output channels' multiply-adds: natively, the zoo's 3 -> 8
    channel stems (7x7 stride 2 and 3x3 stride 2) took resnet18 at b2h48w40 from 1.35x to
    1.19x onnxruntime's time and yolo from 1.19 to 1.10x; with 16 outputs (the cnn
    benchmark's 3 -> 16, 3x3) the GEMM stayed 5% faster."""
    if group != 1:
        return False
    return not (isinstance(c, int) and isinstance(m, int) and c <= tn.direct_max_in and m <= tn.direct_max_out)


def depthwise_route(tn: Tuning, win: Window, group: int, x_shape: Sequence[Dim], w_shape: Sequence[Dim]) -> bool:
    """Whether a float32 2-D Conv with constant weights runs :mod:`.depthwise`: one output
    channel per input channel (group = C = M), at least ``depthwise_min_channels`` channels
    known at compile time, pads known at compile time."""
    c = x_shape[1]
    return (win.rank == 2 and isinstance(c, int) and c >= tn.depthwise_min_channels and group == c
            and tuple(w_shape[:2]) == (c, 1) and all(isinstance(p, int) for p in win.pads))


def winograd_route(tn: Tuning, win: Window, group: int, c: Dim, m: Dim, y_shape: Sequence[Dim]) -> bool:
    """Whether a float32 2-D Conv with constant weights of ``m`` output and ``c`` input
    channels and output shape ``y_shape`` runs by Winograd's F(2x2, 3x3) (:mod:`.winograd`).

    The 16 products are [m, c] @ [c, tiles]: with few channels a register tile does little
    work per load and store, and the transforms (a few additions per element) weigh more, so
    it takes ``c * m >= winograd_min_tile_products`` register tiles' worth (wasm32's 2 x 16:
    160; AVX-512's 12 x 32: 1920). Measured against the plain GEMM convolution: 16 -> 16
    channels 0.74x under wasmtime and 1.35x natively with AVX-512, 32 -> 64 0.61x and 0.77x.
    An image of fewer 2x2 tiles than a panel has columns would leave the products' panels
    partly empty (AVX-512's 32 columns against a 7 x 7 output's 16 tiles: 1.08x).

    An image whose size is known only at run time takes Winograd on wasm32 only. Natively the
    plain GEMM convolution measured faster at every size tried (the zoo's ResNet-18 with
    symbolic height and width: 0.60x the time at 32 x 32, 0.92x at 224 x 224 and 512 x 512);
    in Node Winograd still paid on large images (1.17x the time without it at 224 x 224,
    0.62x at 32 x 32), so wasm32 keeps it."""
    tile, least = tn.tile, tn.winograd_min_channels
    if not (win.kernel == (3, 3) and win.strides == (1, 1) and win.dilations == (1, 1) and group == 1
            and isinstance(c, int) and isinstance(m, int) and c >= least and m >= least
            and c * m >= tn.winograd_min_tile_products * tile.mr * tile.nr):
        return False
    tiles = D.ceildiv(y_shape[2], 2) * D.ceildiv(y_shape[3], 2)
    if not isinstance(tiles, int):
        return tn.symbolic_winograd
    return tiles >= tile.nr


def transposed_route(tn: Tuning, win: Window, group: int, c: Dim, m: Dim, y_shape: Sequence[Dim]) -> bool:
    """Whether a float32 2-D Conv with constant weights runs as the transposed GEMM of
    :func:`.conv.build_conv2d_t`: one group, static channels, pads and pixels, at most
    :data:`.conv.CONV_T_MAX_PIXELS` pixels, which fill the GEMM's NR-column panels no better
    than the output channels would (7 x 7 = 49 pixels in AVX-512's 32-column panels: 64
    columns computed, 31% of them wasted), counted in multiply-adds with the panels' padding
    (:func:`.conv.conv_t_wins`).

    A larger kernel, or pads, natively only (``transposed_patches``): its patch matrix is
    copied out first (:func:`.conv.conv_t_patches`). Per layer, in paired calls against
    onnxruntime, resnet50's 3 x 3 layers on small images went from 1.23 to 1.10x its time (512
    channels at 7 x 7), 1.64 to 1.26x (512, stride 2, 14 x 14 -> 7 x 7) and 1.33 to 1.18x
    (256, stride 2, 28 -> 14). Under wasmtime they ran within 2% of the GEMM route (6.76
    against 6.67 ms, 11.09 against 11.35), so wasm32 keeps that."""
    if not (group == 1 and isinstance(c, int) and isinstance(m, int)):
        return False
    if C.conv_t_patches(win) and (not tn.transposed_patches or not all(isinstance(p, int) for p in win.pads)):
        return False
    pixels = y_shape[2] * y_shape[3]
    return isinstance(pixels, int) and C.conv_t_wins(pixels, m, tn.tile.nr)


def dual_route(tn: Tuning, win: Window, group: int, c: Dim, m: Dim, y_shape: Sequence[Dim]) -> bool:
    """Whether a float32 2-D Conv with constant weights and an image whose size is known
    only at run time carries both GEMM routes and chooses per call (:func:`.conv.conv_t_wins`
    on the call's pixel count): natively (``dual``), one group, static channels and pads.
    The weights are packed once, as the transposed GEMM's B (:func:`.conv.pack_conv_t`),
    which is also :class:`.gemm.PanelA`'s layout with panels of NR rows: the GEMM of the
    weights as A reads them so, and the module holds one copy.

    The GEMM's NR-column panels wasted most of their work on few pixels: on the zoo's
    ResNet-18 with symbolic height and width at 32 x 32 (stages of 8 x 8 down to 1 x 1
    pixels) a 64 -> 64 channel 3 x 3 layer at 1 x 1 took 3.4x onnxruntime's time, the model
    2.4x. wasm32 keeps the GEMM of the weights as A, as :func:`transposed_route` does for
    kernels larger than 1 x 1."""
    if not tn.dual or not (group == 1 and isinstance(c, int) and isinstance(m, int)):
        return False
    return all(isinstance(p, int) for p in win.pads) and not isinstance(y_shape[2] * y_shape[3], int)


def conv_routes(win: Window, group: int, x_shape: Sequence[Dim], w_shape: Sequence[Dim], y_shape: Sequence[Dim],
                dtype: DType, const_weights: bool) -> list[str]:
    """Every route whose kernel can compute this Conv, whatever it costs: what a test may ask
    for (:func:`plan_conv`'s ``route``) to run a kernel where the policy would not."""
    routes = ["nd"]
    if not (len(x_shape) == 4 and dtype == FLOAT32):
        return routes
    routes.append("direct")
    c, m = w_shape[1], w_shape[0]
    static = isinstance(c, int) and isinstance(m, int)
    static_pads = all(isinstance(p, int) for p in win.pads)
    if group == 1:
        routes.append("gemm")
        if const_weights and static and (win.kernel, win.strides, win.dilations) == ((3, 3), (1, 1), (1, 1)):
            routes.append("winograd")
        if const_weights and static and static_pads and isinstance(y_shape[2] * y_shape[3], int):
            routes.append("transposed")
    if (const_weights and static_pads and isinstance(x_shape[1], int) and group == x_shape[1]
            and tuple(w_shape[:2]) == (x_shape[1], 1)):
        routes.append("depthwise")
    return routes


def conv_policy(tn: Tuning, win: Window, group: int, x_shape: Sequence[Dim], w_shape: Sequence[Dim],
                y_shape: Sequence[Dim], dtype: DType, const_weights: bool) -> str:
    """The route the target's constants pick for this Conv."""
    if not (len(x_shape) == 4 and dtype == FLOAT32):
        return "nd"
    c, m = w_shape[1], w_shape[0]
    if gemm_route(tn, win, group, x_shape[1], m):
        if const_weights and winograd_route(tn, win, group, c, m, y_shape):
            return "winograd"
        if const_weights and transposed_route(tn, win, group, c, m, y_shape):
            return "transposed"
        return "gemm"
    if const_weights and depthwise_route(tn, win, group, x_shape, w_shape):
        return "depthwise"
    return "direct"


def plan_conv(tn: Tuning, win: Window, group: int, x_shape: Sequence[Dim], w_shape: Sequence[Dim],
              y_shape: Sequence[Dim], dtype: DType, const_weights: bool, route: str | None = None) -> Plan:
    """The plan of a Conv (x [N, C, spatial...], w [M, C/group, k...], y): the route
    :func:`conv_policy` picks or, given ``route``, that one (which must be one of
    :func:`conv_routes`)."""
    if route is None:
        route = conv_policy(tn, win, group, x_shape, w_shape, y_shape, dtype, const_weights)
    else:
        check_route(route, conv_routes(win, group, x_shape, w_shape, y_shape, dtype, const_weights))
    tile, c, m = tn.tile, w_shape[1], w_shape[0]
    f32 = FLOAT32
    match route:
        case "nd":
            return Plan("nd")
        case "direct":
            staged = C.conv_scratch(win, x_shape, y_shape)
            return Plan("direct", None, "direct" if const_weights else "",
                        scratch=(Scratch("staged input", f32, staged),) if staged is not None else ())
        case "depthwise":
            lanes = tile.lanes
            return Plan("depthwise", tile, "depthwise", scratch=(
                Scratch("channels-last input", f32, DW.staged_shape(win, x_shape, lanes)),
                Scratch("pixel offsets", INT64, DW.offsets_shape(y_shape, lanes))))
        case "winograd":
            names = ("staged input", "transformed inputs", "transformed products")
            return Plan("winograd", tile, "winograd", scratch=tuple(
                Scratch(what, f32, tuple(shape)) for what, shape in
                zip(names, W.scratch_shapes(x_shape, y_shape, c, m))))
    staged = C.im2col_stage(win, x_shape)
    scratch = [Scratch("staged input", f32, staged)] if staged is not None else []
    dual = route == "gemm" and const_weights and dual_route(tn, win, group, c, m, y_shape)
    if route == "transposed" or dual:
        # the transposed GEMM's scratch; with both routes, for as many pixels as it takes
        pixels = y_shape[2] * y_shape[3]
        if dual:  # (not below 0 either: an image smaller than the window fails its check)
            pixels = D.maximum(D.minimum(pixels, C.CONV_T_MAX_PIXELS), 0)
        if C.conv_t_patches(win):
            scratch.append(Scratch("patches", f32, (c * win.taps, pixels)))
        scratch.append(Scratch("transposed output", f32, (pixels, m)))
    if route == "transposed":
        return Plan("transposed", tile, "conv_t", scratch=tuple(scratch))
    packing = "conv_t" if dual else "panel_a" if const_weights else ""
    return Plan("gemm", tile, packing, dual, tuple(scratch))


# ----------------------------------------------------------------------------- MatMul, Gemm


def plan_matmul(tn: Tuning, dtype: DType, b_shape: Sequence[Dim], b_const: np.ndarray | None,
                rows: Sequence[Dim], relu_input: bool, trans_b: bool = False) -> Plan:
    """The plan of a product A @ B (MatMul, or Gemm with ``trans_b``): plain loops unless
    float32 with a matrix B; then the GEMM reads a constant 2-D B as packed panels
    (:func:`.gemm.pack_b`) or as rows (:func:`.gemm.sparse_row`, which skips the rows of B
    that a lone row of A's zeros would multiply), and packs any other inside the kernel.

    Rows when A is a Relu's output (``relu_input``; at batch 1, a ReLU MLP's hidden layers:
    about half zeros), its ``rows`` (the dims making M) may multiply to 1, B has at least a
    chunk of columns (``sparse_min_vectors`` vectors) and only finite elements (a skipped
    0 * inf would have been a NaN). With more rows than one, the GEMM reads such a B in place
    natively (when N is a multiple of its panels' width) and otherwise packs it a block at a
    time, as a run-time B. A transposed B (Gemm's trans_b, when B is not constant: a
    constant one is transposed at compile time) is packed inside the kernel."""
    if dtype != FLOAT32 or len(b_shape) < 2:
        return Plan("loops")
    tile = tn.tile
    if trans_b or b_const is None or len(b_shape) != 2:
        return Plan("gemm", tile)
    if not relu_input or (all(isinstance(d, int) for d in rows) and prod(rows) != 1):
        return Plan("gemm", tile, "panels")
    if b_shape[1] < tn.sparse_min_vectors * tile.lanes or not np.isfinite(b_const).all():
        return Plan("gemm", tile, "panels")
    return Plan("gemm", tile, "rows", scratch=(Scratch("nonzero rows", INT32, (b_shape[0],)),))


# ----------------------------------------------------------------------------- Resize


def rows_route(mode: str, coord: str, antialias: bool, axes: Sequence[tuple[int, float | None]], rank: int) -> bool:
    """Whether a Resize interpolates each output row's input rows once (a float64 scratch row
    of the input's width) and then each output along the row from it: linear or cubic, not
    antialiased nor tf_crop_and_resize, resizing exactly the last two axes in that order by
    scales known at compile time and not 1. ``axes``: the resized axes, each (axis, its scale
    if known at compile time). The sums are the same operations in the same order as element
    by element (each output's sum over the rows, for each of its columns' taps, is one
    element of the scratch row), so the same values; the row's sums are made once per input
    column instead of once per output tap. A 2x bilinear upsampling of 16 channels, 24 x 20 ->
    48 x 40, took 5.5x onnxruntime's time natively element by element."""
    return (mode in ("linear", "cubic") and not antialias and coord != "tf_crop_and_resize" and rank >= 2
            and [a for a, _ in axes] == [rank - 2, rank - 1] and all(s not in (None, 1.0) for _, s in axes))


def plan_resize(mode: str, coord: str, antialias: bool, axes: Sequence[tuple[int, float | None]],
                x_shape: Sequence[Dim]) -> Plan:
    """The plan of a Resize of an input of ``x_shape`` (see :func:`rows_route`)."""
    if rows_route(mode, coord, antialias, axes, len(x_shape)):
        return Plan("rows", scratch=(Scratch("interpolated row", FLOAT64, (x_shape[-1],)),))
    return Plan("elements")


# ----------------------------------------------------------------------------- pooling


def pool_routes(kind: str, win: Window, indices: bool, x_shape: Sequence[Dim], y_shape: Sequence[Dim],
                ceil_mode: bool) -> list[str]:
    """Every route whose kernel can run this pool."""
    if indices:
        return ["indices"]
    return ["padded"] + (["clamped"] if CP.clamp_fits(kind, win, x_shape, y_shape, ceil_mode) else [])


def plan_pool(tn: Tuning, kind: str, win: Window, indices: bool, x_shape: Sequence[Dim], y_shape: Sequence[Dim],
              dtype: DType, ceil_mode: bool, route: str | None = None) -> Plan:
    """The plan of a pool: clamped taps where the kernel can (``clamped_pool``: natively),
    else the window loop over a padded copy when the window needs one.

    resnet50's 3 x 3 stride-2 max pool of 64 x 112 x 112 with pads of 1 took 0.61x the time
    with clamped taps natively (0.87 -> 0.54 ms, onnxruntime 0.53, paired calls) but 1.08x
    under wasmtime, where the copy is cheaper than the vectorized loop's clamping and split,
    so wasm32 keeps the padded copy."""
    routes = pool_routes(kind, win, indices, x_shape, y_shape, ceil_mode)
    check_route(route, routes)
    if route is None:
        route = "clamped" if tn.clamped_pool and "clamped" in routes else routes[0]
    if route == "padded":
        staged = CP.pool_scratch(x_shape, y_shape, win, ceil_mode)
        return Plan("padded", scratch=(Scratch("padded input", dtype, tuple(staged)),) if staged is not None else ())
    return Plan(route)
