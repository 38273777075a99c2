"""toolkit.codegen.mathlib: accuracy on native (MCJIT) and wasm32 (wasmtime), vectorization."""

from __future__ import annotations

import ctypes
import functools
import math
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import wasmtime
from llvmlite import binding as llvm
from llvmlite import ir

from toolkit import zig
from toolkit.codegen import mathlib

llvm.initialize_all_targets()
llvm.initialize_all_asmprinters()

F32 = ir.FloatType()
I64 = ir.IntType(64)
LANES = 4
ARITY = {"exp": 1, "expm1": 1, "log": 1, "tanh": 1, "sigmoid": 1, "erf": 1, "pow": 2}
FLT_MIN = float(np.finfo(np.float32).tiny)
FLT_MAX = float(np.finfo(np.float32).max)
# Max relative error for normal results (absolute for erf), per the module's contract.
TOLERANCE = {"exp": 4e-7, "expm1": 2e-7, "log": 4e-7, "tanh": 4e-7, "sigmoid": 4e-7, "erf": 3e-7,
             "pow": 2e-6}
SPECIALS = [0.0, -0.0, math.inf, -math.inf, math.nan, FLT_MAX, -FLT_MAX, FLT_MIN, -FLT_MIN,
            1e-45, -1e-45, 1e-30, -1e-30, 1.0, -1.0, 3e38, -3e38]

Kernel = Callable[[np.ndarray, np.ndarray], np.ndarray]


def build_kernel(name: str, lanes: int) -> str:
    """IR of ``void f(float* out, const float* a, const float* b, i64 n)``.

    Applies ``mathlib.<name>`` to ``lanes`` elements per iteration: scalars for
    lanes == 1 (left to the loop vectorizer), explicit vectors otherwise (n must then be
    a multiple of lanes).
    """
    mod = ir.Module(name=f"mathlib_{name}")
    ptr = ir.PointerType()
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [ptr, ptr, ptr, I64]), "f")
    out, a, b_in, n = fn.args
    for arg in (out, a, b_in):
        arg.add_attribute("noalias")
    entry, head, body, done = map(fn.append_basic_block, ("entry", "head", "body", "done"))
    b = ir.IRBuilder(entry)
    b.branch(head)

    b.position_at_end(head)
    i = b.phi(I64)
    i.add_incoming(ir.Constant(I64, 0), entry)
    b.cbranch(b.icmp_signed("<", i, n), body, done)

    b.position_at_end(body)
    vty = F32 if lanes == 1 else ir.VectorType(F32, lanes)
    args = []
    for src in (a, b_in)[: ARITY[name]]:
        load = b.load(b.gep(src, [i], inbounds=True, source_etype=F32), typ=vty)
        load.align = 4
        args.append(load)
    store = b.store(getattr(mathlib, name)(b, *args),
                    b.gep(out, [i], inbounds=True, source_etype=F32))
    store.align = 4
    nxt = b.add(i, ir.Constant(I64, lanes))
    i.add_incoming(nxt, body)
    b.branch(head)

    b.position_at_end(done)
    b.ret_void()
    return str(mod)


def target_machine(target: str) -> llvm.TargetMachine:
    """A fresh target machine (MCJIT takes ownership of the one it is given)."""
    if target == "wasm32":
        return llvm.Target.from_triple("wasm32-unknown-unknown").create_target_machine(
            features="+simd128", opt=3, codemodel="default")
    return llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
        opt=3, jit=True)


def optimize(ir_text: str, target: str) -> llvm.ModuleRef:
    """Parse and verify the IR text, then run the O3 pipeline for ``target``."""
    tm = target_machine(target)
    mod = llvm.parse_assembly(ir_text)
    mod.verify()
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
    pb.getModulePassManager().run(mod, pb)
    mod.verify()
    return mod


