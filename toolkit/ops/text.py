"""String ops: Equal over strings, StringConcat, StringSplit, StringNormalizer,
RegexFullMatch; and ImageDecoder. Their kernels are written in C (wasm_runtime/clib/sw_lib.h,
called through :mod:`toolkit.codegen.clib`).

A string tensor's elements are {address, length} of UTF-8 bytes (dtype ``string``, see
toolkit/abi.py). Ops that only move elements (views, Transpose, Gather, Concat...) carry them
like any other element. An op that makes new text (StringConcat, a case change) first asks
its ``_size`` kernel how many bytes it needs, then writes them into a *pool*: a buffer that
lives until the run ends (``Lowerer.pool``), since any later tensor's elements may point
into it. StringSplit's parts point into their input's bytes.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..codegen.clib import CCall, build_ccall, reason_message
from ..ir import dims as D
from ..ir.dtypes import BOOL, INT64, STRING, UINT8
from .base import CoreOp, InferContext


def _strings(ctx: InferContext, *indices: int) -> None:
    for i in indices:
        ctx.check_dtype(ctx.input(i), (STRING,))


@dataclass(frozen=True)
class StringEqual(CoreOp):
    """Equal over two string tensors (numpy broadcasting): bytewise equality."""

    def infer(self, ctx: InferContext) -> None:
        _strings(ctx, 0, 1)
        ctx.set_output(0, BOOL, ctx.broadcast([ctx.input(0), ctx.input(1)]))

    def lower(self, lw, node) -> None:
        lw.call(build_ccall, CCall("sw_text_equal"), [lw.tensor(i) for i in node.inputs] + [lw.alloc(node.outputs[0])])


@dataclass(frozen=True)
class StringConcat(CoreOp):
    """Elementwise concatenation (numpy broadcasting)."""

    def infer(self, ctx: InferContext) -> None:
        _strings(ctx, 0, 1)
        ctx.set_output(0, STRING, ctx.broadcast([ctx.input(0), ctx.input(1)]))
        ctx.info = ctx.fresh("concat_bytes")

    def lower(self, lw, node) -> None:
        a, b = (lw.tensor(i) for i in node.inputs)
        total = lw.result_slot(str(node.info))
        lw.call(build_ccall, CCall("sw_text_concat_size"), [a, b], [total], outputs=0)
        lw.define(node.info, total)
        pool = lw.pool("concatenated text", node.info)
        lw.call(build_ccall, CCall("sw_text_concat"), [a, b, pool, lw.alloc(node.outputs[0])], outputs=2)


@dataclass(frozen=True)
class StringSplit(CoreOp):
    """Each element split at ``delimiter`` (None: runs of whitespace) at most ``maxsplit``
    times (None: no limit): Y = x.shape + [the most parts of any element], padded with "",
    Z = each element's part count."""

    delimiter: str | None = None
    maxsplit: int | None = None

    def call(self, fn: str) -> CCall:
        delim = (self.delimiter or "").encode()
        return CCall(fn, (int(bool(self.delimiter)), -1 if self.maxsplit is None else self.maxsplit, len(delim)), delim)

    def infer(self, ctx: InferContext) -> None:
        _strings(ctx, 0)
        x = ctx.input(0)
        ctx.set_output(0, STRING, tuple(x.shape) + (ctx.fresh("parts"),))
        ctx.set_output(1, INT64, tuple(x.shape))

    def lower(self, lw, node) -> None:
        x = lw.tensor(node.inputs[0])
        y = lw.value(node.outputs[0])
        count = lw.result_slot(str(y.shape[-1]))
        lw.call(build_ccall, self.call("sw_text_split_count"), [x], [count], outputs=0)
        lw.define(y.shape[-1], count)
        lw.call(build_ccall, self.call("sw_text_split"), [x, lw.alloc(node.outputs[0]), lw.alloc(node.outputs[1])],
                outputs=2)


CASE_CHANGES = ("NONE", "LOWER", "UPPER")


