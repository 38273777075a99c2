"""ONNX signal and vision ops -> DFT, STFT, TensorScatter, RoiAlign, MaxRoiPool, AffineGrid,
TfIdfVectorizer, MelWeightMatrix (toolkit.ops.signal).

Versions: DFT-17 takes its axis as an attribute (default 1), DFT-20 as an optional input
(default -2); an axis known only at run time makes the output's signal dims fresh
symbols. RoiAlign-16 adds ``coordinate_transformation_mode`` (default half_pixel);
RoiAlign-10 has what 16 calls output_half_pixel. RoiAlign-22 and MaxRoiPool-22 add only
bfloat16, which symwasm does not carry. TfIdfVectorizer takes integer inputs only (its
pool becomes a sorted table of n-grams, a constant, searched by the kernel). The window ops (HannWindow, HammingWindow,
BlackmanWindow) and CenterCropPad are not here: the importer expands them into their ONNX
functions.
"""
from __future__ import annotations

import numpy as np

from ....ops.signal import DFT, STFT, AffineGrid, MaxRoiPool, MelWeightMatrix, RoiAlign, TensorScatter, TfIdf
from ..translate import TranslateContext


def dft(ctx: TranslateContext) -> None:
    inputs = ctx.inputs[:2]
    if ctx.version < 20:
        axis = int(ctx.attr("axis", 1))
    elif not ctx.has(2):
        axis = -2
    else:
        known = ctx.value(2).int_contents()
        if known is not None and len(known) == 1 and isinstance(known[0], int):
            axis = known[0]
        else:  # read at run time
            axis = None
            inputs = (inputs + [""])[:2] + [ctx.inputs[2]]
    ctx.emit(DFT(axis, bool(ctx.attr("inverse", 0)), bool(ctx.attr("onesided", 0))), inputs)


def stft(ctx: TranslateContext) -> None:
    ctx.emit(STFT(bool(ctx.attr("onesided", 1))))


def tensor_scatter(ctx: TranslateContext) -> None:
    mode = ctx.attr("mode", "linear")
    if mode not in ("linear", "circular"):
        ctx.fail(f"mode '{mode}' is not one of linear, circular")
    ctx.emit(TensorScatter(int(ctx.attr("axis", -2)), mode == "circular"))


def roi_align(ctx: TranslateContext) -> None:
    if ctx.version >= 16:
        ctm = ctx.attr("coordinate_transformation_mode", "half_pixel")
        if ctm not in ("half_pixel", "output_half_pixel"):
            ctx.fail(f"coordinate_transformation_mode '{ctm}' is not one of half_pixel, output_half_pixel")
    else:
        ctm = "output_half_pixel"
    ctx.emit(RoiAlign(ctx.attr("mode", "avg"), int(ctx.attr("output_height", 1)), int(ctx.attr("output_width", 1)),
                      int(ctx.attr("sampling_ratio", 0)), float(ctx.attr("spatial_scale", 1.0)),
                      ctm == "half_pixel"))


def max_roi_pool(ctx: TranslateContext) -> None:
    shape = ctx.ints("pooled_shape")
    if shape is None:
        ctx.fail("attribute 'pooled_shape' is required")
    ctx.emit(MaxRoiPool(shape, float(ctx.attr("spatial_scale", 1.0))))


def affine_grid(ctx: TranslateContext) -> None:
    ctx.emit(AffineGrid(bool(ctx.attr("align_corners", 0))))


def _gram_table(ctx: TranslateContext, pool: tuple[int, ...], lo: int, hi: int) -> dict[tuple[int, ...], int]:
    """gram -> its number in the pool (from 0), for the grams of ``lo`` .. ``hi`` items. A
    gram listed twice keeps its last number (as onnx.reference and onnxruntime)."""
    counts = ctx.ints("ngram_counts")
    grams: dict[tuple[int, ...], int] = {}
    number = 0
    for size, start in enumerate(counts, 1):
        end = counts[size] if size < len(counts) else len(pool)
        if end < start or end > len(pool):
            ctx.fail(f"ngram_counts {list(counts)} do not fit a pool of {len(pool)} items")
        for first in range(start, end - size + 1, size):
            if lo <= size <= hi:
                grams[pool[first:first + size]] = number
            number += 1
    return grams


def tfidf(ctx: TranslateContext) -> None:
    if ctx.attr("pool_strings") is not None:
        ctx.fail("pool_strings: string tensors are not supported (only pool_int64s)")
    pool = ctx.ints("pool_int64s", ())
    lo, hi = int(ctx.attr("min_gram_length", 1)), int(ctx.attr("max_gram_length", 1))
    skip = int(ctx.attr("max_skip_count", 0))
    if not 1 <= lo <= hi or skip < 0:
        ctx.fail(f"min_gram_length {lo}, max_gram_length {hi} and max_skip_count {skip} must satisfy "
                 f"1 <= min <= max and skip >= 0")
    if ctx.ints("ngram_counts") is None or ctx.ints("ngram_indexes") is None:
        ctx.fail("attributes 'ngram_counts' and 'ngram_indexes' are required")
    indexes = ctx.ints("ngram_indexes")
    size = max(indexes, default=-1) + 1
    grams = _gram_table(ctx, pool, lo, hi)
    if any(n >= len(indexes) for n in grams.values()):
        ctx.fail(f"ngram_indexes has {len(indexes)} entries, fewer than the pool's n-grams")
    weights = ctx.attr("weights")
    if weights is not None and len(weights) < size:
        ctx.fail(f"weights has {len(weights)} entries; the output has {size} columns")
    rows = sorted((len(g),) + g + (0,) * (hi - len(g)) for g in grams)
    table = np.array(rows, np.int64).reshape(len(rows), hi + 1)
    columns = np.array([indexes[grams[row[1:1 + row[0]]]] for row in rows], np.int64)
    w = np.asarray(weights if weights is not None else np.ones(size), np.float32)[:size]
    ctx.emit(TfIdf(ctx.attr("mode", "TF"), lo, skip, size),
             [ctx.inputs[0], ctx.constant("ngrams", table), ctx.constant("columns", columns),
              ctx.constant("weights", w)])


def mel_weight_matrix(ctx: TranslateContext) -> None:
    ctx.emit(MelWeightMatrix(ctx.dtype(int(ctx.attr("output_datatype", 1)), "output_datatype")))


def register(r) -> None:
    r.add("DFT", (17, 20), dft)
    r.add("STFT", (17,), stft)
    r.add("TensorScatter", (24,), tensor_scatter)
    r.add("RoiAlign", (10, 16, 22), roi_align)
    r.add("MaxRoiPool", (1, 22), max_roi_pool)
    r.add("AffineGrid", (20,), affine_grid)
    r.add("TfIdfVectorizer", (9,), tfidf)
    r.add("MelWeightMatrix", (17,), mel_weight_matrix)
