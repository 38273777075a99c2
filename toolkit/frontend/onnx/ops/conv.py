"""Convolution, pooling and the CNN odds and ends: Conv, MaxPool, AveragePool,
GlobalAveragePool, BatchNormalization (inference), Dropout (inference) and Sum.

Conv and the pools are 2-D (NCHW). Output sizes are dim expressions, so batch and spatial
dims may be symbolic: ``(h + pads - dilation * (k - 1) - 1) // stride + 1``. With
``auto_pad`` SAME and a stride above 1 the pads themselves depend on the input size; they
are then symbolic too and reach the kernels as run-time scalars.
"""
from __future__ import annotations

from collections.abc import Sequence

from ....codegen import conv as C
from ....codegen import elementwise as E
from ....codegen import reduce as R
from ....codegen.movement import build_fill
from ....ir import dims as D
from ....ir.dims import Dim
from ....ir.graph import BOOL, FLOAT32, Value
from ..infer import InferContext, check_dtype
from .elementwise import lower_with
from .shape import lower_view

AUTO_PADS = ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")


def _float32_inputs(ctx: InferContext) -> None:
    for v in ctx.inputs():
        check_dtype(ctx, v, (FLOAT32,))


def _require_2d(ctx: InferContext, x: Value) -> None:
    if x.rank != 4:
        ctx.fail(f"input '{x.name}' has shape {D.fmt_shape(x.shape)}; only 2-D {ctx.node.op} "
                 f"(rank 4, NCHW) is supported")


def _pair(attrs: dict, name: str) -> tuple[int, int]:
    v = attrs.get(name) or [1, 1]
    if len(v) != 2 or min(v) < 1:
        raise ValueError(f"attribute {name}={list(v)} must be two positive integers")
    return int(v[0]), int(v[1])


def window(attrs: dict, x_shape: Sequence[Dim], kernel: tuple[int, int],
           ceil_mode: bool = False) -> tuple[C.Window, tuple[Dim, Dim]]:
    """The window geometry and output (height, width) of a 2-D Conv or pool; ValueError
    with the reason for bad attributes."""
    strides, dilations = _pair(attrs, "strides"), _pair(attrs, "dilations")
    auto_pad = attrs.get("auto_pad", "NOTSET") or "NOTSET"
    if auto_pad not in AUTO_PADS:
        raise ValueError(f"auto_pad '{auto_pad}' is not one of {', '.join(AUTO_PADS)}")
    explicit = list(attrs.get("pads") or [0, 0, 0, 0])
    if auto_pad == "NOTSET" and (len(explicit) != 4 or min(explicit) < 0):
        raise ValueError(f"pads={explicit} must be four non-negative integers")
    begin: list[Dim] = [0, 0]
    end: list[Dim] = [0, 0]
    out: list[Dim] = [0, 0]
    for a in (0, 1):
        size, s = x_shape[2 + a], strides[a]
        ext = dilations[a] * (kernel[a] - 1) + 1
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            out[a] = D.ceildiv(size, s)
            total = D.maximum(0, (out[a] - 1) * s + ext - size)
            half = D.floordiv(total, 2)
            begin[a], end[a] = (half, total - half) if auto_pad == "SAME_UPPER" else (total - half, half)
        elif auto_pad == "VALID":
            out[a] = D.floordiv(size - ext, s) + 1
        else:
            begin[a], end[a] = int(explicit[a]), int(explicit[a + 2])
            span = size + begin[a] + end[a] - ext
            if ceil_mode:
                # the last window must start inside the input or its leading pad
                out[a] = D.minimum(D.ceildiv(span, s) + 1, D.ceildiv(size + begin[a], s))
            else:
                out[a] = D.floordiv(span, s) + 1
        if isinstance(out[a], int) and out[a] < 0:
            raise ValueError(f"the {'height' if a == 0 else 'width'} {size} is too small for a window "
                             f"of {ext} with pads {begin[a]}+{end[a]} (output size {out[a]})")
    win = C.Window((int(kernel[0]), int(kernel[1])), strides, dilations, (begin[0], begin[1], end[0], end[1]))
    return win, (out[0], out[1])


