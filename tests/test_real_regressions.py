"""Failures seen on real exported models, in small form (tests/models/regressions/, copied
from shared/regressions/): each model compiled unmodified once per target and run on every
stored case against onnxruntime's outputs."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

import wasm_runtime
from toolkit.compiler import compile_model
from util import _TMP

pytestmark = [pytest.mark.check, pytest.mark.facts]  # make check and the full tier: the shared regressions' real graphs (conftest.SPREAD)

HERE = Path(__file__).resolve().parent / "models" / "regressions"
MODELS = sorted(p.stem for p in HERE.glob("*.onnx"))


@pytest.mark.parametrize("name", MODELS)
def test_real_regression(name, target):
    model = HERE / f"{name}.onnx"
    data = np.load(HERE / f"{name}.npz")
    graph = onnx.load(model).graph
    out = _TMP / f"regression_{name}{'.so' if target == 'native' else '.wasm'}"
    compile_model(model, out, target=target)
    mod = wasm_runtime.load(out)
    cases = sorted({k.split(".", 1)[0] for k in data.files})
    assert len(cases) >= 2
    for case in cases:
        got = mod.run({i.name: data[f"{case}.{i.name}"] for i in graph.input})
        for o in graph.output:
            want = data[f"{case}.{o.name}"]
            assert got[o.name].shape == want.shape, f"{case} {o.name}"
            # reshape_zero_trunk's randomized trunk overflows to NaN in onnxruntime too
            np.testing.assert_allclose(got[o.name], want, rtol=1e-3, atol=1e-4, equal_nan=True,
                                       err_msg=f"{case} {o.name}")
