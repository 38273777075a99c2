"""Object emission over forked processes (toolkit.codegen.parallel): a large module split
into parts that LLVM emits in separate processes and the linker joins, and a model's two
wasm variants sharing one optimization of each part. Models compiled with the split forced
are checked against onnx.reference on every target; the parts of a hand-built module are
joined by LLVM's linker and run, against numpy."""
import ctypes
import json
import os
import re
import time

import llvmlite.binding as llvm
import numpy as np
import pytest
from llvmlite import ir
from onnx import TensorProto, helper

import toolkit.compiler
import wasm_runtime
import wasmtime
from onnx.reference import ReferenceEvaluator
from toolkit.codegen import parallel as P
from toolkit.codegen.kernel import F32, I32, constant_global
from toolkit.codegen.target import emit_object, emit_variants, get_target, new_module, relaxed_simd
from util import RELAXED, check_model, const, make_model, rand, vinfo

TABLE = [1.5, 4.0]
KERNELS = 3


def _hand_module(mutable_state: bool = False, target: str = "native") -> ir.Module:
    """Kernels (internal) that read a read-only table and call an internal helper, a table
    of them, and an exported entry that calls kernel i through the table: kernel i gives
    2x + 5i * TABLE[i % 2]."""
    m = new_module(get_target(target), "hand")
    fty = ir.FunctionType(F32, [F32])
    table = constant_global(m, "table", ir.Constant(ir.ArrayType(F32, 2), TABLE))
    twice = ir.Function(m, fty, "twice")
    twice.linkage = "internal"
    b = ir.IRBuilder(twice.append_basic_block())
    b.ret(b.fmul(twice.args[0], ir.Constant(F32, 2.0)))
    kernels = []
    for i in range(KERNELS):
        k = ir.Function(m, fty, f"k{i}")
        k.linkage = "internal"
        b = ir.IRBuilder(k.append_basic_block())
        t = b.load(b.gep(table, [ir.Constant(I32, 0), ir.Constant(I32, i % 2)]))
        v = b.call(twice, [k.args[0]])
        for _ in range(5 * i):  # kernels of different sizes
            v = b.fadd(v, t)
        b.ret(v)
        kernels.append(k)
    if mutable_state:
        g = ir.GlobalVariable(m, F32, "state")
        g.linkage = "internal"
        g.initializer = ir.Constant(F32, 0.0)
    fptr = fty.as_pointer()
    ktab = constant_global(m, "kernel_table", ir.Constant(ir.ArrayType(fptr, KERNELS), kernels))
    entry = ir.Function(m, ir.FunctionType(F32, [I32, F32]), "entry")
    b = ir.IRBuilder(entry.append_basic_block())
    fp = b.load(b.gep(ktab, [ir.Constant(I32, 0), entry.args[0]]))
    b.ret(b.call(fp, [entry.args[1]]))
    return m


def test_split_moves_internal_kernels_only(monkeypatch):
    m = _hand_module()
    assert P.split(m, 2) == [], "a module this small stays whole"
    monkeypatch.setattr(P, "SPLIT_MIN_INSTRUCTIONS", 0)
    parts = P.split(m, 2)
    # sizes 4, 9 and 14 instructions, against the 6 that stay (the helper, called, and the
    # entry, exported, never move): k2 to part 1, k1 to part 0, k0 to part 1
    assert parts == [P.Part(("k2", "k0"), False)]
    assert P.split(_hand_module(mutable_state=True), 2) == [], "mutable internal state is never copied"


