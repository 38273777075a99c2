"""The ai.onnx.ml ops (toolkit/frontend/onnx/ops/ml.py) on both targets against onnxruntime's
CPU kernels (and onnx.reference where onnxruntime has no kernel for an input dtype): each
model compiled once and run at several bindings of its symbolic batch dim."""
import numpy as np
import onnx
import pytest
from onnx import helper

import wasm_runtime
from toolkit.compiler import compile_model
from toolkit.ir.graph import CompileError
from util import _TMP, build, check_model, const, ort_reference, reference, vinfo

F32, F64, I32, I64 = np.float32, np.float64, np.int32, np.int64
ML = "ai.onnx.ml"
BATCHES = (1, 4, 9)


def ml_model(nodes, inputs, outputs, initializers=(), ml_opset=1, opset=17):
    g = helper.make_graph(list(nodes), "test", list(inputs), list(outputs), initializer=list(initializers))
    imports = [helper.make_opsetid(ML, ml_opset)] + ([helper.make_opsetid("", opset)] if opset else [])
    m = helper.make_model(g, opset_imports=imports)
    m.ir_version = 8
    return m


def node(op, inputs, outputs, **attrs):
    return helper.make_node(op, inputs, outputs, name="n", domain=ML, **attrs)


def features(rng, n, c, dtype=F32, lo=-3, hi=3):
    if np.dtype(dtype).kind == "i":
        return rng.integers(lo, hi, size=(n, c)).astype(dtype)
    return rng.uniform(lo, hi, size=(n, c)).astype(dtype)


def run_op(op, target, x_dtype=F32, c=5, outputs=(("y", F32),), ref=ort_reference, make_x=features, seed=0,
           rtol=1e-5, atol=1e-5, **attrs):
    """One ``op`` node on input x (N, c), N symbolic, checked at every N of BATCHES."""
    rng = np.random.default_rng(seed)
    model = ml_model([node(op, ["x"], [o for o, _ in outputs], **attrs)], [vinfo("x", x_dtype, ["N", c])],
                     [vinfo(o, dt, None) for o, dt in outputs])
    feeds = [{"x": make_x(rng, n, c, x_dtype)} for n in BATCHES]
    return check_model(model, target, feeds, rtol=rtol, atol=atol, ref=ref)


def refused(model, match):
    with pytest.raises(CompileError, match=match):
        compile_model(model, _TMP / "refused.wasm")


def coefficients(rng, rows, c, scale=1.0):
    return [float(v) for v in (rng.standard_normal(rows * c) * scale).astype(F32)]


# ----------------------------------------------------------------------------- LinearRegressor


@pytest.mark.parametrize("targets,intercepts", [(1, True), (1, False), (3, True), (3, False)])
def test_linear_regressor(targets, intercepts, target):
    rng = np.random.default_rng(1)
    attrs = dict(coefficients=coefficients(rng, targets, 5), targets=targets)
    if intercepts:
        attrs["intercepts"] = [float(v) for v in rng.standard_normal(targets).astype(F32)]
    run_op("LinearRegressor", target, **attrs)


