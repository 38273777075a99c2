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

from dataclasses import dataclass

import numpy as np

from ....ir import dims as D
from ....ir.dtypes import FLOAT32, FLOAT64, INT32, INT64, STRING
from ....ops.elementwise import Cast, Elementwise
from ....ops.indexing import GatherElements
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


def _like(ctx: TranslateContext, what: str, value, x: str) -> str:
    """A constant scalar of the dtype of value ``x`` (float32 or float64)."""
    return ctx.constant(what, np.asarray(value, ctx.graph.values[x].dtype.np))


def _float_features(ctx: TranslateContext, rows: bool, wide: bool = False) -> str:
    """Input 0 as float32 (float64 stays float64 when ``wide``); with ``rows``, as (N, C): a
    rank-1 input is one row, and other ranks are refused (onnxruntime refuses them too, or
    reads only their first two dims)."""
    v = ctx.value(0)
    if v.dtype not in FEATURES:
        ctx.fail(f"input '{v.name}' has dtype {v.dtype}; {ctx.op_type} takes float32, float64, int32 or int64")
    if v.rank == 0 or (rows and v.rank > 2):
        ctx.fail(f"input '{v.name}' is {v.describe()}; {ctx.op_type} takes (N, C) features, or (C) as one row")
    x = v.name
    if v.dtype != FLOAT32 and not (wide and v.dtype == FLOAT64):
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
    counted = _ew(ctx, "greater", [_ew(ctx, "abs", [v]), _like(ctx, "epsilon", SOFTMAX_ZERO_EPSILON, v)])
    exp = _ew(ctx, "exp", [_ew(ctx, "sub", [v, peak])])
    near_zero = _ew(ctx, "mul", [v, _ew(ctx, "exp", [_ew(ctx, "neg", [peak])])])
    e = _ew(ctx, "where", [counted, exp, near_zero])
    total = ctx.tmp("sum")
    ctx.emit(Reduce("sum", (1,), keepdims=True), [_ew(ctx, "where", [counted, e, _like(ctx, "zero", 0.0, v)])], [total])
    _ew(ctx, "div", [e, total], out)


def _probit(ctx: TranslateContext, v: str, out: str) -> None:
    """sqrt(2) * erfinv(2 v - 1) with onnxruntime's approximation of erfinv (Winitzki's, a =
    0.147, its constants rounded to float32 as onnxruntime's are)."""
    a = np.float32(0.147)
    one = _like(ctx, "one", 1.0, v)
    x = _ew(ctx, "sub", [_ew(ctx, "mul", [v, _like(ctx, "two", 2.0, v)]), one])
    log = _ew(ctx, "log", [_ew(ctx, "mul", [_ew(ctx, "sub", [one, x]), _ew(ctx, "add", [one, x])])])
    p = _ew(ctx, "add", [_like(ctx, "c", np.float32(2) / (np.float32(3.14159) * a), v),
                         _ew(ctx, "mul", [_like(ctx, "half", 0.5, v), log])])
    q = _ew(ctx, "mul", [_like(ctx, "inv_a", np.float32(1) / a, v), log])
    root = _ew(ctx, "sqrt", [_ew(ctx, "sub", [_ew(ctx, "sqrt", [_ew(ctx, "sub", [_ew(ctx, "mul", [p, p]), q])]), p])])
    sign = _ew(ctx, "where", [_ew(ctx, "less", [x, _like(ctx, "zero", 0.0, v)]), _like(ctx, "minus_one", -1.0, v), one])
    _ew(ctx, "mul", [_ew(ctx, "mul", [sign, root]), _like(ctx, "sqrt2", np.sqrt(np.float32(2)), v)], out)


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


# ----------------------------------------------------------------------------- tree ensembles

# nodes_modes, in the order of their codes in a forest's mode table
MODES = ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ", "LEAF")
LEAF = MODES.index("LEAF")
# each branch mode's comparison of a feature with the node's threshold (then negated or not)
COMPARISONS = {"BRANCH_LEQ": ("less_equal", False), "BRANCH_LT": ("less", False),
               "BRANCH_GTE": ("greater_equal", False), "BRANCH_GT": ("greater", False),
               "BRANCH_EQ": ("equal", False), "BRANCH_NEQ": ("equal", True)}
