"""ONNX string ops and ImageDecoder -> toolkit.ops.text.

StringNormalizer's ``locale`` is read and not used: case mapping is Unicode's (the same in
every locale but Turkish and Lithuanian). RegexFullMatch's pattern is compiled here
(toolkit.regex), so an invalid or unsupported pattern fails at compile time naming
the node. Equal over strings is translated by the elementwise family, which hands string
inputs to :func:`string_equal`.
"""
from __future__ import annotations

from ....ops.text import ImageDecoder, RegexFullMatch, StringConcat, StringEqual, StringNormalizer, StringSplit
from ....regex import RegexError, compile_pattern
from ..translate import TranslateContext


def string_equal(ctx: TranslateContext) -> None:
    ctx.emit(StringEqual())


def string_concat(ctx: TranslateContext) -> None:
    ctx.emit(StringConcat())


def string_split(ctx: TranslateContext) -> None:
    maxsplit = ctx.attr("maxsplit")
    if maxsplit is not None and int(maxsplit) < 0:
        ctx.fail(f"maxsplit is {maxsplit}; it must be non-negative")
    ctx.emit(StringSplit(ctx.attr("delimiter") or None, None if maxsplit is None else int(maxsplit)))


def string_normalizer(ctx: TranslateContext) -> None:
    ctx.emit(StringNormalizer(str(ctx.attr("case_change_action", "NONE")), bool(ctx.attr("is_case_sensitive", 0)),
                              tuple(ctx.attr("stopwords") or ())))


def regex_full_match(ctx: TranslateContext) -> None:
    pattern = ctx.attr("pattern")
    if pattern is None:
        ctx.fail("the pattern attribute is required")
    try:
        program = compile_pattern(pattern)
    except RegexError as e:
        ctx.fail(f"pattern {pattern!r}: {e}")
    ctx.emit(RegexFullMatch(pattern, tuple(program)))


def image_decoder(ctx: TranslateContext) -> None:
    ctx.emit(ImageDecoder(str(ctx.attr("pixel_format", "RGB"))))


def register(r) -> None:
    r.add("StringConcat", (20,), string_concat)
    r.add("StringSplit", (20,), string_split)
    r.add("StringNormalizer", (10,), string_normalizer)
    r.add("RegexFullMatch", (20,), regex_full_match)
    r.add("ImageDecoder", (20,), image_decoder)