def test_split_keeps_unswitched_kernels_apart(monkeypatch):
    """Kernels that want O3's loop unswitching never share a part with those that do not,
    and the others still spread over the cores: one part more."""
    monkeypatch.setattr(P, "SPLIT_MIN_INSTRUCTIONS", 0)
    m = _hand_module()
    # k2 (14 of 33 instructions) gets a part of its own; k1 (9) goes to the other part
    # without unswitching and k0 (4) stays in part 0 (6)
    assert P.split(m, 2, {"k2"}) == [P.Part(("k1",), False), P.Part(("k2",), True)]
    # k1 and k2, 23 of 33, take one of two cores' parts; k0 takes the other part without it
    assert P.split(m, 2, {"k1", "k2"}) == [P.Part(("k0",), False), P.Part(("k2", "k1"), True)]
    # on four cores k2's share would be two parts, but one kernel fills one: the others spread
    assert P.split(m, 4, {"k2"}) == [P.Part(("k1",), False), P.Part(("k0",), False), P.Part(("k2",), True)]
    # all of them, 27 of 33: two parts with it, part 0 keeps the rest
    assert P.split(m, 2, {"k0", "k1", "k2"}) == [P.Part(("k2",), True), P.Part(("k1", "k0"), True)]


def test_parts_join_and_run(monkeypatch):
    """The main part declares the moved kernel; the part defines it, hidden, with its own
    copies of the helper and the table; LLVM links the two and the entry runs every kernel."""
    monkeypatch.setattr(P, "SPLIT_MIN_INSTRUCTIONS", 0)
    m = _hand_module()
    (moved,) = (p.names for p in P.split(m, 2))
    main, part = P.main_text(m, moved), P.part_text(m, moved)
    assert 'declare hidden float @"k2"(float' in main and 'define internal float @"k2"' not in main
    assert 'define hidden float @"k2"(float' in part and 'define hidden float @"k0"(float' in part
    assert 'define internal float @"twice"' in part and '@"table" = internal constant' in part
    assert '@"entry"' not in part and '@"k1"' not in part
    assert 'define internal float @"k2"' in str(m), "the module itself is left as it was"

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    joined = llvm.parse_assembly(main)
    joined.link_in(llvm.parse_assembly(part))
    joined.verify()
    engine = llvm.create_mcjit_compiler(joined, llvm.Target.from_default_triple().create_target_machine())
    engine.finalize_object()
    entry = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int32, ctypes.c_float)(engine.get_function_address("entry"))
    x = np.float32(0.75)
    for i in range(KERNELS):
        want = np.float32(2) * x
        for _ in range(5 * i):
            want = want + np.float32(TABLE[i % 2])
        assert entry(i, x) == want, i


def test_failed_child_reruns_here():
    parent = os.getpid()

    def only_here() -> bytes:
        if os.getpid() != parent:
            raise RuntimeError("a child that fails (its traceback goes to stderr)")
        return b"rerun"

    assert P.run_forked([lambda: b"here", lambda: b"x" * 300_000, only_here]) == [b"here", b"x" * 300_000, b"rerun"]


def test_children_do_not_outlive_an_error_here(tmp_path):
    """The job here fails (as Ctrl-C would) while a child still works: the error comes at
    once, and the child is gone."""
    started = tmp_path / "child"

    def child() -> bytes:
        started.write_text(str(os.getpid()))
        time.sleep(60)
        return b"late"

    def here() -> bytes:
        while not started.exists() or not started.read_text():
            time.sleep(0.01)
        raise KeyboardInterrupt

    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        P.run_forked([here, child])
    assert time.monotonic() - t0 < 30
    with pytest.raises(ProcessLookupError):
        os.kill(int(started.read_text()), 0)


def test_no_fork_runs_here(monkeypatch):
    def refuse():
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", refuse)
    assert P.run_forked([lambda: b"a", lambda: b"b"]) == [b"a", b"b"]


def _model():
    """Two MatMuls, Erf, a float8 round trip (whose decode table is a read-only global) and a
    Softmax: several kernels to split, one of them with a table to copy, one (the Softmax)
    optimized without O3's loop unswitching."""
    rng = np.random.default_rng(5)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]),
             helper.make_node("Erf", ["h"], ["e"]),
             helper.make_node("Cast", ["e"], ["q"], to=TensorProto.FLOAT8E4M3FN),
             helper.make_node("Cast", ["q"], ["d"], to=TensorProto.FLOAT),
             helper.make_node("Softmax", ["d"], ["s"]),
             helper.make_node("MatMul", ["s", "w2"], ["y"])]
    return make_model(nodes, [vinfo("x", np.float32, ["n", 24])], [vinfo("y", np.float32, None)],
                      [const("w1", rand(rng, (24, 40)) / 4), const("w2", rand(rng, (40, 20)))])