AGGREGATES = ("SUM", "AVERAGE", "MIN", "MAX")


@dataclass(frozen=True)
class Forest:
    """A tree ensemble's nodes as tables indexed by node position (the attributes' order),
    read once from the attributes. A leaf's two children are itself, so a row that reached
    its leaf stays there while deeper trees go on descending."""

    features: np.ndarray  # int64; 0 for a leaf
    thresholds: np.ndarray  # float32
    modes: np.ndarray  # int64 codes into MODES
    true: np.ndarray  # int64 positions of the children
    false: np.ndarray
    tracks_true: np.ndarray  # bool: a NaN feature takes the true branch
    roots: np.ndarray  # int64: where each tree starts (as onnxruntime: where the tree id changes)
    depth: int  # branch nodes on the longest path from a root
    weights: np.ndarray  # float32 (nodes, outputs): a leaf's weight per target or class (its sum, min or max)
    present: np.ndarray  # bool (nodes, outputs): the leaf has a weight for that output


def _forest(ctx: TranslateContext, prefix: str, outputs: int, aggregate: str) -> Forest:
    """The nodes_* attributes and the ``prefix``_* weights (target or class) of a tree
    ensemble with ``outputs`` targets or classes, checked as onnxruntime checks them."""
    for name in ("nodes_values_as_tensor", "nodes_hitrates_as_tensor", "base_values_as_tensor",
                 f"{prefix}_weights_as_tensor"):
        if ctx.attr(name) is not None:
            ctx.fail(f"{name} (double-precision thresholds and weights) is not supported; symwasm reads the float "
                     f"attributes")

    def ints(name: str) -> np.ndarray:
        return np.asarray(ctx.attr(name) or [], np.int64)

    trees, ids = ints("nodes_treeids"), ints("nodes_nodeids")
    n = trees.size
    if n == 0:
        ctx.fail("the ensemble has no nodes (nodes_treeids is empty)")
    modes_given = list(ctx.attr("nodes_modes") or [])
    columns = {"nodes_nodeids": ids, "nodes_featureids": ints("nodes_featureids"),
               "nodes_truenodeids": ints("nodes_truenodeids"), "nodes_falsenodeids": ints("nodes_falsenodeids"),
               "nodes_values": _floats(ctx, "nodes_values"), "nodes_modes": modes_given}
    for name, column in columns.items():
        if len(column) != n:
            ctx.fail(f"{name} has {len(column)} values; nodes_treeids has {n} (one per node)")
    unknown = sorted(set(modes_given) - set(MODES))
    if unknown:
        ctx.fail(f"nodes_modes has '{unknown[0]}'; a node's mode is one of {', '.join(MODES)}")
    modes = np.array([MODES.index(m) for m in modes_given], np.int64)
    leaf = modes == LEAF
    position: dict[tuple[int, int], int] = {}
    for k, key in enumerate(zip(trees.tolist(), ids.tolist())):
        if key in position:
            ctx.fail(f"node {key[1]} of tree {key[0]} is given twice")
        position[key] = k

    def child(k: int, which: str) -> int:
        if leaf[k]:
            return k
        key = (int(trees[k]), int(columns[f"nodes_{which}nodeids"][k]))
        if key not in position:
            ctx.fail(f"node {ids[k]} of tree {trees[k]}: its {which} child, node {key[1]}, is not a node of the tree")
        if position[key] == k:
            ctx.fail(f"node {ids[k]} of tree {trees[k]} is its own {which} child")
        return position[key]

    true = np.array([child(k, "true") for k in range(n)], np.int64)
    false = np.array([child(k, "false") for k in range(n)], np.int64)
    features = np.where(leaf, 0, columns["nodes_featureids"])
    if (features < 0).any():
        ctx.fail(f"nodes_featureids has {features.min()}; feature indices are 0 or more")
    tracks = ints("nodes_missing_value_tracks_true")[:n]
    tracks_true = np.zeros(n, bool)
    tracks_true[:tracks.size] = tracks == 1
    # a tree's root is its first node, which exporters write first (onnx.reference reads it
    # so; onnxruntime looks for it otherwise, and the two disagree on any other layout)
    roots = np.array([k for k in range(n) if k == 0 or trees[k] != trees[k - 1]], np.int64)
    if len(set(trees[roots].tolist())) != roots.size:
        ctx.fail("the nodes of a tree are not given together (nodes_treeids comes back to a tree after another)")
    children = np.concatenate([true[~leaf], false[~leaf]])
    inner = np.intersect1d(roots, children)
    if inner.size:
        k = int(inner[0])
        ctx.fail(f"tree {trees[k]} does not start with its root: its first node, node {ids[k]}, is a child of "
                 f"another node (exporters write each tree's root first)")
    depth = _depth(ctx, leaf, true, false, lambda k: f"node {ids[k]} of tree {trees[k]}")

    weight_trees, weight_nodes = ints(f"{prefix}_treeids"), ints(f"{prefix}_nodeids")
    weight_ids, weight_values = ints(f"{prefix}_ids"), _floats(ctx, f"{prefix}_weights")
    for name, column in ((f"{prefix}_treeids", weight_trees), (f"{prefix}_nodeids", weight_nodes),
                         (f"{prefix}_weights", weight_values)):
        if column.size != weight_ids.size:
            ctx.fail(f"{name} has {column.size} values; {prefix}_ids has {weight_ids.size} (one per weight)")
    weights = np.zeros((n, outputs), np.float32)
    present = np.zeros((n, outputs), bool)
    for t, node_id, out, w in zip(weight_trees.tolist(), weight_nodes.tolist(), weight_ids.tolist(),
                                  weight_values.tolist()):
        k = position.get((t, node_id))
        if k is None:
            ctx.fail(f"a weight is given for node {node_id} of tree {t}, which is not a node")
        if not leaf[k]:  # onnxruntime ignores them (old onnxmltools wrote some)
            continue
        if not 0 <= out < outputs:
            ctx.fail(f"{prefix}_ids has {out}; the ensemble has {outputs} {prefix}s")
        if present[k, out]:
            ctx.fail(f"leaf {node_id} of tree {t} has two weights for {prefix} {out} (onnxruntime's result then "
                     f"depends on the count of {prefix}s)")
        weights[k, out], present[k, out] = w, True
    bare = np.flatnonzero(leaf & ~present.any(axis=1))
    if bare.size:
        ctx.fail(f"leaf {ids[bare[0]]} of tree {trees[bare[0]]} has no weight")
    if aggregate in ("MIN", "MAX"):  # a leaf without a weight for an output does not take part in its min or max
        weights = np.where(present, weights, np.float32(np.inf if aggregate == "MIN" else -np.inf))
    return Forest(features, columns["nodes_values"], modes, true, false, tracks_true, roots, depth, weights, present)