def _window_or_fail(ctx: InferContext, x: Value, kernel: tuple[int, int], ceil_mode: bool = False):
    try:
        return window(ctx.attrs, x.shape, kernel, ceil_mode)
    except ValueError as e:
        ctx.fail(str(e))


def _check_output_size(lw, x: Value, y: Value, win: C.Window) -> None:
    """A symbolic output height or width is negative when the input is smaller than the
    window: say so instead of failing to allocate."""
    for a, what in ((0, "height"), (1, "width")):
        out = y.shape[2 + a]
        if not isinstance(out, int):
            lw.emit("CHECK_LE", lw.const_slot(0), lw.slot(out), lw.string(
                f"{lw.context()}: input {what} {x.shape[2 + a]} is too small for a window of "
                f"{win.extent(a)} with pads {win.pads[a]} + {win.pads[a + 2]} (output {what} {out} = {{1}})"))


def _call_with_scratch(lw, kernel: int, x: Value, inputs: list[int], scratch: Sequence[Dim] | None,
                       out: str, win: C.Window) -> None:
    _check_output_size(lw, x, lw.value(out), win)
    tmp = [lw.scratch("staged input", FLOAT32, scratch)] if scratch is not None else []
    lw.call(kernel, inputs + tmp + [lw.alloc(out)], [lw.slot(d) for d in C.symbolic(win.pads)])
    for reg in tmp:
        lw.free(reg)


# ----------------------------------------------------------------------------- Conv


def _kernel_of(ctx: InferContext, w: Value) -> tuple[int, int]:
    kernel = w.shape[2:]
    if not all(isinstance(k, int) for k in kernel):
        ctx.fail(f"weight '{w.name}' has kernel dims {D.fmt_shape(kernel)}; they must be known "
                 f"at compile time")
    given = ctx.attr("kernel_shape")
    if given is not None and [int(k) for k in given] != list(kernel):
        ctx.fail(f"kernel_shape={list(given)} does not match weight '{w.name}' "
                 f"{D.fmt_shape(w.shape)}")
    return int(kernel[0]), int(kernel[1])


def infer_conv(ctx: InferContext) -> None:
    x, w, bias = ctx.input(0), ctx.input(1), ctx.optional(2)
    _float32_inputs(ctx)
    _require_2d(ctx, x)
    if w.rank != 4:
        ctx.fail(f"weight '{w.name}' has shape {D.fmt_shape(w.shape)}, expected rank 4 (M, C/group, kH, kW)")
    kernel = _kernel_of(ctx, w)
    group = int(ctx.attr("group", 1))
    if group < 1:
        ctx.fail(f"group={group} must be positive")
    m = w.shape[0]
    ctx.require_eq(x.shape[1], D.mul(w.shape[1], group),
                   f"input '{x.name}' channels vs weight '{w.name}' dim 1 times group {group}")
    if group > 1:
        if isinstance(m, int) and m % group:
            ctx.fail(f"weight '{w.name}' has {m} output channels, not a multiple of group {group}")
        ctx.require_eq(D.mod(m, group), 0, f"weight '{w.name}' output channels modulo group {group}")
    if bias is not None:
        if bias.rank != 1:
            ctx.fail(f"bias '{bias.name}' has shape {D.fmt_shape(bias.shape)}, expected ({m},)")
        ctx.require_eq(bias.shape[0], m, f"bias '{bias.name}' length vs weight '{w.name}' output channels")
    _, (oh, ow) = _window_or_fail(ctx, x, kernel)
    ctx.set_output(0, FLOAT32, (x.shape[0], m, oh, ow))


