"""The onnx wheel's light models (opset 9 exports of AlexNet, DenseNet-121, Inception v1/v2,
ResNet-50, ShuffleNet, SqueezeNet, VGG-19, ZFNet-512 with small random weights), on both
targets, through toolkit.backend:

- as shipped: compiled unmodified, run on the input onnx's backend test runner generates
  for them (Runner.generate_dummy_data), compared with the output stored in the wheel;
- with a symbolic batch: the input's (and outputs') batch dim renamed to ``N``, compiled
  once, run at batch 1 and 3 against onnxruntime on the same input. Seven of the nine
  flatten with a constant Reshape target that says batch 1 (``(1, 9216)``); as shipped,
  batch 3 is then refused at run time naming that Reshape (checked), so the batch entry of
  those targets is rewritten to 0 ("copy the input's dim"), as an exporter with a dynamic
  batch axis writes it.

`make test` runs two of them (the quickest to compile); `make conformance` runs all nine
(SYMWASM_LIGHT=all).
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from onnx.backend.test.runner import Runner

import wasm_runtime
from toolkit import backend
from util import ort_reference

pytestmark = pytest.mark.check  # make check and the full tier: whole models, compiled per target (conftest.SPREAD)

DATA = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
ALL = sorted(p.stem for p in DATA.glob("light_*.onnx"))
FAST = ["light_squeezenet", "light_zfnet512"]
MODELS = ALL if os.environ.get("SYMWASM_LIGHT") == "all" else FAST


def _load(name: str) -> tuple[onnx.ModelProto, onnx.ValueInfoProto]:
    m = onnx.load(DATA / f"{name}.onnx")
    inits = {i.name for i in m.graph.initializer}
    (x,) = [i for i in m.graph.input if i.name not in inits]
    return m, x


def test_all_nine_are_shipped():
    assert len(ALL) == 9, ALL


@pytest.mark.parametrize("name", MODELS)
def test_as_shipped(name, target):
    m, x = _load(name)
    assert m.opset_import[0].version < 13  # the old-opset forms are what this checks
    feed = Runner.generate_dummy_data(x, seed=0, name=name, random=False)
    want = numpy_helper.to_array(onnx.load_tensor(DATA / f"{name}_output_0.pb"))
    rep = backend.prepare(m, target=target)
    try:
        (got,) = rep.run([feed])
    finally:
        rep.close()
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-5)


def symbolic_batch(m: onnx.ModelProto, x: onnx.ValueInfoProto, fix_reshapes: bool = True) -> onnx.ModelProto:
    m = onnx.ModelProto.FromString(m.SerializeToString())
    del m.graph.value_info[:]  # intermediate shapes recorded at batch 1
    for v in [i for i in m.graph.input if i.name == x.name] + list(m.graph.output):
        d = v.type.tensor_type.shape.dim[0]
        d.ClearField("dim_value")
        d.dim_param = "N"
    if fix_reshapes:
        targets = {n.input[1] for n in m.graph.node if n.op_type == "Reshape"}
        for init in m.graph.initializer:
            if init.name in targets:
                shape = numpy_helper.to_array(init).copy()
                if shape.size and shape[0] == 1:
                    shape[0] = 0
                    init.CopyFrom(numpy_helper.from_array(shape, init.name))
    return m


def test_batch_one_reshape_refuses_batch_three():
    """A constant Reshape target of batch 1 under a symbolic batch: batch 3 is an error
    naming the Reshape and the element counts, never a wrong answer (ZFNet-512)."""
    m, x = _load("light_zfnet512")
    rep = backend.prepare(symbolic_batch(m, x, fix_reshapes=False), target="native")
    shape = [d.dim_value for d in x.type.tensor_type.shape.dim][1:]
    try:
        rep.run({x.name: np.zeros((1, *shape), np.float32)})
        with pytest.raises(wasm_runtime.ModelError, match=r"\(Reshape\): reshape of .* to \(1, 18432\): element count"):
            rep.run({x.name: np.zeros((3, *shape), np.float32)})
    finally:
        rep.close()


@pytest.mark.parametrize("name", MODELS)
def test_symbolic_batch(name, target):
    m, x = _load(name)
    m = symbolic_batch(m, x)
    rep = backend.prepare(m, target=target)
    rng = np.random.default_rng(0)
    shape = [d.dim_value for d in x.type.tensor_type.shape.dim][1:]
    try:
        for n in (1, 3):
            feed = rng.standard_normal((n, *shape)).astype(np.float32)
            (got,) = rep.run({x.name: feed})
            want = ort_reference(m, {x.name: feed})[m.graph.output[0].name]
            assert got.shape[0] == n
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-5)
    finally:
        rep.close()