def _depth(ctx: TranslateContext, leaf: np.ndarray, true: np.ndarray, false: np.ndarray, node_name) -> int:
    """The most branch nodes on a path from any node to a leaf; a loop is refused (it
    would never reach a leaf)."""
    depth = np.where(leaf, 0, -1)
    on_path = np.zeros(leaf.size, bool)
    for start in range(leaf.size):
        stack = [start]
        while stack:
            k = stack[-1]
            if depth[k] >= 0:
                stack.pop()
                continue
            on_path[k] = True
            pending = [c for c in (true[k], false[k]) if depth[c] < 0]
            for c in pending:
                if on_path[c]:
                    ctx.fail(f"{node_name(k)} leads back to {node_name(c)}: a tree cannot loop")
            if pending:
                stack.extend(pending)
                continue
            depth[k] = 1 + max(depth[true[k]], depth[false[k]])
            on_path[k] = False
            stack.pop()
    return int(depth.max())


def _leaves(ctx: TranslateContext, forest: Forest) -> str:
    """The leaf each row reaches in each tree: (N, trees) int64 node positions. Every tree
    descends one level a step, for as many steps as the deepest tree has levels; comparisons
    are in float32, or float64 for float64 features (thresholds widened exactly), as
    onnxruntime compares."""
    x = _float_features(ctx, rows=True, wide=True)
    dt = ctx.graph.values[x].dtype
    features = ctx.graph.values[x].shape[1]
    used = forest.features[forest.modes != LEAF]
    if isinstance(features, int) and used.size and used.max() >= features:
        ctx.fail(f"a node reads feature {used.max()}; input '{ctx.inputs[0]}' has {features} features")
    branch_modes = sorted({MODES[m] for m in forest.modes.tolist() if m != LEAF})
    tracks = bool(forest.tracks_true.any())
    tables = {"features": forest.features, "thresholds": forest.thresholds.astype(dt.np), "true": forest.true,
              "false": forest.false}
    if len(branch_modes) > 1:
        tables["modes"] = forest.modes
    if tracks:
        tables["tracks_true"] = forest.tracks_true
    names = {what: ctx.constant(what, table) for what, table in tables.items()}
    at: str | None = None  # the node positions reached, (N, trees)
    for _ in range(max(forest.depth, 1)):
        if at is None:  # the roots are known: their columns of the tables are constants
            node = {what: ctx.constant(f"root_{what}", table[forest.roots]) for what, table in tables.items()}
            value = ctx.tmp("value")
            ctx.emit(Gather(1), [x, node["features"]], [value])
        else:
            node = {}
            for what in tables:
                node[what] = ctx.tmp(what)
                ctx.emit(Gather(0), [names[what], at], [node[what]])
            value = ctx.tmp("value")
            ctx.emit(GatherElements(1), [x, node["features"]], [value])
        taken = _branch_taken(ctx, value, node, branch_modes, tracks)
        at = _ew(ctx, "where", [taken, node["true"], node["false"]])
    return at