@dataclass(frozen=True)
class StringNormalizer(CoreOp):
    """Drops the elements equal to one of ``stopwords`` (unless ``case_sensitive``, both sides
    compared after the same case change: upper for UPPER, lower otherwise), then changes
    case. x is [C] or [1, C]; the output keeps the rank, with the kept count (or one empty
    string when none is kept). Case mapping is Python's full str.lower/str.upper (ß -> SS,
    final sigma), the same in every locale: ``locale`` is not used. This is the spec and
    onnxruntime; onnx.reference also strips accents and drops empty strings, which neither
    says."""

    case_change: str = "NONE"
    case_sensitive: bool = False
    stopwords: tuple[str, ...] = ()

    def call(self, fn: str) -> CCall:
        words = [w.encode() for w in self.stopwords]
        return CCall(fn, (CASE_CHANGES.index(self.case_change), int(self.case_sensitive), len(words),
                          *(len(w) for w in words)), b"".join(words))

    def infer(self, ctx: InferContext) -> None:
        _strings(ctx, 0)
        x = ctx.input(0)
        if self.case_change not in CASE_CHANGES:
            ctx.fail(f"case_change_action '{self.case_change}' is not one of {', '.join(CASE_CHANGES)}")
        if x.rank == 1:
            shape = (ctx.fresh("kept"),)
        elif x.rank == 2:
            ctx.require_eq(x.shape[0], 1, f"input '{x.name}' must be [C] or [1, C]: its dim 0")
            shape = (1, ctx.fresh("kept"))
        else:
            ctx.fail(f"input '{x.name}' has shape {D.fmt_shape(x.shape)}; StringNormalizer takes [C] or [1, C]")
        ctx.set_output(0, STRING, shape)
        ctx.info = ctx.fresh("normalized_bytes")

    def lower(self, lw, node) -> None:
        x = lw.tensor(node.inputs[0])
        y = lw.value(node.outputs[0])
        count, nbytes = lw.result_slot(str(y.shape[-1])), lw.result_slot(str(node.info))
        lw.call(build_ccall, self.call("sw_text_normalize_size"), [x], [count, nbytes], outputs=0)
        lw.define(y.shape[-1], count)
        lw.define(node.info, nbytes)
        pool = lw.pool("normalized text", node.info)
        lw.call(build_ccall, self.call("sw_text_normalize"), [x, pool, lw.alloc(node.outputs[0])], outputs=2)


@dataclass(frozen=True)
class RegexFullMatch(CoreOp):
    """Whether each element matches ``pattern`` entirely; ``program`` is the pattern compiled
    by toolkit.regex (the translation compiles it, so a bad pattern fails there)."""

    pattern: str
    program: tuple[int, ...]

    def infer(self, ctx: InferContext) -> None:
        _strings(ctx, 0)
        ctx.set_output(0, BOOL, ctx.input(0).shape)

    def lower(self, lw, node) -> None:
        lw.call(build_ccall, CCall("sw_regex_full_match", self.program),
                [lw.tensor(node.inputs[0]), lw.alloc(node.outputs[0])])


PIXEL_FORMATS = ("RGB", "BGR", "Grayscale")


@dataclass(frozen=True)
class ImageDecoder(CoreOp):
    """Decodes one encoded image (uint8 bytes) to [height, width, 3] (RGB or BGR) or
    [height, width, 1] (Grayscale), as Pillow does: BMP, PNM, TIFF (uncompressed), PNG and
    JPEG; WebP and JPEG 2000 are recognized and refused at run time."""

    pixel_format: str = "RGB"

    def infer(self, ctx: InferContext) -> None:
        x = ctx.input(0)
        ctx.check_dtype(x, (UINT8,))
        if x.rank != 1:
            ctx.fail(f"input '{x.name}' has rank {x.rank}; ImageDecoder takes the encoded bytes as one dim")
        if self.pixel_format not in PIXEL_FORMATS:
            ctx.fail(f"pixel_format '{self.pixel_format}' is not one of {', '.join(PIXEL_FORMATS)}")
        ctx.set_output(0, UINT8, (ctx.fresh("height"), ctx.fresh("width"), 1 if self.pixel_format == "Grayscale" else 3))
        ctx.info = ctx.fresh("decoder_scratch")

    def lower(self, lw, node) -> None:
        x = lw.tensor(node.inputs[0])
        y = lw.value(node.outputs[0])
        call = (PIXEL_FORMATS.index(self.pixel_format),)
        h, w, scratch = (lw.result_slot(str(d)) for d in (y.shape[0], y.shape[1], node.info))
        why = f"cannot decode input '{node.inputs[0]}': {reason_message('image')}"
        lw.call(build_ccall, CCall("sw_image_probe", call), [x], [h, w, scratch], error=why, outputs=0)
        lw.define(y.shape[0], h)
        lw.define(y.shape[1], w)
        lw.define(node.info, scratch)
        buf = lw.scratch("decoder's working memory", UINT8, (node.info,))
        lw.call(build_ccall, CCall("sw_image_decode", call), [x, buf, lw.alloc(node.outputs[0])], error=why, outputs=2)
