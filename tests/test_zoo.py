"""The zoo of real exported models (tests/models/zoo/, built by tests/models/generate.py):
BERT and GPT-2 from transformers, a Llama decoder step with grouped-query attention and a KV
cache, Whisper's encoder and its decoder step with self- and cross-attention caches, CLIP's
two towers, DETR with a pixel mask, wav2vec2 over raw audio, ViT, ResNet-18, MobileNetV3,
an EfficientNet block, a U-Net, a YOLO-style head with NonMaxSuppression, a Conv+LSTM
speech model and a GRU model, exported by torch.onnx at opsets 11, 13 and 17 (and the
torch.export exporter at 18), plus onnxruntime's dynamic and static int8 quantizations.

Each model is compiled unmodified, once per target, and run at every binding of its dynamic
dims the manifest lists, against onnxruntime's outputs stored beside it. The quantized models
are also checked against onnx.reference, computed here.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from toolkit import backend
from util import assert_like_stored

pytestmark = [pytest.mark.check, pytest.mark.facts]  # make check and the full tier: whole exported models, compiled per target (conftest.SPREAD)

ZOO = Path(__file__).resolve().parent / "models" / "zoo"
MANIFEST = json.loads((ZOO / "zoo.json").read_text())


def _binding(name: str, k: int) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    """The inputs of binding ``k`` and onnxruntime's outputs on them, as stored."""
    arrays = np.load(ZOO / f"{name}.npz")
    return ({i: arrays[f"{k}/in/{i}"] for i in MANIFEST[name]["inputs"]},
            [arrays[f"{k}/out/{o}"] for o in MANIFEST[name]["outputs"]])


def test_the_zoo_is_what_the_issue_asks_for():
    """Exporters, opsets and architectures, read from the files themselves."""
    opsets, producers = set(), set()
    for name, info in MANIFEST.items():
        data = (ZOO / info["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == info["sha256"], f"{name}: file differs from the manifest"
        m = onnx.load_from_string(data)
        opsets.add(max(o.version for o in m.opset_import if o.domain in ("", "ai.onnx")))
        producers.add(m.producer_name)
        # the dynamic dims are symbolic in the file's inputs, as exported
        params = {d.dim_param for i in m.graph.input for d in i.type.tensor_type.shape.dim if d.dim_param}
        assert set(info["dynamic"]) & params, f"{name}: no dynamic input dims"
        assert len(info["bindings"]) >= 2
    assert {11, 13, 17} <= opsets
    assert {"pytorch", "onnx.quantize"} <= producers, producers
    # decoders exported step-wise with their KV caches as inputs, bound to an empty cache too
    for name in ("llama_gqa_kv_op17", "whisper_decoder_with_past_op17"):
        assert "past" in MANIFEST[name]["dynamic"], name
        assert {b["past"] for b in MANIFEST[name]["bindings"]} >= {0, 7}, name
    assert "whisper_encoder_op17" in MANIFEST
    # CLIP's towers take batches of their own; DETR's mask and wav2vec2's frames follow run-time sizes
    assert {"batch_text", "batch_img", "seq"} <= set(MANIFEST["clip_op17"]["dynamic"])
    assert len({(b["batch_text"], b["batch_img"]) for b in MANIFEST["clip_op17"]["bindings"]}) >= 2
    assert {"height", "width"} <= set(MANIFEST["detr_op17"]["dynamic"])
    assert "pixel_mask" in MANIFEST["detr_op17"]["inputs"]
    assert "samples" in MANIFEST["wav2vec2_op17"]["dynamic"]
    exporters = {info["exporter"] for info in MANIFEST.values()}
    assert {"onnxruntime.quantization.quantize_dynamic", "onnxruntime.quantization.quantize_static"} <= exporters
    total = sum((ZOO / f).stat().st_size for f in [i["file"] for i in MANIFEST.values()]
                + [f"{n}.npz" for n in MANIFEST])
    assert total < 8e6, f"the zoo is {total / 1e6:.1f} MB: keep it small"


@pytest.mark.parametrize("name", list(MANIFEST))
def test_zoo_model(name, target):
    info = MANIFEST[name]
    rep = backend.prepare(onnx.load(ZOO / info["file"]), target=target)
    try:
        for k, binding in enumerate(info["bindings"]):
            feeds, want = _binding(name, k)
            got = rep.run(feeds)
            for out, g, w in zip(info["outputs"], got, want):
                assert_like_stored(g, w, info, out, f"{name} {out} at {binding}")
    finally:
        rep.close()


QUANTIZED = [n for n, i in MANIFEST.items() if "quantized_from" in i]


@pytest.mark.parametrize("name", QUANTIZED)
def test_quantized_model_matches_onnx_reference(name):
    """onnxruntime's integer kernels round differently from the ONNX spec in places (the
    dynamic int8 BERT's pooler differs from onnx.reference by up to 1e-2, where symwasm
    agrees with onnx.reference to float rounding): check the spec's result too."""
    from onnx.reference import ReferenceEvaluator

    m = onnx.load(ZOO / MANIFEST[name]["file"])
    for o in m.opset_import:  # onnx.reference has DequantizeLinear from opset 19 (same semantics)
        if o.domain in ("", "ai.onnx") and o.version < 19:
            o.version = 19
    rep = backend.prepare(onnx.load(ZOO / MANIFEST[name]["file"]), target="native")
    try:
        feeds, _ = _binding(name, 0)
        want = ReferenceEvaluator(m).run(None, feeds)
        for out, g, w in zip(MANIFEST[name]["outputs"], rep.run(feeds), want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=f"{name} {out}")
    finally:
        rep.close()