def _branch_taken(ctx: TranslateContext, value: str, node: dict[str, str], branch_modes: list[str],
                  tracks: bool) -> str:
    """Whether each node's true branch is taken: its comparison, and a NaN where the node
    tracks missing values to the true branch."""

    def compare(mode: str) -> str:
        fn, negate = COMPARISONS[mode]
        result = _ew(ctx, fn, [value, node["thresholds"]])
        return _ew(ctx, "not", [result]) if negate else result

    if len(branch_modes) > 1:
        taken = None
        for m in branch_modes:
            part = _ew(ctx, "and", [_ew(ctx, "equal", [node["modes"], ctx.constant("mode", np.array(MODES.index(m)))]),
                                    compare(m)])
            taken = part if taken is None else _ew(ctx, "or", [taken, part])
    else:  # one mode, or none when every tree is a single leaf (whose children are itself)
        taken = compare(branch_modes[0] if branch_modes else "BRANCH_LEQ")
    if tracks:
        missing = _ew(ctx, "and", [node["tracks_true"], _ew(ctx, "isnan", [value])])
        taken = _ew(ctx, "or", [taken, missing])
    return taken


def _aggregate(ctx: TranslateContext, forest: Forest, leaves: str, kind: str) -> str:
    """(N, outputs) of the leaves' weights, summed (or averaged, min or max) over the trees;
    under MIN and MAX an output no reached leaf weighs is 0, as onnxruntime leaves it."""
    gathered = ctx.tmp("leaf_weights")
    ctx.emit(Gather(0), [ctx.constant("weights", forest.weights), leaves], [gathered])
    total = ctx.tmp("aggregate")
    ctx.emit(Reduce({"SUM": "sum", "AVERAGE": "sum", "MIN": "min", "MAX": "max"}[kind], (1,), keepdims=False),
             [gathered], [total])
    if kind == "AVERAGE":
        total = _ew(ctx, "div", [total, _like(ctx, "trees", forest.roots.size, total)])
    if kind in ("MIN", "MAX") and not forest.present[forest.modes == LEAF].all():
        reached = ctx.tmp("reached")
        ctx.emit(Gather(0), [ctx.constant("present", forest.present), leaves], [reached])
        has = ctx.tmp("has")
        ctx.emit(Reduce("max", (1,), keepdims=False), [_cast(ctx, reached, FLOAT32)], [has])
        has = _ew(ctx, "greater", [has, _f32(ctx, "zero", 0.0)])
        return _ew(ctx, "where", [has, total, _like(ctx, "zero", 0.0, total)])
    return total


