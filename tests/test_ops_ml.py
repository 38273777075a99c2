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