class NativeKernel:
    """A kernel JIT-compiled in-process with MCJIT."""

    def __init__(self, mod: llvm.ModuleRef) -> None:
        # The JIT'ed code lives as long as the engine.
        self._engine = llvm.create_mcjit_compiler(mod, target_machine("native"))
        self._engine.finalize_object()
        self._f = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                   ctypes.c_int64)(self._engine.get_function_address("f"))

    def __call__(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        out = np.empty_like(a)
        self._f(out.ctypes.data, a.ctypes.data, b.ctypes.data, a.size)
        return out


class WasmKernel:
    """A kernel linked into a standalone .wasm module, run under wasmtime."""

    def __init__(self, mod: llvm.ModuleRef) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            obj, wasm = Path(tmp, "kernel.o"), Path(tmp, "kernel.wasm")
            obj.write_bytes(target_machine("wasm32").emit_object(mod))
            subprocess.run([*zig.command(), "wasm-ld", "--no-entry",
                            "--export=f", str(obj), "-o", str(wasm)],
                           check=True, capture_output=True)
            engine = wasmtime.Engine()
            module = wasmtime.Module(engine, wasm.read_bytes())
        assert module.imports == [], "kernels must be self-contained (no libm imports)"
        self._store = wasmtime.Store(engine)
        exports = wasmtime.Instance(self._store, module, []).exports(self._store)
        self._memory, self._f = exports["memory"], exports["f"]
        # Everything past the initial memory (data + stack) is free for the buffers.
        self._base = self._memory.data_len(self._store)

    def __call__(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        store, memory, base, nbytes = self._store, self._memory, self._base, a.nbytes
        missing = base + 3 * nbytes - memory.data_len(store)
        if missing > 0:
            memory.grow(store, -(-missing // 65536))
        memory.write(store, a.tobytes(), base + nbytes)
        memory.write(store, b.tobytes(), base + 2 * nbytes)
        self._f(store, base, base + nbytes, base + 2 * nbytes, a.size)
        return np.frombuffer(memory.read(store, base, base + nbytes), np.float32).copy()


@functools.cache
def kernel(name: str, target: str, lanes: int) -> Kernel:
    mod = optimize(build_kernel(name, lanes), target)
    return NativeKernel(mod) if target == "native" else WasmKernel(mod)


def _f32(*parts) -> np.ndarray:
    return np.concatenate([np.asarray(p, np.float64).ravel() for p in parts]).astype(np.float32)


def inputs(name: str) -> tuple[np.ndarray, np.ndarray]:
    """A few thousand float32 test points (a, b), length a multiple of LANES."""
    rng = np.random.default_rng(sum(map(ord, name)))
    b = None
    if name == "exp":
        a = _f32(np.linspace(-87, 88, 3000), rng.uniform(-1, 1, 500),
                 [88.72, 88.7228, 88.72284, 88.723, 89, 100, -87.4, -100, -103.9, -104, -120],
                 SPECIALS)
    elif name == "expm1":
        # both sides of each switch: |x| = 2^-25, n = 0 (|x| = ln2 / 2), n = 24 (x = 16.6),
        # the clamp at -17.5, and overflow (88.72)
        a = _f32(np.linspace(-20, 88, 3000), rng.uniform(-1, 1, 500), np.geomspace(1e-30, 1, 300),
                 -np.geomspace(1e-30, 1, 300), [2.0**-25, -2.0**-25, 2.0**-24, -2.0**-24],
                 np.log(2) / 2 + rng.uniform(-1e-4, 1e-4, 50), -np.log(2) / 2 + rng.uniform(-1e-4, 1e-4, 50),
                 16.6 + rng.uniform(-0.1, 0.1, 50), -17.5 + rng.uniform(-0.1, 0.1, 50),
                 [88.72, 88.7228, 88.72284, 88.723, 89, 100], SPECIALS)
    elif name == "log":
        a = _f32(np.geomspace(1e-45, 3.4e38, 2000), 1 + rng.uniform(-1e-2, 1e-2, 1000),
                 np.sqrt(0.5) + rng.uniform(-1e-6, 1e-6, 100), -rng.uniform(0, 10, 100),
                 SPECIALS)
    elif name == "tanh":
        a = _f32(np.linspace(-12, 12, 2000), np.geomspace(1e-30, 1, 500),
                 -np.geomspace(1e-30, 1, 500), 0.75 + rng.uniform(-1e-3, 1e-3, 100), SPECIALS)
    elif name == "sigmoid":
        a = _f32(np.linspace(-100, 100, 3000), rng.uniform(-5, 5, 500), SPECIALS)
    elif name == "erf":
        a = _f32(np.linspace(-5, 5, 3000), np.geomspace(1e-30, 1, 250),
                 -np.geomspace(1e-30, 1, 250), 0.6 + rng.uniform(-1e-3, 1e-3, 100), SPECIALS)
    else:
        # |y * ln|x|| <= 80 for the accuracy targets, then negative bases with integral
        # (fine) and non-integral (nan) exponents, then every pair of special values.
        ln_x = rng.uniform(-30, 30, 2000)
        y_neg_int = rng.integers(-30, 31, 500)
        xs = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, math.inf, -math.inf,
              math.nan, 1e-45, -1e-45, FLT_MAX]
        ys = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 0.5, -0.5, 2.5, 1e9, 16777215.0,
              8388609.0, math.inf, -math.inf, math.nan, 1e-45]
        gx, gy = np.meshgrid(xs, ys)
        a = _f32(np.exp(ln_x), -rng.uniform(0.1, 10, 500), -rng.uniform(0.1, 10, 200), gx)
        b = _f32(rng.uniform(-80, 80, 2000) / np.maximum(np.abs(ln_x), 1), y_neg_int,
                 rng.integers(-5, 5, 200) + 0.25, gy)
    pad = -a.size % LANES
    a = np.concatenate([a, np.ones(pad, np.float32)])
    b = np.zeros_like(a) if b is None else np.concatenate([b, np.ones(pad, np.float32)])
    return a, b


def reference(name: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """float64 numpy (math.erf for erf) result, rounded to float32."""
    x, y = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(all="ignore"):
        if name == "sigmoid":
            e = np.exp(-np.abs(x))
            ref = np.where(x > 0, 1 / (1 + e), e / (1 + e))
        elif name == "erf":
            ref = np.array([math.erf(v) for v in x])
        elif name == "pow":
            ref = np.power(x, y)
        else:
            ref = getattr(np, name)(x)
        return ref.astype(np.float32)


def max_error(name: str, got: np.ndarray, ref: np.ndarray) -> float:
    """Checks non-finite, zero and subnormal results; returns the max error elsewhere.

    The error is relative for normal results (absolute for erf). Non-finite results
    must match exactly, zeros must keep their sign, and subnormal results may be off by
    up to FLT_MIN (flushing to zero is allowed).
    """
    finite = np.isfinite(ref)
    np.testing.assert_array_equal(got[~finite], ref[~finite])
    zeros = (ref == 0) & (got == 0)
    np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(ref[zeros]))
    got64, ref64 = got[finite].astype(np.float64), ref[finite].astype(np.float64)
    diff = np.abs(got64 - ref64)
    if name == "erf":
        return float(diff.max())
    tiny = np.abs(ref64) < FLT_MIN
    assert (diff[tiny] <= FLT_MIN).all()
    return float((diff[~tiny] / np.abs(ref64[~tiny])).max())


def same_bits(x: np.ndarray, y: np.ndarray) -> bool:
    """Bit-identical, except that NaN payloads and signs may differ."""
    nan = np.isnan(x)
    if not np.array_equal(nan, np.isnan(y)):
        return False
    return np.array_equal(x[~nan].view(np.int32), y[~nan].view(np.int32))


@pytest.mark.parametrize("name", ARITY)
def test_accuracy(name: str, target: str) -> None:
    """Scalar loop vs the float64 reference (``target`` comes from tests/conftest.py)."""
    a, b = inputs(name)
    got = kernel(name, target, 1)(a, b)
    assert max_error(name, got, reference(name, a, b)) <= TOLERANCE[name]


@pytest.mark.parametrize("name", ARITY)
def test_vector_values_match_scalar(name: str, target: str) -> None:
    """Explicit <4 x float> code computes exactly what the scalar loop computes."""
    a, b = inputs(name)
    assert same_bits(kernel(name, target, LANES)(a, b), kernel(name, target, 1)(a, b))


@pytest.mark.parametrize("name", ARITY)
def test_targets_agree_bitwise(name: str) -> None:
    """Only correctly rounded IEEE operations are used, so native and wasm32 agree."""
    a, b = inputs(name)
    assert same_bits(kernel(name, "native", 1)(a, b), kernel(name, "wasm32", 1)(a, b))


@pytest.mark.parametrize("name", ARITY)
def test_scalar_loop_vectorizes_on_wasm32(name: str) -> None:
    """The branch-free scalar code is widened to SIMD128 by the O3 loop vectorizer."""
    assert "<4 x float>" in str(optimize(build_kernel(name, 1), "wasm32"))


def test_rejects_non_float_operands() -> None:
    b = ir.IRBuilder(ir.Function(ir.Module(), ir.FunctionType(ir.VoidType(), []), "g")
                     .append_basic_block())
    with pytest.raises(TypeError):
        mathlib.exp(b, ir.Constant(ir.IntType(32), 1))
    with pytest.raises(TypeError):
        mathlib.pow(b, ir.Constant(F32, 1.0), ir.Constant(ir.VectorType(F32, 4), 1.0))
