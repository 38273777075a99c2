"""toolkit.codegen.minifloat against ml_dtypes (the formats' reference implementation, which
onnx.reference uses too): every code decodes to its value, and float32 values encode to
the nearest code, ties to even, at every boundary. The kernels are JIT-compiled natively
here; the end-to-end Cast tests run the same IR on wasm32."""
from __future__ import annotations

import ctypes
import math

import ml_dtypes
import numpy as np
import pytest
from llvmlite import binding as llvm
from llvmlite import ir

from toolkit.codegen import minifloat
from toolkit.codegen.minifloat import FORMATS, decode_value

llvm.initialize_all_targets()
llvm.initialize_all_asmprinters()
I64, F32, I8, I16 = ir.IntType(64), ir.FloatType(), ir.IntType(8), ir.IntType(16)


def _jit(build, lanes: int):
    """``void f(src*, dst*, i64 n)`` applying ``build(b, value)`` to ``lanes`` elements per
    step; returns a callable and the engine (keep it alive)."""
    mod = ir.Module("m")
    ptr = ir.PointerType()
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [ptr, ptr, I64]), "f")
    src, dst, n = fn.args
    entry, head, body, done = map(fn.append_basic_block, ("entry", "head", "body", "done"))
    b = ir.IRBuilder(entry)
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(I64)
    i.add_incoming(ir.Constant(I64, 0), entry)
    b.cbranch(b.icmp_signed("<", i, n), body, done)
    b.position_at_end(body)
    out_t, v = build(b, src, i, lanes)
    b.store(v, b.gep(dst, [i], source_etype=out_t))
    nxt = b.add(i, ir.Constant(I64, lanes))
    i.add_incoming(nxt, body)
    b.branch(head)
    b.position_at_end(done)
    b.ret_void()
    tm = llvm.Target.from_default_triple().create_target_machine(opt=2, jit=True)
    m = llvm.parse_assembly(str(mod))
    m.verify()
    engine = llvm.create_mcjit_compiler(m, tm)
    engine.finalize_object()
    f = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(engine.get_function_address("f"))
    return f, engine


def _vec(t, lanes):
    return t if lanes == 1 else ir.VectorType(t, lanes)


def encoder(name: str, saturate: bool, lanes: int, store_t=I8):
    def build(b, src, i, lanes):
        x = b.load(b.gep(src, [i], source_etype=F32), typ=_vec(F32, lanes))
        return store_t, minifloat.encode(b, name, x, saturate)
    f, engine = _jit(build, lanes)

    def run(x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, np.float32)
        out = np.zeros(x.size, np.uint8 if store_t is I8 else np.uint16)
        f(x.ctypes.data, out.ctypes.data, x.size)
        return out
    run.engine = engine
    return run


def decoder(name: str, lanes: int, raw_t=I8):
    def build(b, src, i, lanes):
        raw = b.load(b.gep(src, [i], source_etype=raw_t), typ=_vec(raw_t, lanes))
        v = minifloat.decode(b, name, raw)
        return (F32 if name not in minifloat.SMALL_INTS else I8), v
    f, engine = _jit(build, lanes)

    def run(codes: np.ndarray) -> np.ndarray:
        small = name in minifloat.SMALL_INTS
        out = np.zeros(codes.size, np.int8 if small else np.float32)
        f(codes.ctypes.data, out.ctypes.data, codes.size)
        return out
    run.engine = engine
    return run


def _probe_values(name: str) -> np.ndarray:
    """Every value of the format, the midpoints between neighbours and a float32 step either
    side of each, zeros, infinities, NaN, huge and tiny values, both signs."""
    fmt = FORMATS[name]
    vals = sorted({decode_value(fmt, c) for c in range(fmt.codes)} - {math.nan}, key=float)
    vals = [v for v in vals if not math.isnan(v) and math.isfinite(v)]
    mids = [(a + b) / 2 for a, b in zip(vals, vals[1:])]
    probe = np.array(vals + mids + [1e30, 1e-30, 1e-45, 3.4e38, math.inf], np.float32)
    probe = np.concatenate([probe, np.nextafter(probe, np.float32(np.inf)), np.nextafter(probe, np.float32(-np.inf))])
    probe = np.concatenate([probe, -probe, np.array([0.0, -0.0, np.nan], np.float32)])
    return probe


def _want(name: str, x: np.ndarray, saturate: bool) -> np.ndarray:
    t = getattr(ml_dtypes, name)
    if saturate:  # ONNX: out of range (infinities included) becomes the largest finite value
        m = float(ml_dtypes.finfo(t).max)
        x = np.where(np.isnan(x), x, np.clip(x, -m, m)).astype(np.float32)
    return x.astype(t).view(np.uint8)


@pytest.mark.parametrize("lanes", [1, 4])
@pytest.mark.parametrize("name", list(FORMATS))
def test_decode_every_code(name, lanes):
    fmt = FORMATS[name]
    codes = np.arange(fmt.codes, dtype=np.uint8)
    codes = np.concatenate([codes, codes[: (-len(codes)) % 4]]) if lanes > 1 else codes
    got = decoder(name, lanes)(codes)
    want = codes.view(getattr(ml_dtypes, name)).astype(np.float32)
    np.testing.assert_array_equal(got, want)  # NaN where NaN (of either sign); zeros keep their sign:
    num = ~np.isnan(want)
    assert (np.signbit(got[num]) == np.signbit(want[num])).all()


# float4 always saturates (it has neither infinity nor NaN)
@pytest.mark.parametrize("name,saturate", [(n, s) for n in FORMATS for s in (True, False)
                                           if s or n != "float4_e2m1fn"])
def test_encode_rounds_to_nearest_even(name, saturate):
    x = _probe_values(name)
    x = np.concatenate([x, x[: (-len(x)) % 4]])
    for lanes in (1, 4):
        got = encoder(name, saturate, lanes)(x)
        want = _want(name, x, saturate)
        if FORMATS[name].fnuz or name == "float4_e2m1fn":
            bad = got != want
        else:  # a NaN may carry either sign
            nan = np.isnan(x)
            bad = (got != want) & ~nan | nan & ((got & 0x7F) < FORMATS[name].nan_from)
        assert not bad.any(), [(float(a), hex(g), hex(w)) for a, g, w in zip(x[bad], got[bad], want[bad])][:8]


def test_bfloat16_round_trip():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(4000).astype(np.float32) * 10.0 ** rng.integers(-30, 30, 4000),
                        np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 3.4e38, 1e-45], np.float32)])
    x = x.astype(np.float32)
    x = np.concatenate([x, x[: (-len(x)) % 4]])
    for lanes in (1, 4):
        got = encoder("bfloat16", True, lanes, store_t=I16)(x)
        want = x.astype(ml_dtypes.bfloat16).view(np.uint16)
        nan = np.isnan(x)
        np.testing.assert_array_equal(got[~nan], want[~nan])
        assert np.isnan(got[nan].view(ml_dtypes.bfloat16).astype(np.float32)).all()
        back = decoder("bfloat16", lanes, raw_t=I16)(want)
        np.testing.assert_array_equal(back, want.view(ml_dtypes.bfloat16).astype(np.float32))


@pytest.mark.parametrize("name", list(minifloat.SMALL_INTS))
def test_small_ints_wrap_and_extend(name):
    bits, signed = minifloat.SMALL_INTS[name]
    t = getattr(ml_dtypes, name)
    codes = np.arange(1 << bits, dtype=np.uint8)
    got = decoder(name, 1)(codes)
    np.testing.assert_array_equal(got, codes.view(t).astype(np.int8))