@pytest.mark.parametrize("transform", ["LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
def test_linear_regressor_post_transforms(transform, target):
    rng = np.random.default_rng(2)
    coef = coefficients(rng, 3, 5)
    coef[0:5] = [0.0] * 5  # a target of zero scores: SOFTMAX_ZERO leaves it out of the sum
    run_op("LinearRegressor", target, coefficients=coef, targets=3, post_transform=transform)


def test_linear_regressor_probit(target):
    """One target: PROBIT of scores in (0, 1) (onnxruntime's erfinv approximation)."""
    run_op("LinearRegressor", target, coefficients=[0.1, 0.2, 0.05, 0.15, 0.3], intercepts=[0.05],
           post_transform="PROBIT", make_x=lambda r, n, c, dt: features(r, n, c, dt, 0, 1), rtol=1e-4, atol=1e-5)


def test_linear_regressor_one_row(target):
    """A rank-1 input is one row: the output is (1, targets)."""
    rng = np.random.default_rng(4)
    model = ml_model([node("LinearRegressor", ["x"], ["y"], coefficients=coefficients(rng, 2, 6), targets=2)],
                     [vinfo("x", F32, [6])], [vinfo("y", F32, None)])
    check_model(model, target, [{"x": features(rng, 1, 6)[0]} for _ in range(2)], ref=ort_reference)


# ----------------------------------------------------------------------------- LinearClassifier

CLASSIFIER_LABELS = [
    ("ints", dict(classlabels_ints=[7, -2, 5, 0])),
    ("range", dict(classlabels_ints=[0, 1, 2, 3])),
    ("strings", dict(classlabels_strings=["cat", "dog", "", "émeu"])),
]


@pytest.mark.parametrize("transform", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"])
@pytest.mark.parametrize("kind,labels", CLASSIFIER_LABELS, ids=[k for k, _ in CLASSIFIER_LABELS])
def test_linear_classifier(kind, labels, transform, target):
    rng = np.random.default_rng(5)
    coef = coefficients(rng, 4, 5, 0.2)
    coef[5:10] = [0.0] * 5  # a class of zero scores (SOFTMAX_ZERO's special case)
    label_type = object if kind == "strings" else I64
    make_x = (lambda r, n, c, dt: features(r, n, c, dt, 0, 1)) if transform == "PROBIT" else features
    run_op("LinearClassifier", target, outputs=(("label", label_type), ("scores", F32)), coefficients=coef,
           intercepts=[0.1, 0.0, -0.2, 0.3] if transform != "PROBIT" else [0.2, 0.5, 0.3, 0.4], post_transform=transform,
           make_x=make_x, rtol=1e-4, **labels)


@pytest.mark.parametrize("x_dtype", [F64, I32, I64])
def test_linear_classifier_casts_features(x_dtype, target):
    rng = np.random.default_rng(6)
    run_op("LinearClassifier", target, x_dtype=x_dtype, outputs=(("label", I64), ("scores", F32)),
           coefficients=coefficients(rng, 3, 5), intercepts=[0.5, -0.5, 0.0], classlabels_ints=[1, 2, 3],
           post_transform="SOFTMAX")


@pytest.mark.parametrize("transform", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
@pytest.mark.parametrize("labels", [dict(classlabels_ints=[3, 9]), dict(classlabels_strings=["no", "yes"])],
                         ids=["ints", "strings"])
def test_linear_classifier_binary_one_row(labels, transform, target):
    """One row of coefficients and two labels: label by the score's sign, scores
    (sigmoid(-s), sigmoid(s)) under LOGISTIC, else (1 - s, s), as onnxruntime computes them."""
    rng = np.random.default_rng(7)
    label_type = object if "classlabels_strings" in labels else I64
    run_op("LinearClassifier", target, outputs=(("label", label_type), ("scores", F32)),
           coefficients=coefficients(rng, 1, 5), intercepts=[0.25], post_transform=transform, **labels)


@pytest.mark.parametrize("transform", ["NONE", "LOGISTIC", "PROBIT"])
def test_linear_classifier_one_row_without_labels(transform, target):
    """Labels 0 and 1 by the score's sign; one score column, PROBIT's alone applied."""
    make_x = (lambda r, n, c, dt: features(r, n, c, dt, 0, 1)) if transform == "PROBIT" else features
    run_op("LinearClassifier", target, outputs=(("label", I64), ("scores", F32)),
           coefficients=[0.1, 0.2, 0.05, 0.15, 0.3], intercepts=[0.05], post_transform=transform, make_x=make_x,
           rtol=1e-4)


# ----------------------------------------------------------------------------- ArrayFeatureExtractor


@pytest.mark.parametrize("x_dtype", [F32, F64, I32, I64, object])
def test_array_feature_extractor(x_dtype, target):
    """Constant 2-D indices (the flattened list picks along the last axis)."""
    rng = np.random.default_rng(10)
    model = ml_model([node("ArrayFeatureExtractor", ["x", "idx"], ["y"])], [vinfo("x", x_dtype, ["N", 6])],
                     [vinfo("y", x_dtype, None)], [const("idx", np.array([[4, 0, 4, 2]], I64))])

    def make(n):
        x = features(rng, n, 6, I64 if x_dtype is object else x_dtype)
        return x.astype(str).astype(object) if x_dtype is object else x
    check_model(model, target, [{"x": make(n)} for n in BATCHES], ref=ort_reference)


def test_array_feature_extractor_rank3_input_indices(target):
    rng = np.random.default_rng(11)
    model = ml_model([node("ArrayFeatureExtractor", ["x", "idx"], ["y"])],
                     [vinfo("x", F32, ["N", 3, 7]), vinfo("idx", I64, ["K"])], [vinfo("y", F32, None)])
    feeds = [{"x": features(rng, n * 3, 7).reshape(n, 3, 7), "idx": rng.integers(0, 7, size=k).astype(I64)}
             for n, k in ((1, 1), (4, 5), (9, 2))]
    check_model(model, target, feeds, ref=ort_reference)


def test_array_feature_extractor_of_a_vector(target):
    """skl2onnx's classifier labels: a 1-D table of classes at (N, 1) argmax indices gives
    (1, N), as onnxruntime shapes it."""
    rng = np.random.default_rng(12)
    model = ml_model([node("ArrayFeatureExtractor", ["classes", "idx"], ["y"])], [vinfo("idx", I64, ["N", 1])],
                     [vinfo("y", I32, None)], [const("classes", np.array([10, 20, 30], I32))])
    check_model(model, target, [{"idx": rng.integers(0, 3, size=(n, 1)).astype(I64)} for n in BATCHES],
                ref=ort_reference)


def test_array_feature_extractor_index_out_of_range(target):
    model = ml_model([node("ArrayFeatureExtractor", ["x", "idx"], ["y"])],
                     [vinfo("x", F32, ["N", 4]), vinfo("idx", I64, [2])], [vinfo("y", F32, None)])
    m = build(model, target)
    x = np.zeros((3, 4), F32)
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'n' \(ArrayFeatureExtractor\): index 4 is out of range"):
        m.run({"x": x, "idx": np.array([1, 4], I64)})


# ----------------------------------------------------------------------------- Normalizer, Scaler


def with_zero_row(rng, n, c, dtype):
    x = features(rng, n, c, dtype)
    x[0] = 0
    return x


@pytest.mark.parametrize("norm", ["MAX", "L1", "L2"])
@pytest.mark.parametrize("x_dtype", [F32, F64, I32, I64])
def test_normalizer(norm, x_dtype, target):
    """A zero row is left as it is; MAX divides by the max, not the largest magnitude."""
    run_op("Normalizer", target, x_dtype=x_dtype, norm=norm, make_x=with_zero_row)


@pytest.mark.parametrize("n_values", [1, 5])
@pytest.mark.parametrize("x_dtype", [F32, F64, I32, I64])
def test_scaler(n_values, x_dtype, target):
    rng = np.random.default_rng(13)
    run_op("Scaler", target, x_dtype=x_dtype, scale=[float(v) for v in rng.uniform(0.5, 2, n_values).astype(F32)],
           offset=[float(v) for v in rng.uniform(-1, 1, n_values).astype(F32)])


def test_scaler_symbolic_features_checked_at_run_time(target):
    model = ml_model([node("Scaler", ["x"], ["y"], scale=[1.0, 2.0, 3.0], offset=[0.0, 0.5, 1.0])],
                     [vinfo("x", F32, ["N", "C"])], [vinfo("y", F32, None)])
    m = build(model, target)
    x = np.ones((2, 3), F32)
    np.testing.assert_allclose(m.run({"x": x})["y"], ort_reference(model, {"x": x})["y"])
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'n' \(Scaler\)"):
        m.run({"x": np.ones((2, 4), F32)})


# ----------------------------------------------------------------------------- Binarizer, Imputer


def test_binarizer(target):
    run_op("Binarizer", target, threshold=0.5)


@pytest.mark.parametrize("x_dtype", [F64, I32, I64])
def test_binarizer_other_dtypes(x_dtype, target):
    """onnxruntime has Binarizer for float32 only: onnx.reference checks the others (an
    integer above 1.5 is one above 1)."""
    run_op("Binarizer", target, x_dtype=x_dtype, outputs=(("y", x_dtype),), ref=reference, threshold=1.5)


def with_missing(rng, n, c, dtype):
    x = features(rng, n, c, dtype)
    if np.dtype(dtype).kind == "f":
        x[:, 1] = np.nan
        x[0, 2] = 2.0
    else:
        x[:, 1] = -1
    return x


@pytest.mark.parametrize("replaced", [float("nan"), 2.0])
@pytest.mark.parametrize("n_values", [1, 5])
def test_imputer_floats(replaced, n_values, target):
    run_op("Imputer", target, make_x=with_missing, replaced_value_float=replaced,
           imputed_value_floats=[float(v) for v in np.linspace(-1, 1, n_values)])


@pytest.mark.parametrize("n_values", [1, 5])
def test_imputer_int64(n_values, target):
    run_op("Imputer", target, x_dtype=I64, outputs=(("y", I64),), make_x=with_missing, replaced_value_int64=-1,
           imputed_value_int64s=list(range(10, 10 + n_values)))


# ----------------------------------------------------------------------------- domain plumbing and refusals


def test_a_model_of_ml_ops_alone(target):
    """A model that imports no default opset, only ai.onnx.ml, compiles."""
    rng = np.random.default_rng(14)
    model = ml_model([node("Scaler", ["x"], ["y"], scale=[2.0], offset=[1.0])], [vinfo("x", F32, ["N", 3])],
                     [vinfo("y", F32, None)], opset=None)
    check_model(model, target, [{"x": features(rng, n, 3)} for n in BATCHES], ref=ort_reference)


@pytest.mark.parametrize("ml_opset", [1, 2, 3, 4, 5])
def test_ml_opsets(ml_opset, target):
    rng = np.random.default_rng(15)
    model = ml_model([node("Normalizer", ["x"], ["y"], norm="L2")], [vinfo("x", F32, ["N", 3])],
                     [vinfo("y", F32, None)], ml_opset=ml_opset)
    check_model(model, target, [{"x": features(rng, n, 3)} for n in BATCHES], ref=ort_reference)


def test_zipmap_is_refused_with_the_way_around_it():
    model = ml_model([node("ZipMap", ["x"], ["z"], classlabels_int64s=[0, 1])], [vinfo("x", F32, ["N", 2])],
                     [helper.make_value_info("z", helper.make_sequence_type_proto(
                         helper.make_map_type_proto(onnx.TensorProto.INT64, helper.make_tensor_type_proto(1, []))))])
    refused(model, r"node 'n' \(ZipMap\): op 'ZipMap' of domain 'ai.onnx.ml' is not supported: .*sequence of maps"
                   r".*options=\{'zipmap': False\}")


def test_unimplemented_ml_op_lists_those_implemented():
    model = ml_model([node("SVMRegressor", ["x"], ["y"])], [vinfo("x", F32, ["N", 2])], [vinfo("y", F32, None)])
    refused(model, r"node 'n' \(SVMRegressor\): unsupported op 'SVMRegressor' of domain 'ai.onnx.ml'; symwasm "
                   r"implements these of it: .*LinearClassifier, LinearRegressor, Normalizer")


def test_ml_op_unknown_to_the_domain():
    model = ml_model([node("NoSuchOp", ["x"], ["y"])], [vinfo("x", F32, ["N", 2])], [vinfo("y", F32, None)])
    refused(model, r"node 'n' \(NoSuchOp\): unsupported op 'NoSuchOp' of domain 'ai.onnx.ml' \(it has none at "
                   r"version 1\)")


def test_ml_opset_newer_than_onnx_knows():
    model = ml_model([node("Binarizer", ["x"], ["y"])], [vinfo("x", F32, ["N", 2])], [vinfo("y", F32, None)],
                     ml_opset=99)
    refused(model, r"node 'n' \(Binarizer\): the model imports version 99 of domain 'ai.onnx.ml'; the onnx package "
                   r"knows versions 1 to 5")


BAD = [
    ("post_transform", "LinearRegressor", dict(coefficients=[1.0, 2.0], post_transform="SIGMOID"),
     r"post_transform 'SIGMOID' is not one of NONE, LOGISTIC, SOFTMAX, SOFTMAX_ZERO, PROBIT"),
    ("coefficients", "LinearRegressor", dict(coefficients=[1.0, 2.0, 3.0], targets=1),
     r"coefficients has 3 values, 1 rows of 3; input 'x' has 2 features"),
    ("targets", "LinearRegressor", dict(coefficients=[1.0, 2.0], targets=0), r"targets 0 must be 1 or more"),
    ("intercepts", "LinearRegressor", dict(coefficients=[1.0, 2.0, 3.0, 4.0], targets=2, intercepts=[1.0]),
     r"intercepts has 1 values; it must have one per target \(2\)"),
    ("labels", "LinearClassifier", dict(coefficients=[1.0] * 6, intercepts=[0.0] * 3, classlabels_ints=[1, 2]),
     r"2 class labels for 3 rows of coefficients"),
    ("both labels", "LinearClassifier", dict(coefficients=[1.0] * 4, intercepts=[0.0] * 2, classlabels_ints=[1, 2],
                                             classlabels_strings=["a", "b"]), r"classlabels_ints and classlabels_strings"),
    ("binary probit", "LinearClassifier", dict(coefficients=[1.0, 1.0], intercepts=[0.0], classlabels_ints=[1, 2],
                                               post_transform="PROBIT"), r"post_transform PROBIT with one row"),
    ("missing coefficients", "LinearClassifier", dict(intercepts=[0.0]), r"attribute 'coefficients' is required"),
    ("unknown attribute", "Scaler", dict(scale=[1.0], offset=[0.0], shift=[1.0]),
     r"'shift' is not an attribute of Scaler-1"),
    ("scale count", "Scaler", dict(scale=[1.0, 2.0], offset=[0.0]), r"scale \(2 values\) and offset \(1\)"),
    ("per feature", "Scaler", dict(scale=[1.0, 2.0, 3.0], offset=[0.0] * 3),
     r"scale has 3 values; input 'x' has 2 features"),
    ("norm", "Normalizer", dict(norm="L3"), r"norm 'L3' is not one of MAX, L1, L2"),
    ("imputer lists", "Imputer", dict(imputed_value_floats=[1.0], imputed_value_int64s=[1]),
     r"exactly one of imputed_value_floats and imputed_value_int64s"),
    ("imputer kind", "Imputer", dict(imputed_value_int64s=[1]), r"imputed_value_int64s is given for input 'x' of dtype "
                                                                 r"float32"),
]


@pytest.mark.parametrize("op,attrs,match", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_attributes_name_node_and_op(op, attrs, match):
    model = ml_model([node(op, ["x"], ["y", "z"] if op == "LinearClassifier" else ["y"], **attrs)],
                     [vinfo("x", F32, ["N", 2])],
                     [vinfo("y", I64 if op == "LinearClassifier" else F32, None)]
                     + ([vinfo("z", F32, None)] if op == "LinearClassifier" else []))
    refused(model, rf"node 'n' \({op}\): .*{match}")


def test_bad_input_dtype_names_node_and_op():
    model = ml_model([node("Normalizer", ["x"], ["y"])], [vinfo("x", np.uint8, ["N", 2])], [vinfo("y", F32, None)])
    refused(model, r"node 'n' \(Normalizer\)")


# ----------------------------------------------------------------------------- tree ensembles


def random_trees(rng, trees, depth, features, modes=("BRANCH_LEQ",), tracks=False, integral=False):
    """nodes_* attributes of ``trees`` random trees of at most ``depth`` levels (node ids
    out of order) and the (tree, node) of each leaf."""
    attrs = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_values", "nodes_modes",
                             "nodes_truenodeids", "nodes_falsenodeids", "nodes_missing_value_tracks_true")}
    leaves = []
    for t in range(trees):
        first = len(attrs["nodes_nodeids"])
        count = [0]

        def grow(level):
            """The subtree's nodes in pre-order (each tree's root first, as exporters write
            them and as onnxruntime finds the root)."""
            me = count[0]
            count[0] += 1
            leaf = level == depth or (level > 0 and rng.random() < 0.3)
            k = len(attrs["nodes_nodeids"])
            attrs["nodes_treeids"].append(t)
            attrs["nodes_nodeids"].append(me)
            attrs["nodes_featureids"].append(0 if leaf else int(rng.integers(features)))
            threshold = float(rng.integers(-2, 3)) if integral else float(np.float32(rng.uniform(-2, 2)))
            attrs["nodes_values"].append(0.0 if leaf else threshold)
            attrs["nodes_modes"].append("LEAF" if leaf else str(rng.choice(modes)))
            attrs["nodes_missing_value_tracks_true"].append(int(tracks and rng.random() < 0.5))
            attrs["nodes_truenodeids"].append(0)
            attrs["nodes_falsenodeids"].append(0)
            if leaf:
                leaves.append((t, me))
            else:
                attrs["nodes_truenodeids"][k] = grow(level + 1)
                attrs["nodes_falsenodeids"][k] = grow(level + 1)
            return me
        grow(0)
        # the tree's ids shuffled (onnxruntime wants them below the ensemble's node count)
        renumber = rng.permutation(count[0]).tolist()
        for key in ("nodes_nodeids", "nodes_truenodeids", "nodes_falsenodeids"):
            attrs[key][first:] = [renumber[i] for i in attrs[key][first:]]
        leaves[:] = [(lt, renumber[n] if lt == t else n) for lt, n in leaves]
    if not tracks:
        del attrs["nodes_missing_value_tracks_true"]
    return attrs, leaves


def leaf_weights(rng, leaves, outputs, prefix, which=None, scale=1.0):
    """One weight per leaf and output (``which``: the outputs each leaf weighs, a function
    of the leaf's index)."""
    w = {f"{prefix}_treeids": [], f"{prefix}_nodeids": [], f"{prefix}_ids": [], f"{prefix}_weights": []}
    for k, (t, n) in enumerate(leaves):
        for out in (range(outputs) if which is None else which(k)):
            w[f"{prefix}_treeids"].append(t)
            w[f"{prefix}_nodeids"].append(n)
            w[f"{prefix}_ids"].append(out)
            w[f"{prefix}_weights"].append(float(np.float32(rng.uniform(-1, 1) * scale)))
    return w


def with_nans(rng, n, c, dtype):
    x = features(rng, n, c, dtype, -2, 2)
    x[rng.random((n, c)) < 0.2] = np.nan
    return x


def integral(rng, n, c, dtype):
    return rng.integers(-3, 4, size=(n, c)).astype(dtype)


def run_regressor(target, attrs, x_dtype=F32, c=4, make_x=features, ml_opset=1, seed=0, rtol=1e-5, atol=1e-5,
                  ref=ort_reference):
    rng = np.random.default_rng(seed)
    model = ml_model([node("TreeEnsembleRegressor", ["x"], ["y"], **attrs)], [vinfo("x", x_dtype, ["N", c])],
                     [vinfo("y", F32, None)], ml_opset=ml_opset)
    feeds = [{"x": make_x(rng, n, c, x_dtype)} for n in (1, 7, 40)]
    return check_model(model, target, feeds, rtol=rtol, atol=atol, ref=ref)


@pytest.mark.parametrize("aggregate", ["SUM", "AVERAGE", "MIN", "MAX"])
@pytest.mark.parametrize("targets", [1, 3])
def test_tree_ensemble_regressor(aggregate, targets, target):
    rng = np.random.default_rng(20)
    attrs, leaves = random_trees(rng, 6, 4, 4)
    attrs.update(leaf_weights(rng, leaves, targets, "target"), n_targets=targets, aggregate_function=aggregate,
                 base_values=[float(v) for v in rng.uniform(-1, 1, targets).astype(F32)])
    run_regressor(target, attrs)


@pytest.mark.parametrize("aggregate", ["SUM", "MIN", "MAX"])
def test_tree_ensemble_regressor_sparse_targets(aggregate, target):
    """Each leaf weighs one of three targets: under MIN and MAX a target no reached leaf
    weighs is 0."""
    rng = np.random.default_rng(21)
    attrs, leaves = random_trees(rng, 3, 3, 4)
    attrs.update(leaf_weights(rng, leaves, 3, "target", which=lambda k: [k % 3]), n_targets=3,
                 aggregate_function=aggregate)
    run_regressor(target, attrs)


@pytest.mark.parametrize("transform", ["LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"])
def test_tree_ensemble_regressor_post_transforms(transform, target):
    rng = np.random.default_rng(22)
    targets = 1 if transform == "PROBIT" else 3
    attrs, leaves = random_trees(rng, 4, 3, 4)
    # PROBIT's one target: averaged weights in (0, 1)
    weights = leaf_weights(rng, leaves, targets, "target", scale=1.0)
    if transform == "PROBIT":
        weights["target_weights"] = [float(np.float32(0.1 + 0.8 * abs(w))) for w in weights["target_weights"]]
    attrs.update(weights, n_targets=targets, post_transform=transform,
                 aggregate_function="AVERAGE" if transform == "PROBIT" else "SUM")
    # onnxruntime's erfinv loses digits near 0.5 to cancellation in float32 (its sqrt(v*v -
    # w) - v), so a different rounding of the average or the log moves it by ~1e-4 there
    run_regressor(target, attrs, rtol=1e-4, atol=1e-3 if transform == "PROBIT" else 1e-5)


@pytest.mark.parametrize("modes", [("BRANCH_LT",), ("BRANCH_GTE",), ("BRANCH_GT",), ("BRANCH_EQ",), ("BRANCH_NEQ",),
                                   ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ")],
                         ids=["LT", "GTE", "GT", "EQ", "NEQ", "mixed"])
def test_tree_ensemble_modes(modes, target):
    """Integer-valued features and thresholds, so equality decides branches."""
    rng = np.random.default_rng(23)
    attrs, leaves = random_trees(rng, 5, 4, 3, modes=modes, integral=True)
    attrs.update(leaf_weights(rng, leaves, 1, "target"), n_targets=1)
    run_regressor(target, attrs, c=3, make_x=integral)


@pytest.mark.parametrize("modes", [("BRANCH_LEQ",), ("BRANCH_LEQ", "BRANCH_GT", "BRANCH_NEQ")], ids=["LEQ", "mixed"])
def test_tree_ensemble_missing_values(modes, target):
    """NaN features: the nodes that track them to the true branch take it; the others
    compare (false, but for NEQ)."""
    rng = np.random.default_rng(24)
    attrs, leaves = random_trees(rng, 5, 4, 3, modes=modes, tracks=True)
    attrs.update(leaf_weights(rng, leaves, 2, "target"), n_targets=2)
    run_regressor(target, attrs, c=3, make_x=with_nans)


@pytest.mark.parametrize("x_dtype", [F64, I32, I64])
def test_tree_ensemble_feature_dtypes(x_dtype, target):
    """onnxruntime has float and double kernels only (and onnx.reference gives integer
    outputs): integer features are checked against onnxruntime's float32 kernel on the same
    values as float32, which is what its C++ comparisons of an integer with a float threshold
    compare."""
    rng = np.random.default_rng(25)
    attrs, leaves = random_trees(rng, 4, 4, 4, integral=True)
    attrs.update(leaf_weights(rng, leaves, 1, "target"), n_targets=1)
    as_float = ml_model([node("TreeEnsembleRegressor", ["x"], ["y"], **attrs)], [vinfo("x", F32, ["N", 4])],
                        [vinfo("y", F32, None)])

    def ref(model, feeds):
        if x_dtype == F64:
            return ort_reference(model, feeds)
        return ort_reference(as_float, {"x": feeds["x"].astype(F32)})
    run_regressor(target, attrs, x_dtype=x_dtype, make_x=integral if x_dtype != F64 else features, ref=ref)


def test_tree_ensemble_float64_compares_without_rounding(target):
    """A float64 feature just above a threshold stays above it (rounded to float32 it would
    equal it)."""
    attrs = dict(nodes_treeids=[0, 0, 0], nodes_nodeids=[0, 1, 2], nodes_featureids=[0, 0, 0],
                 nodes_values=[0.5, 0.0, 0.0], nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"],
                 nodes_truenodeids=[1, 0, 0], nodes_falsenodeids=[2, 0, 0], target_treeids=[0, 0],
                 target_nodeids=[1, 2], target_ids=[0, 0], target_weights=[-1.0, 1.0], n_targets=1)
    model = ml_model([node("TreeEnsembleRegressor", ["x"], ["y"], **attrs)], [vinfo("x", F64, ["N", 1])],
                     [vinfo("y", F32, None)])
    x = np.array([[0.5], [0.5 + 1e-12], [0.5 - 1e-12]], F64)
    check_model(model, target, [{"x": x}, {"x": x[1:]}], ref=ort_reference)


def test_tree_ensemble_single_leaf_trees(target):
    """Trees that are one leaf (no comparison at all)."""
    attrs = dict(nodes_treeids=[0, 1, 1, 1], nodes_nodeids=[0, 0, 1, 2], nodes_featureids=[0, 2, 0, 0],
                 nodes_values=[0.0, 0.25, 0.0, 0.0], nodes_modes=["LEAF", "BRANCH_LT", "LEAF", "LEAF"],
                 nodes_truenodeids=[0, 1, 0, 0], nodes_falsenodeids=[0, 2, 0, 0], target_treeids=[0, 1, 1],
                 target_nodeids=[0, 1, 2], target_ids=[0, 0, 0], target_weights=[0.5, -1.0, 2.0], n_targets=1)
    model = ml_model([node("TreeEnsembleRegressor", ["x"], ["y"], **attrs)], [vinfo("x", F32, ["N", 3])],
                     [vinfo("y", F32, None)], ml_opset=3)
    check_model(model, target, [{"x": np.array([[0, 0, v]] * n, F32)} for n, v in ((1, 0.0), (3, 0.5))],
                ref=ort_reference)


def test_random_forest_from_scikit_learn(target):
    """A scikit-learn RandomForestRegressor's trees written as skl2onnx writes them (BRANCH_LEQ,
    each leaf's value divided by the tree count, SUM), against onnxruntime and scikit-learn."""
    from sklearn.ensemble import RandomForestRegressor

    rng = np.random.default_rng(26)
    x_train = rng.standard_normal((200, 5)).astype(F32)
    y_train = x_train[:, 0] * 2 - x_train[:, 3] + rng.standard_normal(200) * 0.1
    forest = RandomForestRegressor(n_estimators=10, max_depth=6, random_state=0).fit(x_train, y_train)
    attrs = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_values", "nodes_modes",
                             "nodes_truenodeids", "nodes_falsenodeids", "target_treeids", "target_nodeids",
                             "target_ids", "target_weights")}
    for t, estimator in enumerate(forest.estimators_):
        tree = estimator.tree_
        for k in range(tree.node_count):
            leaf = tree.children_left[k] == -1
            attrs["nodes_treeids"].append(t)
            attrs["nodes_nodeids"].append(k)
            attrs["nodes_featureids"].append(0 if leaf else int(tree.feature[k]))
            attrs["nodes_values"].append(0.0 if leaf else float(tree.threshold[k]))
            attrs["nodes_modes"].append("LEAF" if leaf else "BRANCH_LEQ")
            attrs["nodes_truenodeids"].append(0 if leaf else int(tree.children_left[k]))
            attrs["nodes_falsenodeids"].append(0 if leaf else int(tree.children_right[k]))
            if leaf:
                attrs["target_treeids"].append(t)
                attrs["target_nodeids"].append(k)
                attrs["target_ids"].append(0)
                attrs["target_weights"].append(float(tree.value[k].ravel()[0] / len(forest.estimators_)))
    attrs["n_targets"] = 1
    m = run_regressor(target, attrs, c=5, seed=27, rtol=1e-5)
    x = rng.standard_normal((50, 5)).astype(F32)
    np.testing.assert_allclose(m.run({"x": x})["y"][:, 0], forest.predict(x), rtol=1e-4, atol=1e-4)


def run_classifier(target, attrs, labels, c=4, make_x=features, seed=0, atol=1e-5):
    rng = np.random.default_rng(seed)
    strings = labels.dtype == object
    attrs = dict(attrs, **{"classlabels_strings" if strings else "classlabels_int64s": labels.tolist()})
    model = ml_model([node("TreeEnsembleClassifier", ["x"], ["label", "scores"], **attrs)],
                     [vinfo("x", F32, ["N", c])], [vinfo("label", object if strings else I64, None),
                                                   vinfo("scores", F32, None)], ml_opset=3)
    feeds = [{"x": make_x(rng, n, c, F32)} for n in (1, 7, 40)]
    return check_model(model, target, feeds, rtol=1e-5, atol=atol, ref=ort_reference)


CLASS_LABELS = {"ints": np.array([7, -2, 5, 0], I64), "range": np.arange(4, dtype=I64),
                "strings": np.array(["cat", "dog", "", "émeu"], object)}


@pytest.mark.parametrize("transform", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
@pytest.mark.parametrize("labels", list(CLASS_LABELS))
def test_tree_ensemble_classifier_forest(labels, transform, target):
    """A random forest's form: every leaf weighs every class."""
    rng = np.random.default_rng(30)
    attrs, leaves = random_trees(rng, 5, 4, 4)
    attrs.update(leaf_weights(rng, leaves, 4, "class"), post_transform=transform)
    run_classifier(target, attrs, CLASS_LABELS[labels])


@pytest.mark.parametrize("base", [0, 4])
def test_tree_ensemble_classifier_boosting(base, target):
    """Gradient boosting's form: each tree weighs one class; base values or none."""
    rng = np.random.default_rng(31)
    attrs, leaves = random_trees(rng, 8, 3, 4)
    attrs.update(leaf_weights(rng, leaves, 4, "class", which=lambda k: [leaves[k][0] % 4]), post_transform="SOFTMAX")
    if base:
        attrs["base_values"] = [float(v) for v in rng.uniform(-1, 1, base).astype(F32)]
    run_classifier(target, attrs, CLASS_LABELS["ints"])


def test_tree_ensemble_classifier_sparse_leaves(target):
    """Each leaf weighs a random subset of the classes: a class no reached leaf weighs is
    never the label, whatever its score (0) against negative ones."""
    rng = np.random.default_rng(32)
    attrs, leaves = random_trees(rng, 2, 3, 4)
    subsets = [sorted(rng.choice(4, size=int(rng.integers(1, 3)), replace=False).tolist()) for _ in leaves]
    weights = leaf_weights(rng, leaves, 4, "class", which=lambda k: subsets[k])
    weights["class_weights"] = [-abs(w) for w in weights["class_weights"]]
    attrs.update(weights)
    run_classifier(target, attrs, CLASS_LABELS["ints"])


BINARY = [
    # (name, classes weighed on every leaf, weights' sign, base values, post transform)
    ("forest", (0, 1), "positive", [], "NONE"),
    ("forest-base2", (0, 1), "mixed", [0.25, -0.5], "NONE"),
    ("class1-positive", (1,), "positive", [], "NONE"),
    ("class1-mixed-logistic", (1,), "mixed", [], "LOGISTIC"),
    ("class1-mixed-softmax-base2", (1,), "mixed", [0.1, 0.3], "SOFTMAX"),
    ("class0-positive", (0,), "positive", [], "NONE"),
    ("class0-mixed", (0,), "mixed", [], "NONE"),
    ("class1-positive-base2-logistic", (1,), "positive", [0.1, 0.3], "LOGISTIC"),
    ("class0-positive-softmax", (0,), "positive", [], "SOFTMAX"),
    ("class0-mixed-base2", (0,), "mixed", [0.2, -0.4], "NONE"),
    ("class0-mixed-logistic-base2", (0,), "mixed", [0.2, -0.4], "LOGISTIC"),
]


@pytest.mark.parametrize("labels", [np.array([3, 9], I64), np.array(["no", "yes"], object)], ids=["ints", "strings"])
@pytest.mark.parametrize("classes,sign,base,transform", [b[1:] for b in BINARY], ids=[b[0] for b in BINARY])
def test_tree_ensemble_classifier_binary(classes, sign, base, transform, labels, target):
    """onnxruntime's binary rules, each form its exporters write (one class id: gradient
    boosting and skl2onnx's binary forests; both: a forest written for two classes)."""
    rng = np.random.default_rng(33)
    attrs, leaves = random_trees(rng, 4, 3, 4)
    weights = leaf_weights(rng, leaves, 2, "class", which=lambda k: classes)
    if sign == "positive":
        weights["class_weights"] = [abs(w) / 2 for w in weights["class_weights"]]
    attrs.update(weights, post_transform=transform)
    if base:
        attrs["base_values"] = base
    run_classifier(target, attrs, labels)


def tree_model(op="TreeEnsembleRegressor", ml_opset=3, **changes):
    attrs = dict(nodes_treeids=[0, 0, 0], nodes_nodeids=[0, 1, 2], nodes_featureids=[0, 0, 0],
                 nodes_values=[0.5, 0.0, 0.0], nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"],
                 nodes_truenodeids=[1, 0, 0], nodes_falsenodeids=[2, 0, 0])
    prefix = "target" if op == "TreeEnsembleRegressor" else "class"
    attrs.update({f"{prefix}_treeids": [0, 0], f"{prefix}_nodeids": [1, 2], f"{prefix}_ids": [0, 0],
                  f"{prefix}_weights": [-1.0, 1.0]})
    attrs.update(dict(n_targets=1) if prefix == "target" else dict(classlabels_int64s=[0, 1]))
    attrs.update(changes)
    attrs = {k: v for k, v in attrs.items() if v is not None}
    outputs = ["y"] if prefix == "target" else ["label", "y"]
    return ml_model([node(op, ["x"], outputs, **attrs)], [vinfo("x", F32, ["N", 2])],
                    [vinfo(o, F32 if o == "y" else I64, None) for o in outputs], ml_opset=ml_opset)


TREE_ERRORS = [
    ("cycle", dict(nodes_modes=["BRANCH_LEQ"] * 3, nodes_truenodeids=[1, 2, 1], nodes_falsenodeids=[2, 2, 1]),
     r"node 1 of tree 0 leads back to node 2 of tree 0: a tree cannot loop"),
    ("missing child", dict(nodes_truenodeids=[5, 0, 0]), r"its true child, node 5, is not a node of the tree"),
    ("own child", dict(nodes_falsenodeids=[0, 0, 0]), r"node 0 of tree 0 is its own false child"),
    ("leaf without weight", dict(target_nodeids=[1, 1], target_ids=[0, 0]),
     r"leaf 1 of tree 0 has two weights for target 0"),
    ("bare leaf", dict(target_treeids=[0], target_nodeids=[1], target_ids=[0], target_weights=[1.0]),
     r"leaf 2 of tree 0 has no weight"),
    ("target id", dict(target_ids=[0, 1]), r"target_ids has 1; the ensemble has 1 targets"),
    ("feature", dict(nodes_featureids=[2, 0, 0]), r"a node reads feature 2; input 'x' has 2 features"),
    ("mode", dict(nodes_modes=["BRANCH_LE", "LEAF", "LEAF"]), r"nodes_modes has 'BRANCH_LE'"),
    ("lengths", dict(nodes_values=[0.5, 0.0]), r"nodes_values has 2 values; nodes_treeids has 3"),
    ("root first", dict(nodes_nodeids=[1, 0, 2], nodes_truenodeids=[0, 1, 0], nodes_falsenodeids=[0, 2, 0],
                        nodes_modes=["LEAF", "BRANCH_LEQ", "LEAF"], target_nodeids=[1, 2]),
     r"tree 0 does not start with its root: its first node, node 1, is a child"),
    ("as tensor", dict(nodes_values=None, nodes_values_as_tensor=onnx.numpy_helper.from_array(
        np.array([0.5, 0, 0], F64))), r"nodes_values_as_tensor \(double-precision thresholds and weights\) is not"),
    ("n_targets", dict(n_targets=None), r"n_targets None must be given"),
    ("aggregate", dict(aggregate_function="MEDIAN"), r"aggregate_function 'MEDIAN' is not one of SUM, AVERAGE"),
]


@pytest.mark.parametrize("changes,match", [e[1:] for e in TREE_ERRORS], ids=[e[0] for e in TREE_ERRORS])
def test_tree_ensemble_errors_name_node_and_op(changes, match):
    refused(tree_model(**changes), rf"node 'n' \(TreeEnsembleRegressor\): .*{match}")


CLASSIFIER_ERRORS = [
    ("class on some leaves", dict(class_ids=[0, 1]), r"class 0 has weights on some leaves and not on others"),
    ("probit", dict(post_transform="PROBIT"), r"post_transform PROBIT with class 1 on no leaf"),
    ("one class", dict(classlabels_int64s=[4]), r"1 class label; a classifier needs two or more"),
    ("base values", dict(base_values=[0.5]), r"base_values has 1 values; it must have one per class \(2\)"),
    ("no labels", dict(classlabels_int64s=None), r"exactly one of classlabels_int64s and classlabels_strings"),
]


@pytest.mark.parametrize("changes,match", [e[1:] for e in CLASSIFIER_ERRORS], ids=[e[0] for e in CLASSIFIER_ERRORS])
def test_tree_ensemble_classifier_errors_name_node_and_op(changes, match):
    refused(tree_model("TreeEnsembleClassifier", **changes), rf"node 'n' \(TreeEnsembleClassifier\): .*{match}")


def test_tree_ensemble_version_5_is_refused_by_version():
    """ml opset 5 replaced the tree ensembles by TreeEnsemble; their version 5 is refused
    naming the versions implemented."""
    refused(tree_model(ml_opset=5), r"node 'n' \(TreeEnsembleRegressor\): TreeEnsembleRegressor version 5 \(in effect "
                                    r"at 'ai.onnx.ml' opset 5\) is not supported; symwasm implements versions 1, 3")


# ----------------------------------------------------------------------------- TreeEnsemble (ml opset 5)


def as_tree_ensemble(attrs, targets, dtype, aggregate="SUM", transform="NONE"):
    """TreeEnsemble's attributes for the trees of ``attrs`` (random_trees' nodes, one weight
    per leaf): interior nodes and leaves listed apart, branches flagged as leading to a leaf."""
    from toolkit.frontend.onnx.ops.ml import AGGREGATES_V5, MODES_V5, POST_TRANSFORMS_V5

    keys = list(zip(attrs["nodes_treeids"], attrs["nodes_nodeids"]))
    is_leaf = [m == "LEAF" for m in attrs["nodes_modes"]]
    interior = {key: k for k, key in enumerate(key for key, leaf in zip(keys, is_leaf) if not leaf)}
    weight_of = {(t, n): (i, w) for t, n, i, w in zip(attrs["target_treeids"], attrs["target_nodeids"],
                                                      attrs["target_ids"], attrs["target_weights"])}
    leaf_index = {key: k for k, key in enumerate(key for key, leaf in zip(keys, is_leaf) if leaf)}
    out = {k: [] for k in ("nodes_featureids", "nodes_truenodeids", "nodes_falsenodeids", "nodes_trueleafs",
                           "nodes_falseleafs", "nodes_missing_value_tracks_true")}
    splits, modes = [], []
    for k, (key, leaf) in enumerate(zip(keys, is_leaf)):
        if leaf:
            continue
        out["nodes_featureids"].append(attrs["nodes_featureids"][k])
        splits.append(attrs["nodes_values"][k])
        modes.append(MODES_V5.index(attrs["nodes_modes"][k]))
        for which in ("true", "false"):
            child = (key[0], attrs[f"nodes_{which}nodeids"][k])
            out[f"nodes_{which}leafs"].append(int(child in leaf_index))
            out[f"nodes_{which}nodeids"].append(leaf_index[child] if child in leaf_index else interior[child])
        out["nodes_missing_value_tracks_true"].append(attrs.get("nodes_missing_value_tracks_true", [0] * len(keys))[k])
    leaves = sorted(leaf_index, key=leaf_index.get)
    roots = sorted({interior[key] for key in keys if key in interior and key == keys[attrs["nodes_treeids"].index(key[0])]})
    return dict(out, nodes_splits=onnx.numpy_helper.from_array(np.array(splits, dtype)),
                nodes_modes=onnx.numpy_helper.from_array(np.array(modes, np.uint8)),
                leaf_targetids=[weight_of[key][0] for key in leaves],
                leaf_weights=onnx.numpy_helper.from_array(np.array([weight_of[key][1] for key in leaves], dtype)),
                tree_roots=roots, n_targets=targets, aggregate_function=AGGREGATES_V5.index(aggregate),
                post_transform=POST_TRANSFORMS_V5.index(transform))


def run_tree_ensemble(target, attrs, dtype=F32, c=4, make_x=features, rtol=1e-5, atol=1e-5):
    rng = np.random.default_rng(40)
    model = ml_model([node("TreeEnsemble", ["x"], ["y"], **attrs)], [vinfo("x", dtype, ["N", c])],
                     [vinfo("y", dtype, None)], ml_opset=5, opset=21)
    feeds = [{"x": make_x(rng, n, c, dtype)} for n in (1, 7, 40)]
    return check_model(model, target, feeds, rtol=rtol, atol=atol, ref=ort_reference)


@pytest.mark.parametrize("aggregate", ["SUM", "AVERAGE", "MIN", "MAX"])
@pytest.mark.parametrize("dtype", [F32, F64])
def test_tree_ensemble_v5(aggregate, dtype, target):
    rng = np.random.default_rng(41)
    attrs, leaves = random_trees(rng, 6, 4, 4, modes=("BRANCH_LEQ", "BRANCH_GT", "BRANCH_NEQ"), tracks=True)
    attrs.update(leaf_weights(rng, leaves, 3, "target", which=lambda k: [k % 3]))
    run_tree_ensemble(target, as_tree_ensemble(attrs, 3, dtype, aggregate), dtype, make_x=with_nans)


@pytest.mark.parametrize("transform", ["SOFTMAX_ZERO"])
def test_tree_ensemble_v5_post_transforms(transform, target):
    rng = np.random.default_rng(42)
    attrs, leaves = random_trees(rng, 4, 3, 4)
    attrs.update(leaf_weights(rng, leaves, 2, "target", which=lambda k: [k % 2]))
    run_tree_ensemble(target, as_tree_ensemble(attrs, 2, F32, transform=transform))


def test_tree_ensemble_v5_probit(target):
    """One target, averaged weights in (0, 1) (see the regressor's PROBIT test for atol)."""
    rng = np.random.default_rng(44)
    attrs, leaves = random_trees(rng, 4, 3, 4)
    weights = leaf_weights(rng, leaves, 1, "target")
    weights["target_weights"] = [float(np.float32(0.1 + 0.8 * abs(w))) for w in weights["target_weights"]]
    attrs.update(weights)
    run_tree_ensemble(target, as_tree_ensemble(attrs, 1, F32, "AVERAGE", "PROBIT"), rtol=1e-4, atol=1e-3)


def test_tree_ensemble_v5_refusals():
    rng = np.random.default_rng(43)
    attrs, leaves = random_trees(rng, 2, 2, 2)
    attrs.update(leaf_weights(rng, leaves, 1, "target"))
    good = as_tree_ensemble(attrs, 1, F32)
    for changes, match in [
        (dict(nodes_modes=onnx.numpy_helper.from_array(np.full(len(good["nodes_featureids"]), 6, np.uint8)),
              membership_values=onnx.numpy_helper.from_array(np.array([1.0, np.nan] * 9, F32))),
         r"BRANCH_MEMBER nodes \(set membership"),
        (dict(nodes_splits=onnx.numpy_helper.from_array(np.zeros(len(good["nodes_featureids"]), F64))),
         r"nodes_splits has dtype float64; input 'x' is float32"),
        (dict(aggregate_function=7), r"aggregate_function 7 is not one of 0 \(AVERAGE\)"),
        # onnxruntime 1.32 reads post_transform 1 as LOGISTIC and 2 as SOFTMAX, against the spec
        (dict(post_transform=1), r"post_transform 1 \(SOFTMAX in the ONNX spec\) is not supported: onnxruntime "
                                 r"reads 1 as LOGISTIC"),
        (dict(post_transform=2), r"post_transform 2 \(LOGISTIC in the ONNX spec\) is not supported"),
        (dict(tree_roots=[99]), r"tree_roots \[99\] must name one interior node or more"),
        (dict(nodes_truenodeids=[99] * len(good["nodes_featureids"])), r"node 0's true branch, .* 99, does not exist"),
    ]:
        model = ml_model([node("TreeEnsemble", ["x"], ["y"], **dict(good, **changes))], [vinfo("x", F32, ["N", 2])],
                         [vinfo("y", F32, None)], ml_opset=5, opset=21)
        refused(model, rf"node 'n' \(TreeEnsemble\): .*{match}")
