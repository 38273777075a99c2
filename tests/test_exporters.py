"""The zoo of models from other exporters (tests/models/exporters/, built by
tests/models/exporters/generate.py): skl2onnx, spox, onnxscript, tf2onnx, paddle2onnx,
onnxruntime's quantizers and transformer optimizer, and models that pip packages ship in their
wheels (PP-OCR, magika, silero-vad).

Each model is compiled unmodified, once per target, and run at every binding of its dynamic dims
the manifest lists, against onnxruntime's outputs stored beside it. What symwasm cannot do yet
is listed in the manifest's ``known_failures`` with the reason, and runs as a strict xfail: a fix
shows up as an XPASS that fails the suite until the entry is removed
(tests/models/exporters/survey.py rewrites the list).
"""
from __future__ import annotations

import collections
import hashlib
import json
import re
from pathlib import Path

import numpy as np
import onnx
import pytest

from toolkit import backend
from util import assert_like_stored

pytestmark = [pytest.mark.check, pytest.mark.facts]  # make check and the full tier: whole models of ten exporters, compiled per target (conftest.SPREAD)

HERE = Path(__file__).resolve().parent / "models" / "exporters"
MANIFEST = json.loads((HERE / "exporters.json").read_text())
MODELS, KNOWN = MANIFEST["models"], MANIFEST["known_failures"]
TARGETS = ("wasm32", "native")


def known_failure(name: str, target: str) -> str | None:
    """The recorded reason ``name`` fails on ``target``, if it does: an entry is one reason for
    every target, or a reason per target."""
    entry = KNOWN.get(name)
    return entry.get(target) if isinstance(entry, dict) else entry


def check_model(name: str, target: str) -> None:
    """Compiles the model once and compares every binding with onnxruntime's stored outputs."""
    info = MODELS[name]
    arrays = np.load(HERE / f"{name}.npz")
    rep = backend.prepare(onnx.load(HERE / info["file"]), target=target)
    try:
        for k, binding in enumerate(info["bindings"]):
            got = rep.run({i: arrays[f"{k}/in/{i}"] for i in info["inputs"]})
            assert len(got) == len(info["outputs"]), f"{name}: {len(got)} outputs, onnxruntime gives {len(info['outputs'])}"
            for out, g in zip(info["outputs"], got):
                w = arrays[f"{k}/out/{out}"]
                assert_like_stored(g, w, info, out, f"{name} {out} at {binding}")
    finally:
        rep.close()


def _cases():
    for name in MODELS:
        for target in TARGETS:
            reason = known_failure(name, target)
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            yield pytest.param(name, target, marks=marks, id=f"{name}-{target}")


@pytest.mark.parametrize("name, target", list(_cases()))
def test_exporter_model(name, target):
    check_model(name, target)


def test_the_manifest_matches_the_files():
    """Every model is the file the manifest describes, with its dynamic dims unbound in it, two
    or more bindings, and the package and license of a model taken from a wheel."""
    for name, info in MODELS.items():
        data = (HERE / info["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == info["sha256"], f"{name}: file differs from the manifest"
        m = onnx.load_from_string(data)
        free = [d for i in m.graph.input if i.name in info["inputs"] for d in i.type.tensor_type.shape.dim
                if not d.HasField("dim_value") or d.dim_value <= 0]
        assert free, f"{name}: no dynamic input dims in the file"
        assert len(info["bindings"]) >= 2, name
        assert info["exporter"] and info["exporter_version"], name
        if "package" in info:
            assert info["license"] and info["package_version"], name
    assert set(KNOWN) <= set(MODELS), set(KNOWN) - set(MODELS)
    total = sum((HERE / f).stat().st_size for f in [i["file"] for i in MODELS.values()] + [f"{n}.npz" for n in MODELS])
    assert total < 30e6, f"the exporters' zoo is {total / 1e6:.1f} MB: keep it small"


def test_models_per_exporter():
    """Counts the models per producer, as the files name it (paddle2onnx 2.1 and onnxscript leave
    producer_name empty: then the exporter's name), and how many are expected to pass."""
    counts: collections.Counter[str] = collections.Counter()
    passing: collections.Counter[str] = collections.Counter()
    for name, info in MODELS.items():
        m = onnx.load(HERE / info["file"], load_external_data=False)
        producer = m.producer_name or f"({re.split(r'[. ]', info['exporter'])[0]}, no producer_name)"
        counts[producer] += 1
        passing[producer] += all(known_failure(name, t) is None for t in TARGETS)
    print("\nmodels per producer (passing on every target / all):")
    for producer, n in counts.most_common():
        print(f"  {producer:40s} {passing[producer]:3d} / {n}")
    assert sum(counts.values()) == len(MODELS)
    assert len(counts) >= 6, counts
