"""The classical machine-learning ops of domain ai.onnx.ml (what skl2onnx and onnxmltools
write for scikit-learn's linear models, scalers and encoders) -> core ops.

Each translation reads its attributes once into numpy constants and emits existing core ops
(Gemm, elementwise ops, ArgMax, Gather, Softmax, reductions): no ml op has a kernel of its
own. The semantics are onnxruntime's CPU kernels', which the tests check against, where
they and the ONNX spec differ (the binary LinearClassifier's scores, the Normalizer of a
zero row). The importer reads attributes against onnx's schemas of the version the model
imports of the domain (schema defaults filled in). docs/CONTRIB_OPS.md lists what each op
supports and refuses.

The features input of the linear ops and the Normalizer is (N, C), or (C) read as one row
(N = 1), as onnxruntime reads it; float64, int32 and int64 features are cast to float32
first, as onnxruntime casts them (its outputs are float32).
"""
from __future__ import annotations

import numpy as np

from ....ir import dims as D
from ....ir.dtypes import FLOAT32, FLOAT64, INT32, INT64, STRING
from ....ops.elementwise import Cast, Elementwise
from ....ops.linalg import Gemm
from ....ops.movement import Concat, Gather
from ....ops.reduce import ArgMax, Reduce, Softmax
from ....ops.shape import Identity, ViewAs
from ..translate import ML, Registry, TranslateContext

FEATURES = (FLOAT32, FLOAT64, INT32, INT64)
POST_TRANSFORMS = ("NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT")
# ml ops symwasm refuses by name, with the reason and the way around it
REFUSED = {
    "ZipMap": "its output is a sequence of maps (one {label: probability} per row), which symwasm's VM does "
              "not carry; convert the model with skl2onnx's options={'zipmap': False} (or id(model): "
              "{'zipmap': False} for one estimator of a pipeline) to get the probabilities as a (N, classes) "
              "float tensor",
}
# onnxruntime's SOFTMAX_ZERO leaves the scores within this of zero out of the sum
SOFTMAX_ZERO_EPSILON = 1e-7


def _ew(ctx: TranslateContext, fn: str, inputs: list[str], out: str | None = None, params: tuple = ()) -> str:
    """One elementwise core op; returns its output (``out``, or a fresh name)."""
    out = out or ctx.tmp(fn)
    ctx.emit(Elementwise(fn, params), inputs, [out])
    return out


def _f32(ctx: TranslateContext, what: str, value) -> str:
    return ctx.constant(what, np.asarray(value, np.float32))


def _float_features(ctx: TranslateContext, rows: bool) -> str:
    """Input 0 as float32; with ``rows``, as (N, C): a rank-1 input is one row, and other
    ranks are refused (onnxruntime refuses them too, or reads only their first two dims)."""
    v = ctx.value(0)
    if v.dtype not in FEATURES:
        ctx.fail(f"input '{v.name}' has dtype {v.dtype}; {ctx.op_type} takes float32, float64, int32 or int64")
    if v.rank == 0 or (rows and v.rank > 2):
        ctx.fail(f"input '{v.name}' is {v.describe()}; {ctx.op_type} takes (N, C) features, or (C) as one row")
    x = v.name
    if v.dtype != FLOAT32:
        x = ctx.tmp("features")
        ctx.emit(Cast(FLOAT32), [v.name], [x])
    if rows and v.rank == 1:
        row = ctx.tmp("row")
        ctx.emit(ViewAs((1, v.shape[0])), [x], [row])
        return row
    return x


def _floats(ctx: TranslateContext, name: str) -> np.ndarray:
    return np.asarray(ctx.attr(name) or [], np.float32)


def _one_of(ctx: TranslateContext, name: str, allowed: tuple[str, ...]) -> str:
    value = ctx.attr(name)
    if value not in allowed:
        ctx.fail(f"{name} '{value}' is not one of {', '.join(allowed)}")
    return value