@pytest.mark.parametrize("target", ["wasm32", "native", RELAXED])
def test_model_compiled_in_parts(target, monkeypatch, tmp_path):
    monkeypatch.setattr(P, "SPLIT_MIN_INSTRUCTIONS", 0)
    monkeypatch.setattr(P, "workers", lambda: 2)  # the parts below are two cores' (forked all the same)
    objects = []
    link = toolkit.compiler.link_variants

    def spy(jobs, *args, **kw):
        objects.extend(len(kernel_objects) for kernel_objects, _ in jobs.values())
        return link(jobs, *args, **kw)

    monkeypatch.setattr(toolkit.compiler, "link_variants", spy)
    log = tmp_path / "parts"  # per part: its kernels' names, and whether O3's loop unswitching ran
    emit = P.emit_variants

    def record(text, targets, opt=3, unswitch=True):  # in the forked children too
        with open(log, "a") as f:
            f.write(json.dumps([re.findall(r'define (?:hidden|internal) \S+ @"?(k\d+_\w+)', text), unswitch]) + "\n")
        return emit(text, targets, opt, unswitch)

    monkeypatch.setattr(P, "emit_variants", record)
    rng = np.random.default_rng(6)
    check_model(_model(), target, [{"x": rand(rng, (n, 24))} for n in (1, 7, 0)], rtol=1e-4, atol=1e-4)
    # three parts, each optimized once and emitted for every variant: the MatMuls (Erf
    # is the first one's epilogue) and the casts with O3's loop unswitching, in two parts,
    # and the Softmax without it in part 0; each kernel in one part
    assert objects == ([3, 3] if target == RELAXED else [3])
    optimized = [json.loads(line) for line in log.read_text().splitlines()]
    kernels = [(k, on) for names, on in optimized for k in names]
    assert len(optimized) == 3 and len(kernels) == len(dict(kernels)) == 5, optimized
    assert all(on == ("softmax" not in k) for k, on in kernels), optimized


def test_variants_share_one_optimization(tmp_path, monkeypatch):
    """Both variants' files, from parts optimized once for the relaxed variant, against
    onnx.reference; and the relaxed variant's object is exactly what emitting it alone gives."""
    monkeypatch.setattr(P, "SPLIT_MIN_INSTRUCTIONS", 0)
    model = _model()
    out = toolkit.compiler.compile_model(model, tmp_path / "m.wasm", target="wasm32", relaxed=True)
    rng = np.random.default_rng(7)
    for n in (1, 5, 0):
        x = rand(rng, (n, 24))
        want = ReferenceEvaluator(model).run(None, {"x": x})[0]
        for v, path in out.variants.items():
            got = wasm_runtime.load(path, variant=v).run({"x": x})["y"]
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"{v}, n={n}")
    # the baseline holds no relaxed-SIMD instruction: an engine without it validates the file
    cfg = wasmtime.Config()
    cfg.wasm_relaxed_simd = False
    engine = wasmtime.Engine(cfg)
    wasmtime.Module(engine, out.variants["baseline"].read_bytes())
    with pytest.raises(wasmtime.WasmtimeError):
        wasmtime.Module(engine, out.variants["relaxed-simd"].read_bytes())
    wasm = get_target("wasm32")
    text = str(_hand_module(target="wasm32"))
    both = emit_variants(text, [wasm, relaxed_simd(wasm)])
    assert both[1] == emit_object(text, relaxed_simd(wasm)) and len(both) == 2 and both[0]


def test_joined_objects_round_trip():
    objs = [b"", b"\x00abc", bytes(range(256)) * 3]
    assert P._parted(P._joined(objs)) == objs