def _cast(ctx: TranslateContext, x: str, to) -> str:
    out = ctx.tmp(f"as_{to}")
    ctx.emit(Cast(to), [x], [out])
    return out


def tree_ensemble_regressor(ctx: TranslateContext) -> None:
    """The sum (or average, min, max) over the trees of the weights of the leaf each row
    reaches, plus base_values, post-transformed; (N, n_targets)."""
    transform = _one_of(ctx, "post_transform", POST_TRANSFORMS)
    aggregate = _one_of(ctx, "aggregate_function", AGGREGATES)
    targets = ctx.attr("n_targets")
    if targets is None or int(targets) < 1:
        ctx.fail(f"n_targets {targets} must be given, 1 or more")
    targets = int(targets)
    base = _floats(ctx, "base_values")
    if base.size not in (0, targets):
        ctx.fail(f"base_values has {base.size} values; it must have one per target ({targets})")
    forest = _forest(ctx, "target", targets, aggregate)
    scores = _aggregate(ctx, forest, _leaves(ctx, forest), aggregate)
    if base.size:
        scores = _ew(ctx, "add", [scores, ctx.constant("base_values", base)])
    _post_transform(ctx, scores, transform, ctx.outputs[0])


def tree_ensemble_classifier(ctx: TranslateContext) -> None:
    """Class scores: the sum over the trees of the weights of the leaf each row reaches,
    plus base_values; the label of the highest, and the scores post-transformed. Two
    classes follow onnxruntime's binary rules (:func:`_two_classes`)."""
    transform = _one_of(ctx, "post_transform", POST_TRANSFORMS)
    ints, strings = ctx.ints("classlabels_int64s"), ctx.attr("classlabels_strings")
    if bool(ints) == bool(strings):
        ctx.fail("exactly one of classlabels_int64s and classlabels_strings must be given")
    labels = np.array(list(strings), dtype=object) if strings else np.array(ints, np.int64)
    classes = labels.size
    if classes < 2:
        ctx.fail(f"{classes} class label; a classifier needs two or more")
    base = _floats(ctx, "base_values")
    if base.size not in (0, classes):
        ctx.fail(f"base_values has {base.size} values; it must have one per class ({classes})")
    forest = _forest(ctx, "class", classes, "SUM")
    leaves = _leaves(ctx, forest)
    scores = _aggregate(ctx, forest, leaves, "SUM")
    label, probabilities = ctx.outputs
    if classes == 2:
        _two_classes(ctx, forest, scores, base, labels, transform, label, probabilities)
        return
    if base.size:
        scores = _ew(ctx, "add", [scores, ctx.constant("base_values", base)])
    # a class no reached leaf weighs (and without a base value) has no score: it is never the label
    on_leaf = forest.present[forest.modes == LEAF]
    always = on_leaf.all(axis=0) | bool(base.size)
    ranked = scores
    if not always.all():
        if on_leaf[:, ~always].any():  # whether it has one depends on the leaves reached
            reached = ctx.tmp("reached")
            ctx.emit(Gather(0), [ctx.constant("present", forest.present | always), leaves], [reached])
            has = ctx.tmp("has")
            ctx.emit(Reduce("max", (1,), keepdims=False), [_cast(ctx, reached, FLOAT32)], [has])
            has = _ew(ctx, "greater", [has, _f32(ctx, "zero", 0.0)])
        else:
            has = ctx.constant("has", always)
        ranked = _ew(ctx, "where", [has, scores, _f32(ctx, "unranked", -np.inf)])
    _labels_of_best(ctx, ranked, labels, label)
    _post_transform(ctx, scores, transform, probabilities)