def _weights(ctx: TranslateContext, x: str, rows: int) -> np.ndarray:
    """The coefficients as a (rows, C) matrix, C checked against the features' dim 1 when it
    is static (else the Gemm checks it at run time)."""
    coef = _floats(ctx, "coefficients")
    if coef.size == 0 or coef.size % rows:
        ctx.fail(f"coefficients has {coef.size} values; it must be {rows} rows of one value per feature")
    features = ctx.graph.values[x].shape[1]
    if isinstance(features, int) and features * rows != coef.size:
        ctx.fail(f"coefficients has {coef.size} values, {rows} rows of {coef.size // rows}; input "
                 f"'{ctx.inputs[0]}' has {features} features")
    return coef.reshape(rows, -1)


def _linear(ctx: TranslateContext, x: str, weights: np.ndarray, intercepts: np.ndarray | None) -> str:
    """x @ weights^T + intercepts, (N, rows)."""
    scores = ctx.tmp("scores")
    ins = [x, ctx.constant("coefficients", weights)]
    if intercepts is not None:
        ins.append(ctx.constant("intercepts", intercepts))
    ctx.emit(Gemm(trans_b=True), ins, [scores])
    return scores


# ----------------------------------------------------------------------------- post transforms


def _post_transform(ctx: TranslateContext, scores: str, kind: str, out: str) -> None:
    """onnxruntime's post transform of (N, K) ``scores`` into ``out``. With one column only
    PROBIT applies (onnxruntime leaves one score alone under the others)."""
    columns = ctx.graph.values[scores].shape[1]
    if kind == "NONE" or (columns == 1 and kind != "PROBIT"):
        ctx.emit(Identity(), [scores], [out])
    elif kind == "LOGISTIC":
        _ew(ctx, "sigmoid", [scores], out)
    elif kind == "SOFTMAX":
        ctx.emit(Softmax(-1), [scores], [out])
    elif kind == "SOFTMAX_ZERO":
        _softmax_zero(ctx, scores, out)
    else:
        _probit(ctx, scores, out)


def _softmax_zero(ctx: TranslateContext, v: str, out: str) -> None:
    """Softmax over the scores further than SOFTMAX_ZERO_EPSILON from zero; each of the
    others becomes itself times exp(-max), and is left out of the sum."""
    peak = ctx.tmp("max")
    ctx.emit(Reduce("max", (1,), keepdims=True), [v], [peak])
    counted = _ew(ctx, "greater", [_ew(ctx, "abs", [v]), _f32(ctx, "epsilon", SOFTMAX_ZERO_EPSILON)])
    exp = _ew(ctx, "exp", [_ew(ctx, "sub", [v, peak])])
    near_zero = _ew(ctx, "mul", [v, _ew(ctx, "exp", [_ew(ctx, "neg", [peak])])])
    e = _ew(ctx, "where", [counted, exp, near_zero])
    total = ctx.tmp("sum")
    ctx.emit(Reduce("sum", (1,), keepdims=True), [_ew(ctx, "where", [counted, e, _f32(ctx, "zero", 0.0)])], [total])
    _ew(ctx, "div", [e, total], out)


def _probit(ctx: TranslateContext, v: str, out: str) -> None:
    """sqrt(2) * erfinv(2 v - 1) with onnxruntime's approximation of erfinv (Winitzki's, a =
    0.147, its constants rounded to float32 as onnxruntime's are)."""
    a = np.float32(0.147)
    x = _ew(ctx, "sub", [_ew(ctx, "mul", [v, _f32(ctx, "two", 2.0)]), _f32(ctx, "one", 1.0)])
    one = _f32(ctx, "one", 1.0)
    log = _ew(ctx, "log", [_ew(ctx, "mul", [_ew(ctx, "sub", [one, x]), _ew(ctx, "add", [one, x])])])
    p = _ew(ctx, "add", [_f32(ctx, "c", np.float32(2) / (np.float32(3.14159) * a)),
                         _ew(ctx, "mul", [_f32(ctx, "half", 0.5), log])])
    q = _ew(ctx, "mul", [_f32(ctx, "inv_a", np.float32(1) / a), log])
    root = _ew(ctx, "sqrt", [_ew(ctx, "sub", [_ew(ctx, "sqrt", [_ew(ctx, "sub", [_ew(ctx, "mul", [p, p]), q])]), p])])
    sign = _ew(ctx, "where", [_ew(ctx, "less", [x, _f32(ctx, "zero", 0.0)]), _f32(ctx, "minus_one", -1.0), one])
    _ew(ctx, "mul", [_ew(ctx, "mul", [sign, root]), _f32(ctx, "sqrt2", np.sqrt(np.float32(2)))], out)