def lower_conv(lw, node) -> None:
    x, w = lw.value(node.inputs[0]), lw.value(node.inputs[1])
    bias = lw.value(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
    y = lw.value(node.outputs[0])
    group = int(node.attrs.get("group", 1))
    win, _ = window(node.attrs, x.shape, (int(w.shape[2]), int(w.shape[3])))
    scratch = C.conv_scratch(win, x.shape, y.shape)
    packed = w.const is not None  # reordered now: the kernel loads a vector of weights per tap
    weight = lw.constant(f"{w.name}.packed_g{group}", C.pack_weights(w.const, group)) if packed else w.name
    tile = f"f32_oc{C.OC_BLOCK}x{C.TILE_VECS * C.vector_lanes(lw.module)}"
    key = ("conv2d", tile, x.shape, w.shape, packed, bias is not None, y.shape, win, group)
    k = lw.kernel(key, lambda kb: C.build_conv2d(kb, win, group, x.shape, w.shape, packed, bias is not None,
                                                  y.shape))
    ins = [lw.tensor(x.name), lw.tensor(weight)] + ([lw.tensor(bias.name)] if bias is not None else [])
    _call_with_scratch(lw, k, x, ins, scratch, y.name, win)


# ----------------------------------------------------------------------------- pooling


def infer_pool(ctx: InferContext) -> None:
    x = ctx.input(0)
    _float32_inputs(ctx)
    _require_2d(ctx, x)
    if len(ctx.node.outputs) > 1 and ctx.node.outputs[1]:
        ctx.fail(f"the Indices output '{ctx.node.outputs[1]}' is not supported (only the pooled values)")
    kernel = ctx.attr("kernel_shape")
    if kernel is None or len(kernel) != 2 or min(kernel) < 1:
        ctx.fail(f"kernel_shape={kernel} must be two positive integers")
    win, (oh, ow) = _window_or_fail(ctx, x, (int(kernel[0]), int(kernel[1])), bool(ctx.attr("ceil_mode", 0)))
    for a, pad in enumerate(win.pads):
        if isinstance(pad, int) and pad >= win.extent(a % 2):
            ctx.fail(f"pads={list(win.pads)}: a pad must be smaller than the window "
                     f"({win.extent(a % 2)} {'rows' if a % 2 == 0 else 'columns'})")
    ctx.set_output(0, FLOAT32, (x.shape[0], x.shape[1], oh, ow))


def _pool_scratch(x: Value, y: Value, win: C.Window, ceil_mode: bool) -> tuple[Dim, ...] | None:
    """The padded input shape a pool reads, or None when every window lies inside x."""
    n, c, h, w = x.shape
    dims = []
    for a, size in ((0, h), (1, w)):
        padded = size + win.pads[a] + win.pads[a + 2]
        if ceil_mode:  # the last window may hang over the end pad
            padded = D.maximum(padded, (y.shape[2 + a] - 1) * win.strides[a] + win.extent(a))
        dims.append(padded)
    if dims[0] == h and dims[1] == w:
        return None
    return (n, c, dims[0], dims[1])


def lower_pool(lw, node) -> None:
    x, y = lw.value(node.inputs[0]), lw.value(node.outputs[0])
    kind = "max" if node.op == "MaxPool" else "avg"
    ceil_mode = bool(node.attrs.get("ceil_mode", 0))
    kernel = node.attrs["kernel_shape"]
    win, _ = window(node.attrs, x.shape, (int(kernel[0]), int(kernel[1])), ceil_mode)
    include_pad = kind == "avg" and bool(node.attrs.get("count_include_pad", 0))
    scratch = _pool_scratch(x, y, win, ceil_mode)
    key = ("pool2d", f"f32_{kind}", x.shape, y.shape, win, include_pad, scratch)
    k = lw.kernel(key, lambda kb: C.build_pool2d(kb, kind, win, include_pad, x.shape, y.shape, scratch))
    _call_with_scratch(lw, k, x, [lw.tensor(x.name)], scratch, y.name, win)


def infer_global_average(ctx: InferContext) -> None:
    x = ctx.input(0)
    _float32_inputs(ctx)
    if x.rank < 3:
        ctx.fail(f"input '{x.name}' has shape {D.fmt_shape(x.shape)}; expected (N, C, spatial...)")
    ctx.set_output(0, FLOAT32, tuple(x.shape[:2]) + (1,) * (x.rank - 2))


def lower_global_average(lw, node) -> None:
    x, y = lw.value(node.inputs[0]), lw.value(node.outputs[0])
    axes = tuple(range(2, x.rank))  # [N, C, 1, 1] has the layout of [N, C]: a mean reduction
    lw.run_kernel(("reduce_mean", "f32", x.shape, axes, y.shape),
                  lambda kb: R.build_reduce(kb, "sum", FLOAT32, x.shape, axes, y.shape, mean=True),
                  [x.name], [y.name])


# ----------------------------------------------------------------------------- BatchNormalization


def infer_batch_norm(ctx: InferContext) -> None:
    x = ctx.input(0)
    _float32_inputs(ctx)
    if x.rank < 2:
        ctx.fail(f"input '{x.name}' has shape {D.fmt_shape(x.shape)}; expected (N, C, ...)")
    if int(ctx.attr("training_mode", 0)):
        ctx.fail("training_mode=1 is not supported (inference only)")
    extra = [o for o in ctx.node.outputs[1:] if o]
    if extra:
        ctx.fail(f"outputs {', '.join(repr(o) for o in extra)} exist only in training mode; "
                 f"inference computes Y alone")
    for i, what in ((1, "scale"), (2, "bias"), (3, "mean"), (4, "var")):
        v = ctx.input(i)
        if v.rank != 1:
            ctx.fail(f"{what} '{v.name}' has shape {D.fmt_shape(v.shape)}, expected ({x.shape[1]},)")
        ctx.require_eq(v.shape[0], x.shape[1], f"{what} '{v.name}' length vs input '{x.name}' channels")
    ctx.set_output(0, FLOAT32, x.shape)


def lower_batch_norm(lw, node) -> None:
    x, scale, y = lw.value(node.inputs[0]), lw.value(node.inputs[1]), lw.value(node.outputs[0])
    eps = float(node.attrs.get("epsilon", 1e-5))
    lw.run_kernel(("batch_norm", "f32", x.shape, scale.shape, eps),
                  lambda kb: C.build_batch_norm(kb, x.shape, scale.shape, eps), node.inputs[:5], [y.name])


# ----------------------------------------------------------------------------- Dropout, Sum


def infer_dropout(ctx: InferContext) -> None:
    x = ctx.input(0)
    mode = ctx.optional(2)
    if mode is not None:
        vals = mode.int_contents()
        if vals is None:
            ctx.fail(f"training_mode '{mode.name}' must be a constant (symwasm compiles inference)")
        if any(vals):
            ctx.fail(f"training_mode '{mode.name}' is true; only inference (an identity) is supported")
    ctx.set_output(0, x.dtype, x.shape, sym=x.sym, const=x.const)
    ctx.set_output(1, BOOL, x.shape)


def lower_dropout(lw, node) -> None:
    lower_view(lw, node)
    if len(node.outputs) > 1 and node.outputs[1]:
        mask = lw.value(node.outputs[1])
        lw.run_kernel(("dropout_mask", "bool", mask.shape),
                      lambda kb: build_fill(kb, BOOL, mask.shape, True), [], [mask.name])


def infer_sum(ctx: InferContext) -> None:
    if ctx.n_inputs < 1:
        ctx.fail("needs at least one input")
    _float32_inputs(ctx)
    ctx.set_output(0, FLOAT32, ctx.broadcast(ctx.inputs()))


def register(r) -> None:
    r.add("Conv", 13, infer_conv, lower_conv)
    r.add("MaxPool", 13, infer_pool, lower_pool)
    r.add("AveragePool", 13, infer_pool, lower_pool)
    r.add("GlobalAveragePool", 13, infer_global_average, lower_global_average)
    r.add("BatchNormalization", 13, infer_batch_norm, lower_batch_norm)
    r.add("Dropout", 13, infer_dropout, lower_dropout)
    r.add("Sum", 13, infer_sum, lower_with(lambda node, ins, out: E.binary("Add", FLOAT32)))