def _labels_of_best(ctx: TranslateContext, scores: str, labels: np.ndarray, out: str) -> None:
    """The label of each row's highest score (the first of equal ones)."""
    identity = labels.dtype != object and np.array_equal(labels, np.arange(labels.size))
    best = out if identity else ctx.tmp("argmax")
    ctx.emit(ArgMax(1, keepdims=False), [scores], [best])
    if not identity:
        ctx.emit(Gather(0), [ctx.constant("labels", labels), best], [out])


def _column(ctx: TranslateContext, x: str, k: int) -> str:
    out = ctx.tmp(f"column{k}")
    ctx.emit(Gather(1), [x, ctx.constant("column", np.array([k], np.int64))], [out])
    return out


def _two_classes(ctx: TranslateContext, forest: Forest, scores: str, base: np.ndarray, labels: np.ndarray,
                 transform: str, label: str, probabilities: str) -> None:
    """onnxruntime's binary classifier, with s0, s1 the classes' sums. A class no leaf
    weighs scores 0. When every leaf weighs class 1, the positive weight p is s1 and the
    scores (s0, s1) (with base values, (-(b1 + s0), b1 + s0), class 1's own sum dropped),
    post-transformed. When no leaf weighs it, p = s0 (+ b0); with base values the scores are
    (p, 0), post-transformed, and without, (1 - p, p) for weights all 0 or more, else (-p, p)
    or, under LOGISTIC, (sigmoid(-p), sigmoid(p)). The label: with one class id among the
    weights, the second when p exceeds 0.5 (weights all 0 or more) or 0, else the first; with
    both, 1 when p > 0, else 0 (onnxruntime's literal values, not the labels)."""
    on_leaf = forest.present[forest.modes == LEAF]
    partial = [k for k in range(2) if on_leaf[:, k].any() and not on_leaf[:, k].all()]
    if partial:
        ctx.fail(f"class {partial[0]} has weights on some leaves and not on others: onnxruntime's binary scores then "
                 f"depend on the leaves a row reaches in a way symwasm does not reproduce")
    weighs_zero, weighs_one = bool(on_leaf[:, 0].all()), bool(on_leaf[:, 1].all())
    # onnxruntime reads these from every weight given, a branch node's too
    one_class_id = len(set(ctx.ints("class_ids") or ())) == 1
    nonnegative = bool((_floats(ctx, "class_weights") >= 0).all())
    s0, s1 = _column(ctx, scores, 0), _column(ctx, scores, 1)
    if weighs_one:
        if base.size:
            s1 = _ew(ctx, "add", [s0, _f32(ctx, "base1", base[1])])
            p0 = _ew(ctx, "neg", [s1])
        else:
            p0 = s0
        positive = s1
        columns = [p0 if weighs_zero else s0, s1]  # s0 is 0 where no leaf weighs class 0
    else:
        positive = _ew(ctx, "add", [s0, _f32(ctx, "base0", base[0])]) if base.size else s0
        columns = [positive, s1] if base.size else None  # s1 is 0: no leaf weighs class 1
    if one_class_id:
        threshold = 0.5 if nonnegative else 0.0
        picked = _ew(ctx, "where", [_ew(ctx, "greater", [positive, _f32(ctx, "threshold", threshold)]),
                                    ctx.constant("positive", labels[1:2]), ctx.constant("negative", labels[0:1])])
    else:
        literal = labels[[1, 0]] if labels.dtype == object else np.array([1, 0], np.int64)
        picked = _ew(ctx, "where", [_ew(ctx, "greater", [positive, _f32(ctx, "zero", 0.0)]),
                                    ctx.constant("positive", literal[0:1]), ctx.constant("negative", literal[1:2])])
    ctx.emit(ViewAs((ctx.graph.values[scores].shape[0],)), [picked], [label])
    if columns is not None:
        both = ctx.tmp("scores")
        ctx.emit(Concat(1), columns, [both])
        _post_transform(ctx, both, transform, probabilities)
        return
    if transform == "PROBIT":
        ctx.fail("post_transform PROBIT with class 1 on no leaf and no base values is not supported (onnxruntime "
                 "writes only the first score)")
    if nonnegative:
        pair = [_ew(ctx, "sub", [_f32(ctx, "one", 1.0), positive]), positive]
    elif transform == "LOGISTIC":
        pair = [_ew(ctx, "sigmoid", [_ew(ctx, "neg", [positive])]), _ew(ctx, "sigmoid", [positive])]
    else:
        pair = [_ew(ctx, "neg", [positive]), positive]
    ctx.emit(Concat(1), pair, [probabilities])