# ----------------------------------------------------------------------------- linear models


def linear_regressor(ctx: TranslateContext) -> None:
    """Y = X @ coefficients^T + intercepts, (N, targets); intercepts, when given, one per
    target."""
    transform = _one_of(ctx, "post_transform", POST_TRANSFORMS)
    targets = int(ctx.attr("targets"))
    if targets < 1:
        ctx.fail(f"targets {targets} must be 1 or more")
    x = _float_features(ctx, rows=True)
    intercepts = _floats(ctx, "intercepts")
    if intercepts.size not in (0, targets):
        ctx.fail(f"intercepts has {intercepts.size} values; it must have one per target ({targets})")
    scores = _linear(ctx, x, _weights(ctx, x, targets), intercepts if intercepts.size else None)
    _post_transform(ctx, scores, transform, ctx.outputs[0])


def linear_classifier(ctx: TranslateContext) -> None:
    """Scores X @ coefficients^T + intercepts, one row of coefficients per class; the label
    of the highest raw score (the first of equal ones), and the scores post-transformed.
    One row with two class labels (or none) is the binary form: the label is the second
    when the score s is above 0; with two labels the scores are (sigmoid(-s), sigmoid(s))
    under LOGISTIC, else (1 - s, s) (onnxruntime's; it leaves half of them unwritten under
    PROBIT, refused here), and without labels the one column, post-transformed."""
    transform = _one_of(ctx, "post_transform", POST_TRANSFORMS)
    ints, strings = ctx.ints("classlabels_ints"), ctx.attr("classlabels_strings")
    if ints and strings:
        ctx.fail("classlabels_ints and classlabels_strings are both given; a classifier has one kind of label")
    if strings:
        labels = np.array(list(strings), dtype=object)
    else:
        labels = np.array(ints or (), np.int64)
    x = _float_features(ctx, rows=True)
    intercepts = _floats(ctx, "intercepts")
    if intercepts.size:
        rows = intercepts.size
    else:  # onnxruntime counts the classes by the intercepts; without them, by the features
        features = ctx.graph.values[x].shape[1]
        if not isinstance(features, int) or features == 0:
            ctx.fail(f"without intercepts the number of classes comes from the count of features, and input "
                     f"'{ctx.inputs[0]}' has {features}")
        rows = _floats(ctx, "coefficients").size // features
    scores = _linear(ctx, x, _weights(ctx, x, rows), intercepts if intercepts.size else None)
    label, probabilities = ctx.outputs
    if rows == 1:
        _binary_classifier(ctx, scores, labels, transform, label, probabilities)
        return
    if labels.size != rows:
        ctx.fail(f"{labels.size} class labels for {rows} rows of coefficients; a classifier needs one label per row")
    best = ctx.tmp("argmax") if labels.dtype == object or not np.array_equal(labels, np.arange(rows)) else label
    ctx.emit(ArgMax(1, keepdims=False), [scores], [best])
    if best != label:
        ctx.emit(Gather(0), [ctx.constant("labels", labels), best], [label])
    _post_transform(ctx, scores, transform, probabilities)


