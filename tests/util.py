"""Test helpers: build small ONNX models, compile them once per target, run several
bindings of their symbolic dims, and compare with onnx.reference (an independent
implementation)."""
from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import wasm_runtime
from toolkit.codegen.target import PSABI_LEVELS
from toolkit.compiler import compile_model

if __package__:  # imported as tests.util (the fuzz campaigns' workers), where no test runs
    from . import family
else:
    import family

_TMP = Path(tempfile.mkdtemp(prefix="symwasm-tests-"))
atexit.register(shutil.rmtree, _TMP, ignore_errors=True)
_counter = [0]


def vinfo(name: str, dtype, shape: Sequence | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), shape)


def make_model(nodes: Sequence[onnx.NodeProto], inputs: Sequence[onnx.ValueInfoProto],
               outputs: Sequence[onnx.ValueInfoProto], initializers: Iterable[onnx.TensorProto] = (),
               opset: int = 17) -> onnx.ModelProto:
    g = helper.make_graph(list(nodes), "test", list(inputs), list(outputs), initializer=list(initializers))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def const(name: str, arr) -> onnx.TensorProto:
    return onnx.numpy_helper.from_array(np.asarray(arr), name)


RELAXED = "wasm32-relaxed"  # a test target: wasm32's relaxed-SIMD variant (compile --relaxed-simd)
# test targets of native code for an x86-64 psABI level (compile --cpu): a kernel's routes and
# tiles follow the level's vector width (SSE4 4 lanes, AVX2 8, AVX-512 16), so the kernel
# tests run each level whatever this machine's CPU is (a level it lacks is skipped: its code
# cannot run here). The baseline x86-64 is left out: its tile is x86-64-v2's.
NATIVE_LEVELS = PSABI_LEVELS[1:]


def split_target(target: str) -> tuple[str, str | None]:
    """(compile target, CPU) of a test target: ``native@x86-64-v3`` -> (native, x86-64-v3)."""
    name, _, cpu = target.partition("@")
    return ("wasm32" if name == RELAXED else name), (cpu or None)


def compile_target(target: str):
    """The compiler's Target of a test target (its tile sizes, vector width, ISA)."""
    from toolkit.codegen.target import get_target

    return get_target(*split_target(target))


def is_native(target: str) -> bool:
    return split_target(target)[0] == "native"


def native_targets() -> list:
    """Native code at every x86-64 level, each skipped where this CPU lacks it (on another
    architecture, the host's own code)."""
    import platform

    from wasm_runtime import cpu as cpuinfo
    from toolkit.codegen.target import get_target

    if platform.machine().lower() not in ("x86_64", "amd64"):
        return ["native"]
    levels = []
    for level in NATIVE_LEVELS:
        missing = cpuinfo.missing_features(list(get_target("native", level).isa))
        levels.append(pytest.param(f"native@{level}", marks=pytest.mark.skipif(
            bool(missing), reason=f"this CPU lacks {missing} of {level}")))
    return levels


def kernel_targets() -> list:
    """The targets a kernel test runs on: wasm32 baseline and relaxed-SIMD, and
    :func:`native_targets`."""
    return ["wasm32", RELAXED, *native_targets()]


def build(model: onnx.ModelProto, target: str, **kw) -> wasm_runtime.Model:
    """Compile ``model`` for ``target`` into a fresh file and load it (for ``RELAXED``, its
    relaxed-SIMD variant)."""
    if family.recording():  # a test that compiles by itself is not a family's case
        raise family._Stop
    _counter[0] += 1
    path = _TMP / f"m{_counter[0]}{'.so' if is_native(target) else '.wasm'}"
    if target == RELAXED:
        compile_model(model, path, target="wasm32", relaxed=True, **kw)
        return wasm_runtime.load(path, variant="relaxed-simd")
    name, cpu = split_target(target)
    compile_model(model, path, target=name, cpu=cpu, **kw)
    return wasm_runtime.load(path)