# TreeEnsemble (ml opset 5): its enumerations, in the order of their codes
AGGREGATES_V5 = ("AVERAGE", "SUM", "MIN", "MAX")
POST_TRANSFORMS_V5 = ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT")
MODES_V5 = ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ", "BRANCH_MEMBER")


def tree_ensemble(ctx: TranslateContext) -> None:
    """TreeEnsemble (ml opset 5, which replaced the two above): interior nodes and leaves in
    lists of their own, each tree's root given, one target per leaf; computed in the
    features' dtype (float32 or float64) as the regressor is, into the same node tables
    (interior nodes first, then the leaves)."""
    v = ctx.value(0)
    if v.dtype not in (FLOAT32, FLOAT64):
        ctx.fail(f"input '{v.name}' has dtype {v.dtype}; symwasm implements TreeEnsemble for float32 and float64")

    def code(name: str, table: tuple[str, ...]) -> str:
        value = int(ctx.attr(name))
        if not 0 <= value < len(table):
            ctx.fail(f"{name} {value} is not one of " + ", ".join(f"{k} ({t})" for k, t in enumerate(table)))
        return table[value]

    aggregate, transform = code("aggregate_function", AGGREGATES_V5), code("post_transform", POST_TRANSFORMS_V5)
    if transform in ("SOFTMAX", "LOGISTIC"):
        ctx.fail(f"post_transform {POST_TRANSFORMS_V5.index(transform)} ({transform} in the ONNX spec) is not "
                 f"supported: onnxruntime reads 1 as LOGISTIC and 2 as SOFTMAX, so a model means one or the other "
                 f"depending on where it runs")
    targets = ctx.attr("n_targets")
    if targets is None or int(targets) < 1:
        ctx.fail(f"n_targets {targets} must be given, 1 or more")
    targets = int(targets)

    def ints(name: str) -> np.ndarray:
        return np.asarray(ctx.attr(name) or [], np.int64)

    def tensor(name: str) -> np.ndarray:
        value = np.asarray(ctx.attr(name)).ravel()
        if value.dtype != v.dtype.np:
            ctx.fail(f"{name} has dtype {value.dtype}; input '{v.name}' is {v.dtype} (they must agree)")
        return value

    features, splits = ints("nodes_featureids"), tensor("nodes_splits")
    n = features.size
    modes = np.asarray(ctx.attr("nodes_modes")).ravel().astype(np.int64)
    columns = {"nodes_splits": splits, "nodes_modes": modes, "nodes_truenodeids": ints("nodes_truenodeids"),
               "nodes_falsenodeids": ints("nodes_falsenodeids"), "nodes_trueleafs": ints("nodes_trueleafs"),
               "nodes_falseleafs": ints("nodes_falseleafs")}
    tracks = ints("nodes_missing_value_tracks_true")
    if tracks.size:
        columns["nodes_missing_value_tracks_true"] = tracks
    for name, column in columns.items():
        if column.size != n:
            ctx.fail(f"{name} has {column.size} values; nodes_featureids has {n} (one per interior node)")
    if n == 0:
        ctx.fail("the ensemble has no interior nodes (a one-leaf tree is a node whose branches both reach its leaf)")
    if ((modes < 0) | (modes >= len(MODES_V5))).any():
        ctx.fail(f"nodes_modes has {modes[(modes < 0) | (modes >= len(MODES_V5))][0]}; modes are 0 to "
                 f"{len(MODES_V5) - 1}")
    if (modes == MODES_V5.index("BRANCH_MEMBER")).any():
        ctx.fail("BRANCH_MEMBER nodes (set membership, what LightGBM's categorical splits become) are not supported")
    leaf_targets, leaf_weights = ints("leaf_targetids"), tensor("leaf_weights")
    leaves = leaf_targets.size
    if leaf_weights.size != leaves:
        ctx.fail(f"leaf_weights has {leaf_weights.size} values; leaf_targetids has {leaves} (one per leaf)")
    if leaves and not ((0 <= leaf_targets) & (leaf_targets < targets)).all():
        ctx.fail(f"leaf_targetids has {leaf_targets[(leaf_targets < 0) | (leaf_targets >= targets)][0]}; the "
                 f"ensemble has {targets} targets")
    children = []
    for which in ("true", "false"):
        ids, to_leaf = columns[f"nodes_{which}nodeids"], columns[f"nodes_{which}leafs"] == 1
        bad = np.flatnonzero(to_leaf & ((ids < 0) | (ids >= leaves)) | ~to_leaf & ((ids < 0) | (ids >= n)))
        if bad.size:
            k = int(bad[0])
            ctx.fail(f"node {k}'s {which} branch, {'leaf' if to_leaf[k] else 'node'} {ids[k]}, does not exist")
        children.append(np.concatenate([np.where(to_leaf, n + ids, ids), n + np.arange(leaves)]))
    roots = ints("tree_roots")
    if roots.size == 0 or not ((0 <= roots) & (roots < n)).all():
        ctx.fail(f"tree_roots {roots.tolist()} must name one interior node or more (0 to {n - 1})")
    kinds = np.concatenate([modes, np.full(leaves, LEAF)])  # MODES_V5's branch codes are MODES'
    leaf = kinds == LEAF
    depth = _depth(ctx, leaf, children[0], children[1], lambda k: f"node {k}" if k < n else f"leaf {k - n}")
    weights = np.zeros((n + leaves, targets), v.dtype.np)
    present = np.zeros((n + leaves, targets), bool)
    weights[n + np.arange(leaves), leaf_targets] = leaf_weights
    present[n + np.arange(leaves), leaf_targets] = True
    if aggregate in ("MIN", "MAX"):
        weights = np.where(present, weights, np.inf if aggregate == "MIN" else -np.inf).astype(v.dtype.np)
    forest = Forest(np.concatenate([features, np.zeros(leaves, np.int64)]),
                    np.concatenate([splits, np.zeros(leaves, splits.dtype)]), kinds, children[0], children[1],
                    np.concatenate([tracks == 1 if tracks.size else np.zeros(n, bool), np.zeros(leaves, bool)]),
                    roots, depth, weights, present)
    _post_transform(ctx, _aggregate(ctx, forest, _leaves(ctx, forest), aggregate), transform, ctx.outputs[0])


def register(r: Registry) -> None:
    for op, fn in (("LinearRegressor", linear_regressor), ("LinearClassifier", linear_classifier),
                   ("ArrayFeatureExtractor", array_feature_extractor), ("Scaler", scaler),
                   ("Normalizer", normalizer), ("Binarizer", binarizer), ("Imputer", imputer)):
        r.add(op, (1,), fn, foldable=False, domain=ML)
    r.add("TreeEnsembleRegressor", (1, 3), tree_ensemble_regressor, foldable=False, domain=ML)
    r.add("TreeEnsembleClassifier", (1, 3), tree_ensemble_classifier, foldable=False, domain=ML)
    r.add("TreeEnsemble", (5,), tree_ensemble, foldable=False, domain=ML)