def _binary_classifier(ctx: TranslateContext, scores: str, labels: np.ndarray, transform: str, label: str,
                       probabilities: str) -> None:
    if labels.size not in (0, 2):
        ctx.fail(f"{labels.size} class labels for one row of coefficients; the binary form takes two (or none)")
    pair = labels.size == 2
    if pair and transform == "PROBIT":
        ctx.fail("post_transform PROBIT with one row of coefficients and two class labels is not supported "
                 "(onnxruntime writes only half of the scores)")
    negative, positive = labels if pair else np.array([0, 1], np.int64)  # onnxruntime's labels without any
    above = _ew(ctx, "greater", [scores, _f32(ctx, "zero", 0.0)])
    picked = _ew(ctx, "where", [above, ctx.constant("positive", np.array(positive, labels.dtype)),
                                ctx.constant("negative", np.array(negative, labels.dtype))])
    ctx.emit(ViewAs((ctx.graph.values[scores].shape[0],)), [picked], [label])
    if not pair:
        _post_transform(ctx, scores, transform, probabilities)
    elif transform == "LOGISTIC":
        halves = [_ew(ctx, "sigmoid", [_ew(ctx, "neg", [scores])]), _ew(ctx, "sigmoid", [scores])]
        ctx.emit(Concat(1), halves, [probabilities])
    else:
        ctx.emit(Concat(1), [_ew(ctx, "sub", [_f32(ctx, "one", 1.0), scores]), scores], [probabilities])


# ----------------------------------------------------------------------------- feature transforms


def array_feature_extractor(ctx: TranslateContext) -> None:
    """X's last axis at the indices Y (flattened): X.shape[:-1] + (K,), and (1, K) for a
    rank-1 X, as onnxruntime shapes it. An index out of range fails the run naming the node;
    a negative one counts from the end, as Gather's (onnxruntime reads outside the row)."""
    x, y = ctx.value(0), ctx.value(1)
    if x.dtype not in FEATURES + (STRING,):
        ctx.fail(f"input '{x.name}' has dtype {x.dtype}; ArrayFeatureExtractor takes float32, float64, int32, "
                 f"int64 or string")
    if x.rank == 0:
        ctx.fail(f"input '{x.name}' is a scalar; ArrayFeatureExtractor selects along its last axis")
    indices = y.name
    if y.rank != 1:
        indices = ctx.tmp("indices")
        ctx.emit(ViewAs((D.product(y.shape),)), [y.name], [indices])
    if x.rank > 1:
        ctx.emit(Gather(x.rank - 1), [x.name, indices])
        return
    picked = ctx.tmp("picked")
    ctx.emit(Gather(0), [x.name, indices], [picked])
    ctx.emit(ViewAs((1, D.product(y.shape))), [picked], [ctx.outputs[0]])


def _per_feature(ctx: TranslateContext, name: str, values: np.ndarray, x: str) -> None:
    """``values`` (of attribute ``name``) broadcast along the last axis of ``x``: one value,
    or one per feature (the count checked at run time when the features are symbolic).
    onnxruntime indexes them by element modulo dim 1, which is the last axis only up to
    rank 2."""
    v = ctx.graph.values[x]
    if values.size == 1:
        return
    if v.rank > 2:
        ctx.fail(f"{name} has {values.size} values, one per feature, which needs an input of rank 1 or 2; "
                 f"'{v.name}' is {v.describe()}")
    features = v.shape[-1]
    if isinstance(features, int) and features != values.size:
        ctx.fail(f"{name} has {values.size} values; input '{v.name}' has {features} features (give 1 or {features})")


def scaler(ctx: TranslateContext) -> None:
    """Y = (X - offset) * scale, each one value or one per feature."""
    scale, offset = _floats(ctx, "scale"), _floats(ctx, "offset")
    if scale.size == 0 or scale.size != offset.size:
        ctx.fail(f"scale ({scale.size} values) and offset ({offset.size}) must have the same count, 1 or one per "
                 f"feature")
    x = _float_features(ctx, rows=False)
    _per_feature(ctx, "scale", scale, x)
    shifted = _ew(ctx, "sub", [x, ctx.constant("offset", offset)])
    _ew(ctx, "mul", [shifted, ctx.constant("scale", scale)], ctx.outputs[0])