def reference(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    sess = ReferenceEvaluator(model)
    names = [o.name for o in model.graph.output]
    return dict(zip(names, sess.run(None, dict(feeds))))


def ort_reference(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """onnxruntime's outputs: the reference where onnx.reference is wrong (LRN, the
    pre-13 Softmax, BatchNormalization-7; see tests/test_old_opsets.py)."""
    import onnxruntime

    sess = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in model.graph.output]
    return dict(zip(names, sess.run(None, dict(feeds))))


def assert_outputs_match(got: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray],
                         rtol: float = 1e-5, atol: float = 1e-6) -> None:
    assert set(got) == set(want), (set(got), set(want))
    for name, w in want.items():
        w = np.asarray(w)
        if w.dtype.kind in "US":  # onnx.reference's text of fixed width: hosts give object arrays of str
            w = w.astype(object)
        g = got[name]
        assert g.shape == w.shape, f"{name}: shape {g.shape} != reference {w.shape}"
        assert g.dtype == w.dtype, f"{name}: dtype {g.dtype} != reference {w.dtype}"
        if w.dtype.kind not in "fiub" and w.dtype.name.startswith(("bfloat", "float")):
            g, w = g.astype(np.float32), w.astype(np.float32)  # ml_dtypes' narrow floats
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True, err_msg=name)
        else:
            np.testing.assert_array_equal(g, w, err_msg=name)


def assert_like_stored(got: np.ndarray, want: np.ndarray, info: Mapping, output: str, where: str) -> None:
    """An output against onnxruntime's as a zoo's manifest stored it: same shape and dtype;
    exact for integers and the manifest's ``exact_outputs``, else within its rtol/atol."""
    assert got.shape == want.shape and got.dtype == want.dtype, \
        f"{where}: {got.dtype}{got.shape} vs {want.dtype}{want.shape}"
    if output in info["exact_outputs"] or not np.issubdtype(want.dtype, np.floating):
        np.testing.assert_array_equal(got, want, err_msg=where)
    else:
        np.testing.assert_allclose(got, want, rtol=info["rtol"], atol=info["atol"], err_msg=where)


def check_model(model: onnx.ModelProto, target: str, feeds_list: Sequence[Mapping[str, np.ndarray]],
                rtol: float = 1e-5, atol: float = 1e-6, ref=reference, compare=None,
                **compile_kw) -> wasm_runtime.Model:
    """``model`` compiled for ``target``, run on every feed set, each compared with
    onnx.reference (or ``ref``): within rtol/atol (:func:`assert_outputs_match`), or by
    ``compare(got, want)``, which raises on a mismatch. The module is its family's
    (tests/family.py) when the call was recorded; what it returns is then the module
    compiled alone, on first use."""
    assert len(feeds_list) >= 1
    if family.recording():
        return family.record(model, target, feeds_list, compile_kw)
    outputs = family.outputs_for(model, target, feeds_list, compile_kw, build)
    if outputs is None:
        m = build(model, target, **compile_kw)
        outputs = [m.run(feeds) for feeds in feeds_list]
    else:
        m = family.Later(lambda: build(model, target, **compile_kw))
    for feeds, got in zip(feeds_list, outputs):
        want = ref(model, feeds)
        if compare is None:
            assert_outputs_match(got, want, rtol, atol)
        else:
            compare(got, want)
    return m


def assert_sums_close(got: np.ndarray, want: np.ndarray, k: int) -> None:
    """float32 sums of ``k`` products of numbers in [-1, 1] (a GEMM's), against ``want``
    computed in float64."""
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * max(k, 1) ** 0.5 * 4)


def rand(rng: np.random.Generator, shape, dtype=np.float32, lo=-3, hi=3) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind == "i":
        return rng.integers(lo, hi, size=shape).astype(dtype)
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def plans(model: onnx.ModelProto, target: str = "wasm32", binds=None, routes=None) -> dict:
    """The kernel plans (toolkit.codegen.plan.Plan) the compiler gives ``model``'s nodes on
    ``target`` (those with more than one kernel), by node name: import and the passes, no
    lowering."""
    graph = _passes(model, target, binds, routes=routes)
    return {n.name: n.op.plan for n in graph.all_nodes() if getattr(n.op, "plan", None) is not None}


def _passes(model, target: str, binds=None, check_facts: bool = False, routes=None):
    from toolkit.codegen.target import get_target
    from toolkit.compiler import import_for
    from toolkit.passes import run_pipeline

    tgt = get_target(*split_target(target))
    return run_pipeline(import_for(model, tgt, binds, check_facts=check_facts), tgt, routes)


def lower_model(model: onnx.ModelProto, target: str = "wasm32", binds=None, check_facts: bool = False, routes=None):
    """(graph, program IR, llvm module) of a model (its symbols ``binds`` fixed, its facts
    checked if ``check_facts``, ``routes`` asked for): the compiler's own steps up to the
    program, no LLVM optimization or linking."""
    from toolkit.codegen.target import get_target
    from toolkit.compiler import lower_for

    graph = _passes(model, target, binds, check_facts, routes)
    prog, module = lower_for(graph, get_target(*split_target(target)))
    return graph, prog, module
