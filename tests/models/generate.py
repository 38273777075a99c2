"""Builds the zoo of real exported models in tests/models/zoo/ (dev-only: `make zoo-models`).

Each model is a tiny random-weight version of a widely used architecture, exported the way
users export it: ``torch.onnx.export`` (the TorchScript exporter at opsets 11, 13 and 17, the
torch.export-based one at opset 18), transformers' own model classes where they exist, and
``onnxruntime.quantization`` for the dynamic and static int8 variants. Dynamic axes are where
users put them (batch, sequence, image height and width).

For every model the script writes ``<name>.onnx`` and ``<name>.npz``: the inputs of two or
more bindings of the model's dynamic dims and onnxruntime's outputs on them (the reference
the tests compare with). Float models are also checked against torch before they are kept,
so a bad export fails here rather than as a puzzling test failure. ``zoo.json`` records, per
model, the exporter, opset, dynamic dims, bindings and tolerances.

torch, transformers and onnxruntime come from the dev environment `.venv-zoo` that
`make zoo-models` creates; `make test` needs none of them (it reads the committed files).

    .venv-zoo/bin/python tests/models/generate.py [--only REGEX]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn as nn
import torch.nn.functional as F

OUT = Path(__file__).resolve().parent / "zoo"
warnings.filterwarnings("ignore")


# ------------------------------------------------------------------------------ helpers

def feeds_for(spec: "Spec", binding: dict[str, int], seed: int) -> dict[str, np.ndarray]:
    """Seeded inputs for one binding of the model's dynamic dims."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, (shape, kind) in spec.inputs.items():
        dims = tuple(binding[d] if isinstance(d, str) else d for d in shape)
        if kind == "ids":
            out[name] = rng.integers(0, spec.vocab, dims).astype(np.int64)
        elif kind == "mask":  # every row keeps at least two tokens; later rows are padded
            m = np.ones(dims, np.int64)
            for b in range(1, dims[0]):
                m[b, max(2, dims[1] - 2 * b):] = 0
            out[name] = m
        elif kind == "pixel_mask":  # batched images padded to one size: image b keeps a smaller top-left
            m = np.zeros(dims, np.int64)
            for b in range(dims[0]):
                m[b, :max(1, dims[1] - b * dims[1] // 3), :max(1, dims[2] - b * dims[2] // 3)] = 1
            out[name] = m
        elif kind == "zeros":
            out[name] = np.zeros(dims, np.int64)
        elif kind == "positions":  # a decoder's positions continue after its KV cache's
            out[name] = np.broadcast_to(binding["past"] + np.arange(dims[1]), dims).astype(np.int64)
        else:
            out[name] = rng.standard_normal(dims).astype(np.float32)
    return out


@dataclass
class Spec:
    name: str
    about: str            # what architecture, from which source
    build: Callable[[], nn.Module] | None
    opset: int
    inputs: dict[str, tuple[tuple, str]]     # name -> (shape with dim names, kind)
    outputs: list[str]
    dynamic: dict[str, dict[int, str]]       # torch.onnx dynamic_axes
    bindings: list[dict[str, int]]
    exporter: str = "torch.onnx (TorchScript)"
    vocab: int = 0
    rtol: float = 1e-4
    atol: float = 1e-5
    quantize: Callable[[Path, Path, "Spec"], None] | None = None
    base: str | None = None                  # the float model a quantized one comes from
    exact_outputs: list[str] = field(default_factory=list)  # compared bit for bit
    tolerance_note: str = ""                 # why rtol/atol are looser than float rounding
    torch_check: bool = True


def export(spec: Spec, path: Path) -> nn.Module:
    torch.manual_seed(0)
    model = spec.build().eval()
    ex = feeds_for(spec, spec.bindings[0], seed=1)
    args = tuple(torch.from_numpy(v) for v in ex.values())
    if spec.exporter.startswith("torch.onnx (torch.export"):
        dims = {d: torch.export.Dim(d, min=1, max=512) for d in {n for ax in spec.dynamic.values() for n in ax.values()}}
        shapes: Any = tuple({a: dims[n] for a, n in spec.dynamic[k].items()} for k in spec.inputs)
        if isinstance(model, HFWrap):  # forward(*args): one parameter holding them all
            shapes = (shapes,)
        prog = torch.onnx.export(model, args, dynamo=True, opset_version=spec.opset,
                                 input_names=list(spec.inputs), output_names=spec.outputs,
                                 dynamic_shapes=shapes, optimize=True)
        prog.save(str(path))
    else:
        torch.onnx.export(model, args, str(path), dynamo=False, opset_version=spec.opset,
                          input_names=list(spec.inputs), output_names=spec.outputs,
                          dynamic_axes=spec.dynamic, do_constant_folding=True)
    return model


def reference(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def build(spec: Spec, specs: dict[str, Spec]) -> dict[str, Any]:
    path = OUT / f"{spec.name}.onnx"
    model = None
    if spec.quantize is not None:
        spec.quantize(OUT / f"{spec.base}.onnx", path, specs[spec.base])
    else:
        model = export(spec, path)
    m = onnx.load(str(path))
    onnx.checker.check_model(m, full_check=True)
    arrays: dict[str, np.ndarray] = {}
    for k, binding in enumerate(spec.bindings):
        feeds = feeds_for(spec, binding, seed=100 + k)
        got = reference(path, feeds)
        if model is not None and spec.torch_check:
            with torch.no_grad():
                want = model(*[torch.from_numpy(v) for v in feeds.values()])
            want = want if isinstance(want, (tuple, list)) else (want,)
            for name, a, b in zip(spec.outputs, got, want):
                np.testing.assert_allclose(a, b.numpy(), rtol=1e-3, atol=1e-4,
                                           err_msg=f"{spec.name} {name}: onnxruntime vs torch")
        for name, v in feeds.items():
            arrays[f"{k}/in/{name}"] = v
        for name, v in zip(spec.outputs, got):
            arrays[f"{k}/out/{name}"] = v
    np.savez_compressed(OUT / f"{spec.name}.npz", **arrays)
    dynamic = specs[spec.base].dynamic if spec.base else spec.dynamic  # quantizing keeps the axes
    ops = sorted({f"{n.domain + '.' if n.domain else ''}{n.op_type}" for n in m.graph.node})
    return {
        "file": path.name, "about": spec.about, "exporter": spec.exporter,
        "producer": f"{m.producer_name} {m.producer_version}",
        "opset": max(o.version for o in m.opset_import if o.domain in ("", "ai.onnx")),
        "dynamic": sorted({n for ax in dynamic.values() for n in ax.values()}),
        "bindings": spec.bindings, "inputs": list(spec.inputs), "outputs": spec.outputs,
        "rtol": spec.rtol, "atol": spec.atol, "exact_outputs": spec.exact_outputs,
        **({"tolerance_note": spec.tolerance_note} if spec.tolerance_note else {}),
        "nodes": len(m.graph.node), "ops": ops, "bytes": path.stat().st_size,
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        **({"quantized_from": spec.base} if spec.base else {}),
    }


# ------------------------------------------------------------------------------ transformers

class HFWrap(nn.Module):
    """Calls a transformers model with keyword arguments and returns a plain tuple."""

    def __init__(self, model: nn.Module, keys: list[str], outs: list[str]):
        super().__init__()
        self.model, self.keys, self.outs = model, keys, outs

    def forward(self, *args):
        o = self.model(**dict(zip(self.keys, args)))
        return tuple(getattr(o, k) for k in self.outs)


def bert() -> nn.Module:
    from transformers import BertConfig, BertModel
    cfg = BertConfig(vocab_size=600, hidden_size=48, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=96, max_position_embeddings=128, attn_implementation="eager")
    return HFWrap(BertModel(cfg), ["input_ids", "attention_mask", "token_type_ids"],
                  ["last_hidden_state", "pooler_output"])


def gpt2() -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(vocab_size=600, n_embd=48, n_layer=2, n_head=4, n_positions=128,
                     bos_token_id=0, eos_token_id=0, use_cache=False, attn_implementation="eager")
    return HFWrap(GPT2LMHeadModel(cfg), ["input_ids", "attention_mask"], ["logits"])


def vit() -> nn.Module:
    from transformers import ViTConfig, ViTForImageClassification
    cfg = ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=48, num_hidden_layers=2,
                    num_attention_heads=4, intermediate_size=96, num_labels=10, attn_implementation="eager")
    return HFWrap(ViTForImageClassification(cfg), ["pixel_values"], ["logits"])


def _cache(flat):
    """A transformers DynamicCache holding the past keys and values ``flat`` (key 0, value 0,
    key 1, ...) as they are: the model's update concatenates the step's keys and values to
    them, one Concat per tensor in the graph. (DynamicCache(pairs) would first concatenate
    each past to a 1-D empty tensor.)"""
    from transformers.cache_utils import DynamicCache, DynamicLayer
    cache = DynamicCache()
    cache.layers = []
    for k, v in zip(flat[0::2], flat[1::2]):
        layer = DynamicLayer()
        layer.lazy_initialization(k, v)
        layer.keys, layer.values = k, v
        cache.layers.append(layer)
    return cache


def _flat(cache) -> list[torch.Tensor]:
    return [t for layer in cache.layers for t in (layer.keys, layer.values)]


class LlamaWithPast(nn.Module):
    """A decoder step as users deploy it (optimum, transformers.js): input_ids, the attention
    mask over past and new tokens, position_ids, and each layer's past key and value as plain
    tensors in; logits and each layer's present key and value out."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, position_ids, *past):
        o = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                       past_key_values=_cache(past), use_cache=True)
        return (o.logits, *_flat(o.past_key_values))


LLAMA_LAYERS, LLAMA_KV_HEADS, LLAMA_HEAD_DIM = 2, 2, 12


def llama() -> nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=128, hidden_size=48, intermediate_size=64, num_hidden_layers=LLAMA_LAYERS,
                      num_attention_heads=4, num_key_value_heads=LLAMA_KV_HEADS, max_position_embeddings=128,
                      tie_word_embeddings=False, attn_implementation="eager")
    return LlamaWithPast(LlamaForCausalLM(cfg))


WHISPER_LAYERS, WHISPER_HEADS, WHISPER_HEAD_DIM, WHISPER_MELS, WHISPER_POSITIONS = 2, 4, 12, 16, 16


def _whisper() -> nn.Module:
    """One random Whisper (seeded by export): its encoder and decoder graphs share weights."""
    from transformers import WhisperConfig, WhisperForConditionalGeneration
    cfg = WhisperConfig(vocab_size=128, d_model=WHISPER_HEADS * WHISPER_HEAD_DIM, encoder_layers=WHISPER_LAYERS,
                        decoder_layers=WHISPER_LAYERS, encoder_attention_heads=WHISPER_HEADS,
                        decoder_attention_heads=WHISPER_HEADS, encoder_ffn_dim=64, decoder_ffn_dim=64,
                        num_mel_bins=WHISPER_MELS, max_source_positions=WHISPER_POSITIONS, max_target_positions=32,
                        pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1,
                        suppress_tokens=[], begin_suppress_tokens=[], attn_implementation="eager")
    return WhisperForConditionalGeneration(cfg)


class WhisperEncoder(nn.Module):
    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_features):
        return self.model.model.encoder(input_features=input_features).last_hidden_state


class WhisperDecoderWithPast(nn.Module):
    """Whisper's decoder after the first step, as optimum exports it: input_ids, each layer's
    past self-attention key and value and its cross-attention key and value (computed once
    from the encoder's output) in; logits and the present self-attention keys and values out."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids, *past):
        from transformers.cache_utils import EncoderDecoderCache
        own, cross = past[:2 * WHISPER_LAYERS], past[2 * WHISPER_LAYERS:]
        cache = EncoderDecoderCache(_cache(own), _cache(cross))
        # the layers run cross-attention only when given encoder states; with the cross keys
        # and values cached they never read them
        o = self.model.model.decoder(input_ids=input_ids, encoder_hidden_states=cross[0],
                                     past_key_values=cache, use_cache=True)
        return (self.model.proj_out(o.last_hidden_state), *_flat(o.past_key_values.self_attention_cache))


def whisper_encoder() -> nn.Module:
    return WhisperEncoder(_whisper())


def whisper_decoder_with_past() -> nn.Module:
    return WhisperDecoderWithPast(_whisper())


# ------------------------------------------------------------------------------ CLIP, DETR, wav2vec2 (transformers)

def clip() -> nn.Module:
    """Both towers and the contrastive head. eos_token_id 2 is what openai/clip-vit-* ship:
    the text tower pools at ArgMax(input_ids) (the end-of-text token has the highest id)."""
    from transformers import CLIPConfig, CLIPModel
    text = dict(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                max_position_embeddings=32, projection_dim=24, pad_token_id=1, bos_token_id=0, eos_token_id=2)
    vision = dict(image_size=32, patch_size=8, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, projection_dim=24)
    cfg = CLIPConfig(text_config=text, vision_config=vision, projection_dim=24, attn_implementation="eager")
    return HFWrap(CLIPModel(cfg), ["input_ids", "attention_mask", "pixel_values"],
                  ["logits_per_image", "text_embeds", "image_embeds"])


def detr() -> nn.Module:
    """DETR with transformers' own ResNet as its backbone (no timm). init_std 0.5, not 0.02:
    at 0.02 the ten queries' boxes agree to 6e-8, so a wrong mask or position embedding
    would hide under the tolerance."""
    from transformers import DetrConfig, DetrForObjectDetection, ResNetConfig
    backbone = ResNetConfig(embedding_size=8, hidden_sizes=[8, 16, 32], depths=[1, 1, 1], layer_type="basic",
                            out_features=["stage3"])
    cfg = DetrConfig(backbone_config=backbone, use_timm_backbone=False, use_pretrained_backbone=False, d_model=32,
                     encoder_layers=1, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4,
                     encoder_ffn_dim=64, decoder_ffn_dim=64, num_queries=10, num_labels=5, init_std=0.5,
                     attn_implementation="eager")
    return HFWrap(DetrForObjectDetection(cfg), ["pixel_values", "pixel_mask"], ["logits", "pred_boxes"])


def wav2vec2() -> nn.Module:
    """wav2vec2-base's layout: GroupNorm conv feature extractor (strides 5, 2, 2: 20 samples
    a frame), grouped positional conv with weight norm, post-norm transformer, CTC head."""
    from transformers import Wav2Vec2Config, Wav2Vec2ForCTC
    cfg = Wav2Vec2Config(vocab_size=32, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=64, conv_dim=(16, 16, 16), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
                         num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, feat_extract_norm="group",
                         do_stable_layer_norm=False, attn_implementation="eager")
    return HFWrap(Wav2Vec2ForCTC(cfg), ["input_values"], ["logits"])


# ------------------------------------------------------------------------------ vision (torchvision's layouts)

class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (x if self.down is None else self.down(x)))


class ResNet18(nn.Module):
    """torchvision's resnet18 layout (stem, 4 stages of 2 basic blocks, avgpool, fc) at 1/8
    of its width."""

    def __init__(self, width: int = 8, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        chans, layers, cin = [width, 2 * width, 4 * width, 8 * width], [], width
        for i, c in enumerate(chans):
            layers += [BasicBlock(cin, c, 1 if i == 0 else 2), BasicBlock(c, c, 1)]
            cin = c
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class SqueezeExcite(nn.Module):
    def __init__(self, c: int, squeeze: int, gate: nn.Module, act: nn.Module):
        super().__init__()
        self.fc1, self.fc2, self.act, self.gate = nn.Conv2d(c, squeeze, 1), nn.Conv2d(squeeze, c, 1), act, gate

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        return x * self.gate(self.fc2(self.act(self.fc1(s))))


class InvertedResidual(nn.Module):
    """MobileNetV3's bneck: expand 1x1, depthwise kxk, optional SE (hard-sigmoid gate), project."""

    def __init__(self, cin, exp, cout, k, stride, se, hs):
        super().__init__()
        act = nn.Hardswish() if hs else nn.ReLU()
        layers: list[nn.Module] = []
        if exp != cin:
            layers += [nn.Conv2d(cin, exp, 1, bias=False), nn.BatchNorm2d(exp), act]
        layers += [nn.Conv2d(exp, exp, k, stride, k // 2, groups=exp, bias=False), nn.BatchNorm2d(exp), act]
        if se:
            layers.append(SqueezeExcite(exp, max(8, exp // 4), nn.Hardsigmoid(), nn.ReLU()))
        layers += [nn.Conv2d(exp, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.block = nn.Sequential(*layers)
        self.res = stride == 1 and cin == cout

    def forward(self, x):
        y = self.block(x)
        return x + y if self.res else y


class MobileNetV3(nn.Module):
    """MobileNetV3-Small's layout (hard-swish, SE with hard-sigmoid) at reduced width."""

    def __init__(self, classes: int = 10):
        super().__init__()
        cfg = [(8, 8, 8, 3, 2, True, False), (8, 24, 12, 3, 2, False, False), (12, 32, 12, 3, 1, False, False),
               (12, 48, 16, 5, 2, True, True), (16, 64, 16, 5, 1, True, True), (16, 48, 24, 5, 1, True, True)]
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.Hardswish())
        self.blocks = nn.Sequential(*[InvertedResidual(*c) for c in cfg])
        self.last = nn.Sequential(nn.Conv2d(24, 96, 1, bias=False), nn.BatchNorm2d(96), nn.Hardswish())
        self.head = nn.Sequential(nn.Linear(96, 64), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(64, classes))

    def forward(self, x):
        x = self.last(self.blocks(self.stem(x)))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class MBConv(nn.Module):
    """EfficientNet's MBConv: expand, depthwise, SE (SiLU, sigmoid gate), project, residual."""

    def __init__(self, cin, cout, expand, k, stride):
        super().__init__()
        exp = cin * expand
        self.block = nn.Sequential(
            nn.Conv2d(cin, exp, 1, bias=False), nn.BatchNorm2d(exp), nn.SiLU(),
            nn.Conv2d(exp, exp, k, stride, k // 2, groups=exp, bias=False), nn.BatchNorm2d(exp), nn.SiLU(),
            SqueezeExcite(exp, max(1, cin // 4), nn.Sigmoid(), nn.SiLU()),
            nn.Conv2d(exp, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.res = stride == 1 and cin == cout

    def forward(self, x):
        y = self.block(x)
        return x + y if self.res else y


class EfficientNetBlock(nn.Module):
    """An EfficientNet-B0 stem and its first MBConv stages, then the classifier head."""

    def __init__(self, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.SiLU())
        self.blocks = nn.Sequential(MBConv(16, 16, 1, 3, 1), MBConv(16, 24, 6, 3, 2), MBConv(24, 24, 6, 3, 1),
                                    MBConv(24, 32, 6, 5, 2))
        self.head = nn.Sequential(nn.Conv2d(32, 64, 1, bias=False), nn.BatchNorm2d(64), nn.SiLU())
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        x = self.head(self.blocks(self.stem(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class UNet(nn.Module):
    """A two-level U-Net: conv blocks, max-pool down, one ConvTranspose and one bilinear
    Resize up, Concat skips."""

    def __init__(self, c: int = 8, classes: int = 3):
        super().__init__()

        def block(i, o):
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(),
                                 nn.Conv2d(o, o, 3, padding=1), nn.ReLU())
        self.d1, self.d2, self.mid = block(3, c), block(c, 2 * c), block(2 * c, 4 * c)
        self.up2 = nn.ConvTranspose2d(4 * c, 2 * c, 2, stride=2)
        self.u2 = block(4 * c, 2 * c)
        self.up1 = nn.Sequential(nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),
                                 nn.Conv2d(2 * c, c, 1))
        self.u1 = block(2 * c, c)
        self.out = nn.Conv2d(c, classes, 1)

    def forward(self, x):
        a = self.d1(x)
        b = self.d2(F.max_pool2d(a, 2))
        m = self.mid(F.max_pool2d(b, 2))
        u = self.u2(torch.cat([self.up2(m), b], 1))
        u = self.u1(torch.cat([self.up1(u), a], 1))
        return self.out(u)


class NMS(torch.autograd.Function):
    """Per-class greedy non-maximum suppression that exports as ONNX NonMaxSuppression (the
    way torchvision.ops.nms exports)."""

    @staticmethod
    def forward(ctx, boxes, scores, max_out: int, iou: float, score: float):
        sel = []
        for b in range(boxes.shape[0]):
            for c in range(scores.shape[1]):
                s = scores[b, c]
                order = [int(i) for i in torch.argsort(s, descending=True, stable=True) if s[i] > score]
                kept: list[int] = []
                for i in order:
                    if len(kept) == max_out:
                        break
                    if all(_iou(boxes[b, i], boxes[b, j]) <= iou for j in kept):
                        kept.append(i)
                sel += [[b, c, i] for i in kept]
        return torch.tensor(sel, dtype=torch.int64).reshape(-1, 3)

    @staticmethod
    def symbolic(g, boxes, scores, max_out, iou, score):
        return g.op("NonMaxSuppression", boxes, scores,
                    g.op("Constant", value_t=torch.tensor([max_out], dtype=torch.int64)),
                    g.op("Constant", value_t=torch.tensor([iou], dtype=torch.float32)),
                    g.op("Constant", value_t=torch.tensor([score], dtype=torch.float32)))


def _iou(a, b) -> float:
    ix = max(0.0, float(min(a[2], b[2]) - max(a[0], b[0])))
    iy = max(0.0, float(min(a[3], b[3]) - max(a[1], b[1])))
    inter = ix * iy
    area = float((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1])) - inter
    return inter / area if area > 0 else 0.0


class YoloHead(nn.Module):
    """A YOLO-style detector: conv backbone, a head predicting A anchors x (4 box + 1 object +
    C class) per cell, decoding on a grid built from the feature map's run-time size, and
    NonMaxSuppression; outputs every box, its class scores, and the selected (batch, class,
    box) triples with their boxes."""

    def __init__(self, classes: int = 3, anchors=((10., 14.), (23., 27.))):
        super().__init__()
        self.c, self.a = classes, len(anchors)
        self.register_buffer("anchors", torch.tensor(anchors))
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 8, 3, 2, 1), nn.BatchNorm2d(8), nn.LeakyReLU(0.1),
            nn.Conv2d(8, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.LeakyReLU(0.1),
            nn.Conv2d(16, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.LeakyReLU(0.1))
        self.head = nn.Conv2d(16, self.a * (5 + classes), 1)

    def forward(self, x):
        p = self.head(self.backbone(x))
        n, _, h, w = p.shape
        p = p.view(n, self.a, 5 + self.c, h, w).permute(0, 1, 3, 4, 2)
        gy, gx = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
        grid = torch.stack((gx, gy), -1).to(p.dtype).view(1, 1, h, w, 2)
        stride = x.shape[-1] / w
        xy = (torch.sigmoid(p[..., :2]) + grid) * stride
        wh = torch.exp(p[..., 2:4]).clamp(max=50.0) * self.anchors.view(1, self.a, 1, 1, 2)
        boxes = torch.cat((xy - wh / 2, xy + wh / 2), -1).reshape(n, -1, 4)
        scores = (torch.sigmoid(p[..., 4:5]) * torch.sigmoid(p[..., 5:])).reshape(n, -1, self.c)
        scores = scores.transpose(1, 2)
        sel = NMS.apply(boxes, scores, 5, 0.5, 0.25)
        flat = sel[:, 0] * boxes.shape[1] + sel[:, 2]
        picked = boxes.reshape(-1, 4).index_select(0, flat)
        return boxes, scores, sel, picked


class SpeechConvLSTM(nn.Module):
    """A DeepSpeech-style acoustic model: two strided 1-D convs over log-mel frames, a
    2-layer bidirectional LSTM, and per-frame log-probabilities over 29 characters."""

    def __init__(self, mels: int = 40, hidden: int = 32):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv1d(mels, 32, 5, 2, 2), nn.BatchNorm1d(32), nn.Hardtanh(0, 20),
                                  nn.Conv1d(32, 32, 5, 2, 2), nn.BatchNorm1d(32), nn.Hardtanh(0, 20))
        self.lstm = nn.LSTM(32, hidden, num_layers=2, bidirectional=True, batch_first=True)
        self.fc = nn.Linear(2 * hidden, 29)

    def forward(self, x):  # (batch, time, mels)
        y = self.conv(x.transpose(1, 2)).transpose(1, 2)
        y, _ = self.lstm(y)
        return F.log_softmax(self.fc(y), -1)


class GRUTagger(nn.Module):
    """An embedding + GRU sequence model with an initial state: per-token logits and the
    final hidden state (a streaming tagger or language model step)."""

    def __init__(self, vocab: int = 300, dim: int = 32, hidden: int = 48):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.gru = nn.GRU(dim, hidden, num_layers=1, batch_first=True)
        self.fc = nn.Linear(hidden, 17)

    def forward(self, ids, h0):
        y, h = self.gru(self.emb(ids), h0)
        return self.fc(y), h


# ------------------------------------------------------------------------------ quantization

def quant_dynamic(src: Path, dst: Path, spec: Spec) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic
    quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8)


def quant_static(src: Path, dst: Path, spec: Spec) -> None:
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([feeds_for(spec, spec.bindings[0], seed=500 + i) for i in range(8)])

        def get_next(self):
            return next(self.it, None)

    from onnxruntime.quantization.shape_inference import quant_pre_process
    with tempfile.TemporaryDirectory() as tmp:
        pre = Path(tmp) / "pre.onnx"  # the pre-processing onnxruntime asks for (folds, infers shapes)
        quant_pre_process(str(src), str(pre))
        quantize_static(str(pre), str(dst), Reader(), quant_format=QuantFormat.QDQ,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        per_channel=True)


# ------------------------------------------------------------------------------ the zoo

TEXT = {"input_ids": (("batch", "seq"), "ids"), "attention_mask": (("batch", "seq"), "mask"),
        "token_type_ids": (("batch", "seq"), "zeros")}
BS = {0: "batch", 1: "seq"}
IMG = {0: "batch", 2: "height", 3: "width"}


def llama_and_whisper() -> list[Spec]:
    """Decoders with a KV cache, exported step-wise as users ship them: past 0 is the first
    step (an empty cache), seq 1 a decode step. The example each graph is traced at has a
    non-empty past and a few new tokens, so no branch on an empty cache or one token freezes."""
    kv = ("batch", LLAMA_KV_HEADS, "past", LLAMA_HEAD_DIM)
    llama_in = {"input_ids": (("batch", "seq"), "ids"), "attention_mask": (("batch", "total"), "mask"),
                "position_ids": (("batch", "seq"), "positions"),
                **{f"past_key_values.{i}.{t}": (kv, "float") for i in range(LLAMA_LAYERS) for t in ("key", "value")}}
    llama_out = ["logits"] + [f"present.{i}.{t}" for i in range(LLAMA_LAYERS) for t in ("key", "value")]
    llama_dyn = {"input_ids": BS, "attention_mask": {0: "batch", 1: "total"}, "position_ids": BS, "logits": BS,
                 **{k: {0: "batch", 2: "past"} for k in list(llama_in)[3:]},
                 **{k: {0: "batch", 2: "total"} for k in llama_out[1:]}}
    steps = [{"batch": 2, "past": 3, "seq": 4}, {"batch": 1, "past": 0, "seq": 5}, {"batch": 2, "past": 7, "seq": 1}]
    steps = [{**b, "total": b["past"] + b["seq"]} for b in steps]
    own = ("batch", WHISPER_HEADS, "past", WHISPER_HEAD_DIM)
    cross = ("batch", WHISPER_HEADS, "enc_seq", WHISPER_HEAD_DIM)
    dec_in = {"input_ids": (("batch", "seq"), "ids"),
              **{f"past_key_values.{i}.decoder.{t}": (own, "float") for i in range(WHISPER_LAYERS) for t in ("key", "value")},
              **{f"past_key_values.{i}.encoder.{t}": (cross, "float") for i in range(WHISPER_LAYERS) for t in ("key", "value")}}
    dec_out = ["logits"] + [f"present.{i}.decoder.{t}" for i in range(WHISPER_LAYERS) for t in ("key", "value")]
    dec_dyn = {"input_ids": BS, "logits": BS,
               **{k: {0: "batch", 2: "past" if ".decoder." in k else "enc_seq"} for k in list(dec_in)[1:]},
               **{k: {0: "batch", 2: "total"} for k in dec_out[1:]}}
    frames = 2 * WHISPER_POSITIONS  # the encoder's second conv halves the frames to its positions
    return [
        Spec("llama_gqa_kv_op17", "Llama decoder step with a KV cache (transformers LlamaForCausalLM, 2 layers, "
             "hidden 48, 4 query heads sharing 2 key/value heads, RoPE, RMSNorm, SwiGLU)", llama, 17, llama_in,
             llama_out, llama_dyn, steps, vocab=128),
        Spec("whisper_encoder_op17", f"Whisper encoder (transformers WhisperForConditionalGeneration, d_model 48, "
             f"2 layers, {WHISPER_MELS} mels x {frames} frames)", whisper_encoder, 17,
             {"input_features": (("batch", WHISPER_MELS, frames), "float")}, ["last_hidden_state"],
             {"input_features": {0: "batch"}, "last_hidden_state": {0: "batch"}}, [{"batch": 1}, {"batch": 3}]),
        Spec("whisper_decoder_with_past_op17", "Whisper decoder step with self- and cross-attention KV caches "
             "(the same model as whisper_encoder_op17, 2 layers)", whisper_decoder_with_past, 17, dec_in, dec_out,
             dec_dyn, [{**b, "enc_seq": WHISPER_POSITIONS} for b in steps], vocab=128),
    ]


def clip_detr_wav2vec2() -> list[Spec]:
    """A two-tower model with a batch per tower, a detector with a padding mask over dynamic
    height and width, and an encoder over raw audio."""
    text = {"input_ids": (("batch_text", "seq"), "ids"), "attention_mask": (("batch_text", "seq"), "mask")}
    clip_dyn = {"input_ids": {0: "batch_text", 1: "seq"}, "attention_mask": {0: "batch_text", 1: "seq"},
                "pixel_values": {0: "batch_img"}, "logits_per_image": {0: "batch_img", 1: "batch_text"},
                "text_embeds": {0: "batch_text"}, "image_embeds": {0: "batch_img"}}
    hw = {0: "batch", 1: "height", 2: "width"}
    return [
        # at the second binding, two rows' highest id (where the text tower pools) sits in
        # their padding, so the attention mask shows in the outputs
        Spec("clip_op17", "CLIP (transformers CLIPModel: text and ViT towers, 2 layers each, hidden 32, "
             "projection 24)", clip, 17, {**text, "pixel_values": (("batch_img", 3, 32, 32), "float")},
             ["logits_per_image", "text_embeds", "image_embeds"], clip_dyn,
             [{"batch_text": 2, "seq": 7, "batch_img": 1}, {"batch_text": 4, "seq": 9, "batch_img": 3}], vocab=100),
        # the second binding's sizes are not multiples of the backbone's stride (16), and its
        # second image is padded
        Spec("detr_op17", "DETR (transformers DetrForObjectDetection, tiny ResNet backbone, 1+1 layers, d_model "
             "32, 10 queries) with a pixel mask", detr, 17,
             {"pixel_values": (("batch", 3, "height", "width"), "float"),
              "pixel_mask": (("batch", "height", "width"), "pixel_mask")}, ["logits", "pred_boxes"],
             {"pixel_values": IMG, "pixel_mask": hw, "logits": {0: "batch"}, "pred_boxes": {0: "batch"}},
             [{"batch": 1, "height": 40, "width": 48}, {"batch": 2, "height": 61, "width": 53}]),
        Spec("wav2vec2_op17", "wav2vec2 CTC (transformers Wav2Vec2ForCTC, GroupNorm feature extractor, 2 layers, "
             "hidden 32)", wav2vec2, 17, {"input_values": (("batch", "samples"), "float")}, ["logits"],
             {"input_values": {0: "batch", 1: "samples"}, "logits": {0: "batch", 1: "frames"}},
             [{"batch": 1, "samples": 400}, {"batch": 2, "samples": 2400}]),
    ]


def specs() -> list[Spec]:
    image = {"pixels": (("batch", 3, "height", "width"), "float")}
    img_bindings = [{"batch": 1, "height": 32, "width": 32}, {"batch": 2, "height": 48, "width": 40}]
    out = []
    for op in (11, 17):
        out.append(Spec(f"bert_encoder_op{op}", "BERT encoder (transformers BertModel, 2 layers, hidden 48)", bert,
                        op, TEXT, ["last_hidden_state", "pooler_output"],
                        {**{k: BS for k in TEXT}, "last_hidden_state": BS, "pooler_output": {0: "batch"}},
                        [{"batch": 1, "seq": 7}, {"batch": 3, "seq": 16}], vocab=600))
    out.append(Spec("bert_encoder_int8_dynamic", "bert_encoder_op17 after onnxruntime quantize_dynamic (int8 weights)",
                    None, 17, TEXT, ["last_hidden_state", "pooler_output"], {}, out[-1].bindings,
                    exporter="onnxruntime.quantization.quantize_dynamic", vocab=600, rtol=1e-3, atol=2e-2,
                    quantize=quant_dynamic, base="bert_encoder_op17",
                    tolerance_note="onnxruntime's DynamicQuantizeLinear/MatMulInteger differ from the ONNX "
                                   "spec (onnx.reference) by up to 1e-2 on the pooler output; "
                                   "test_zoo.py also checks against onnx.reference at 1e-5"))
    gpt_in = {k: TEXT[k] for k in ("input_ids", "attention_mask")}
    out.append(Spec("gpt2_decoder_op13", "GPT-2 decoder LM (transformers GPT2LMHeadModel, 2 layers, hidden 48)",
                    gpt2, 13, gpt_in, ["logits"], {"input_ids": BS, "attention_mask": BS, "logits": BS},
                    [{"batch": 1, "seq": 5}, {"batch": 2, "seq": 19}], vocab=600))
    out.append(Spec("gpt2_decoder_dynamo18", "GPT-2 decoder LM, the torch.export-based exporter",
                    gpt2, 18, gpt_in, ["logits"], {"input_ids": BS, "attention_mask": BS},
                    [{"batch": 1, "seq": 5}, {"batch": 2, "seq": 19}], vocab=600,
                    exporter="torch.onnx (torch.export, dynamo=True)"))
    out += llama_and_whisper()
    out.append(Spec("vit_op17", "ViT image classifier (transformers ViTForImageClassification, 32x32, patch 8)",
                    vit, 17, {"pixel_values": (("batch", 3, 32, 32), "float")}, ["logits"],
                    {"pixel_values": {0: "batch"}, "logits": {0: "batch"}}, [{"batch": 1}, {"batch": 3}]))
    for op in (11, 13):
        out.append(Spec(f"resnet18_op{op}", "ResNet-18 (torchvision's layout, 1/8 width)", ResNet18, op, image,
                        ["logits"], {"pixels": IMG, "logits": {0: "batch"}}, img_bindings))
    out.append(Spec("resnet18_int8_static", "resnet18_op13 after onnxruntime quantize_static (QDQ, per-channel int8)",
                    None, 13, image, ["logits"], {}, img_bindings,
                    exporter="onnxruntime.quantization.quantize_static", rtol=1e-4, atol=2e-3,
                    quantize=quant_static, base="resnet18_op13",
                    tolerance_note="a float Conv summed in another order (wasm32 has no FMA) can land a "
                                   "QuantizeLinear on the other side of a rounding boundary: one step "
                                   "of the output's scale (9.6e-4)"))
    out.append(Spec("mobilenetv3_op17", "MobileNetV3-Small layout (hard-swish, hard-sigmoid SE)", MobileNetV3, 17,
                    image, ["logits"], {"pixels": IMG, "logits": {0: "batch"}}, img_bindings))
    out.append(Spec("mobilenetv3_op13", "MobileNetV3-Small layout at opset 13 (hard-swish as HardSigmoid*x)",
                    MobileNetV3, 13, image, ["logits"], {"pixels": IMG, "logits": {0: "batch"}}, img_bindings))
    out.append(Spec("efficientnet_block_op13", "EfficientNet-B0 stem and MBConv stages (SiLU, SE)",
                    EfficientNetBlock, 13, image, ["logits"], {"pixels": IMG, "logits": {0: "batch"}}, img_bindings))
    out.append(Spec("unet_op11", "U-Net, 2 levels (MaxPool, ConvTranspose, bilinear Resize, Concat)", UNet, 11,
                    image, ["mask"], {"pixels": IMG, "mask": IMG}, img_bindings))
    out.append(Spec("yolo_nms_op11", "YOLO-style detector head with grid decoding and NonMaxSuppression", YoloHead,
                    11, image, ["boxes", "scores", "selected", "picked"],
                    {"pixels": IMG, "boxes": {0: "batch", 1: "cells"}, "scores": {0: "batch", 2: "cells"},
                     "selected": {0: "kept"}, "picked": {0: "kept"}},
                    [{"batch": 1, "height": 64, "width": 64}, {"batch": 2, "height": 96, "width": 64}],
                    exact_outputs=["selected"]))
    out.append(Spec("speech_conv_lstm_op13", "Conv1d + 2-layer bidirectional LSTM acoustic model (DeepSpeech-style)",
                    SpeechConvLSTM, 13, {"mels": (("batch", "frames", 40), "float")}, ["log_probs"],
                    {"mels": {0: "batch", 1: "frames"}, "log_probs": {0: "batch", 1: "steps"}},
                    [{"batch": 1, "frames": 24}, {"batch": 3, "frames": 50}]))
    out.append(Spec("gru_tagger_op11", "Embedding + GRU sequence model with an initial state", GRUTagger, 11,
                    {"ids": (("batch", "seq"), "ids"), "h0": ((1, "batch", 48), "float")}, ["logits", "h"],
                    {"ids": BS, "h0": {1: "batch"}, "logits": BS, "h": {1: "batch"}},
                    [{"batch": 1, "seq": 6}, {"batch": 4, "seq": 21}], vocab=300))
    out += clip_detr_wav2vec2()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="regex of model names to rebuild (the manifest keeps the others)")
    args = ap.parse_args()
    OUT.mkdir(exist_ok=True)
    manifest_path = OUT / "zoo.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    all_specs = {s.name: s for s in specs()}
    for spec in all_specs.values():
        if args.only and not re.search(args.only, spec.name):
            continue
        print(f"{spec.name}: {spec.exporter}, opset {spec.opset}", file=sys.stderr, flush=True)
        manifest[spec.name] = build(spec, all_specs)
    manifest = {k: manifest[k] for k in all_specs if k in manifest}
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    total = sum(v["bytes"] + (OUT / f"{k}.npz").stat().st_size for k, v in manifest.items())
    print(f"{len(manifest)} models, {total / 1e6:.2f} MB with their references", file=sys.stderr)


if __name__ == "__main__":
    main()