def normalizer(ctx: TranslateContext) -> None:
    """Each row divided by its max (MAX), sum of absolute values (L1) or Euclidean norm (L2);
    a row whose divisor is 0 is left as it is, as onnxruntime leaves it."""
    norm = _one_of(ctx, "norm", ("MAX", "L1", "L2"))
    x = _float_features(ctx, rows=False)
    if ctx.graph.values[x].rank > 2:
        ctx.fail(f"input '{ctx.inputs[0]}' is {ctx.value(0).describe()}; Normalizer takes (N, C) or (C)")
    axis = ctx.graph.values[x].rank - 1
    total = ctx.tmp("norm")
    ctx.emit(Reduce({"MAX": "max", "L1": "l1", "L2": "l2"}[norm], (axis,), keepdims=True), [x], [total])
    zero = _ew(ctx, "equal", [total, _f32(ctx, "zero", 0.0)])
    divisor = _ew(ctx, "where", [zero, _f32(ctx, "one", 1.0), total])
    _ew(ctx, "div", [x, divisor], ctx.outputs[0])


def binarizer(ctx: TranslateContext) -> None:
    """1 where X > threshold, else 0, in X's dtype. A NaN becomes 0 (onnxruntime fails the
    run on one)."""
    v = ctx.value(0)
    if v.dtype not in FEATURES:
        ctx.fail(f"input '{v.name}' has dtype {v.dtype}; Binarizer takes float32, float64, int32 or int64")
    threshold = float(ctx.attr("threshold"))
    if v.dtype.is_int:  # x > t exactly when x > floor(t), for an integer x
        info = np.iinfo(v.dtype.np)
        threshold = float(np.clip(np.floor(threshold), info.min, info.max))
    above = _ew(ctx, "greater", [v.name, ctx.constant("threshold", np.array(threshold, v.dtype.np))])
    ctx.emit(Cast(v.dtype), [above])


def imputer(ctx: TranslateContext) -> None:
    """X with each element equal to the replaced value (any NaN, when that is NaN) replaced
    by the imputed value (one, or one per feature): float inputs use the float attributes,
    integer inputs the int64 ones."""
    v = ctx.value(0)
    if v.dtype not in FEATURES:
        ctx.fail(f"input '{v.name}' has dtype {v.dtype}; Imputer takes float32, float64, int32 or int64")
    if v.rank == 0:
        ctx.fail(f"input '{v.name}' is a scalar; Imputer takes (N, C) or (C)")
    floats, ints = ctx.attr("imputed_value_floats"), ctx.attr("imputed_value_int64s")
    if bool(floats) == bool(ints):
        ctx.fail("exactly one of imputed_value_floats and imputed_value_int64s must be given")
    if v.dtype.is_float != bool(floats):
        given = "imputed_value_floats" if floats else "imputed_value_int64s"
        ctx.fail(f"{given} is given for input '{v.name}' of dtype {v.dtype}; float inputs take "
                 f"imputed_value_floats, integer ones imputed_value_int64s")
    imputed = np.asarray(floats or ints).astype(v.dtype.np)
    _per_feature(ctx, "the imputed values", imputed, v.name)
    if floats:
        replaced = float(ctx.attr("replaced_value_float"))
        if np.isnan(replaced):
            missing = _ew(ctx, "isnan", [v.name])
        else:
            missing = _ew(ctx, "equal", [v.name, ctx.constant("replaced", np.array(replaced, v.dtype.np))])
    else:
        replaced = int(ctx.attr("replaced_value_int64"))
        info = np.iinfo(v.dtype.np)
        if not info.min <= replaced <= info.max:  # no element can equal it
            ctx.emit(Identity(), [v.name])
            return
        missing = _ew(ctx, "equal", [v.name, ctx.constant("replaced", np.array(replaced, v.dtype.np))])
    _ew(ctx, "where", [missing, ctx.constant("imputed", imputed), v.name], ctx.outputs[0])


def register(r: Registry) -> None:
    for op, fn in (("LinearRegressor", linear_regressor), ("LinearClassifier", linear_classifier),
                   ("ArrayFeatureExtractor", array_feature_extractor), ("Scaler", scaler),
                   ("Normalizer", normalizer), ("Binarizer", binarizer), ("Imputer", imputer)):
        r.add(op, (1,), fn, foldable=False, domain=ML)
