#!/usr/bin/env python3
"""The GEMM kernel's GFLOP/s against this machine's measured peak, so the gap is a number.

The peak is a multiply-add loop built the way the GEMM microkernel is
(toolkit/codegen/gemm.py). It is LLVM IR from llvmlite for the same Target, and each step is
simd.mac(acc, x, y) on vectors of Target.f32_lanes: FMA natively where the CPU has it, a
multiply and an add on wasm32 SIMD128. It keeps several independent accumulators, so that
throughput bounds the loop and latency does not. The best of several accumulator counts is
the peak. Then float32 MatMul models go through the normal compiler
(toolkit.compiler.compile_model) and are timed:

  const B       [1024, 1024] @ a constant [1024, 1024] (B packed at compile time)
  run-time B    [1024, 1024] @ [1024, 1024], both inputs (B packed by the kernel)
  symbolic M    [m, 1024] @ a constant [1024, 1024], compiled with m symbolic, run at m = 1000

Engines: wasm32 under wasmtime (the Python host), wasm32 in Node (the JS loader; the peak
module through WebAssembly.instantiate, both in gemm_peak_node.mjs), each for the baseline
and the relaxed-SIMD variant (``compile --relaxed-simd``), and native. One thread.

    python benchmarks/gemm_peak.py [--quick] [--out build/gemm_peak.md]
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from llvmlite import ir
from onnx import TensorProto, helper

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
import wasm_runtime  # noqa: E402
from node_bin import node as node_binary  # noqa: E402
from node_bin import relaxed_flags  # noqa: E402
from node_bin import version as node_version  # noqa: E402
from toolkit import zig  # noqa: E402
from toolkit.codegen.simd import mac  # noqa: E402
from toolkit.codegen.kernel import splat  # noqa: E402
from toolkit.codegen.gemm import tile_for  # noqa: E402
from toolkit.codegen.kernel import F32, I32  # noqa: E402
from toolkit.codegen.target import Target, emit_object, get_target, new_module, relaxed_simd, variant  # noqa: E402
from toolkit.compiler import compile_model  # noqa: E402

ACCUMULATORS = (8, 10, 12, 14)  # independent chains; a peak_<n> function each
PEAK_SECONDS = 0.3  # per timed call of a peak function


# ----------------------------------------------------------------------------- the peak loop


def peak_module(target: Target) -> ir.Module:
    """``float peak_<n>(i32 iters, float x, float y)`` for each accumulator count n:
    ``iters`` steps of ``acc[k] = mac(y, acc[k], x)``, i.e. ``acc * x + y``, for k < n.
    Every product reads its own accumulator, so LLVM can neither share one product between
    the chains nor hoist it out of the loop (``contract`` alone does not allow reassociating
    either). A step is ``2 * n * lanes`` flops. With x below 1 the values settle at
    ``y / (1 - x)``: no overflow, no denormals. Returns the accumulators' sum so none is dead."""
    m = new_module(target, "peak")
    lanes = target.f32_lanes
    vec = ir.VectorType(F32, lanes)
    for n in ACCUMULATORS:
        fn = ir.Function(m, ir.FunctionType(F32, [I32, F32, F32]), name=f"peak_{n}")
        iters, x, y = fn.args
        entry, loop, done = (fn.append_basic_block(s) for s in ("entry", "loop", "done"))
        b = ir.IRBuilder(entry)
        xv, yv = splat(b, x, lanes), splat(b, y, lanes)
        b.branch(loop)
        b.position_at_end(loop)
        i = b.phi(I32, name="i")
        accs = [b.phi(vec, name=f"acc{k}") for k in range(n)]
        new = [mac(b, yv, acc, xv) for acc in accs]
        i_next = b.add(i, ir.Constant(I32, 1))
        b.cbranch(b.icmp_signed("<", i_next, iters), loop, done)
        i.add_incoming(ir.Constant(I32, 0), entry)
        i.add_incoming(i_next, loop)
        for k, (acc, nxt) in enumerate(zip(accs, new)):
            acc.add_incoming(ir.Constant(vec, [float(k)] * lanes), entry)
            acc.add_incoming(nxt, loop)
        b.position_at_end(done)
        total = new[0]
        for v in new[1:]:
            total = b.fadd(total, v)
        s = b.extract_element(total, ir.Constant(I32, 0))
        for lane in range(1, lanes):
            s = b.fadd(s, b.extract_element(total, ir.Constant(I32, lane)))
        b.ret(s)
    return m


def _zig(*args: str, cwd: Path) -> None:
    r = subprocess.run([*zig.command(), *args], cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"zig {args[0]} failed:\n{r.stderr.strip()}")


def build_peak(target: Target, out: Path) -> Path:
    """The peak functions as a .wasm (no imports) or a shared library."""
    (out / "peak.o").write_bytes(emit_object(peak_module(target), target))
    path = out / ("peak.wasm" if target.is_wasm else "peak.so")
    if target.is_wasm:
        _zig("wasm-ld", "--no-entry", "--strip-all", "-O2", *(f"--export=peak_{n}" for n in ACCUMULATORS),
             "peak.o", "-o", path.name, cwd=out)
    else:
        _zig("cc", "-target", target.zig_target, "-shared", "peak.o", "-o", path.name, cwd=out)
    return path


def peak_flops(target: Target, n: int, iters: int) -> float:
    return 2.0 * n * target.f32_lanes * iters


def time_peak(call, target: Target, seconds: float) -> tuple[float, int]:
    """(best GFLOP/s, its accumulator count): each function calibrated to ``seconds`` a call,
    warmed up, then timed three times (the fastest counts)."""
    best = (0.0, 0)
    for n in ACCUMULATORS:
        iters = 1 << 16
        while True:  # calibrate (and warm up: V8 optimizes a function after it has run)
            t = time.perf_counter()
            call(n, iters)
            dt = time.perf_counter() - t
            if dt > seconds / 4:
                break
            iters *= 4
        iters = min(int(iters * seconds / dt), 2**31 - 1)
        dt = min(_timed(call, n, iters) for _ in range(3))
        best = max(best, (peak_flops(target, n, iters) / dt / 1e9, n))
    return best


def _timed(call, n: int, iters: int) -> float:
    t = time.perf_counter()
    call(n, iters)
    return time.perf_counter() - t


def wasmtime_peak(path: Path, target: Target, seconds: float) -> tuple[float, int]:
    import wasmtime

    cfg = wasmtime.Config()  # as wasm_runtime.wasm_host configures it
    cfg.wasm_simd = True
    cfg.wasm_bulk_memory = True
    engine = wasmtime.Engine(cfg)
    store = wasmtime.Store(engine)
    inst = wasmtime.Instance(store, wasmtime.Module.from_file(engine, str(path)), [])
    fns = {n: inst.exports(store)[f"peak_{n}"] for n in ACCUMULATORS}
    return time_peak(lambda n, iters: fns[n](store, iters, 0.999, 1e-3), target, seconds)


def native_peak(path: Path, target: Target, seconds: float) -> tuple[float, int]:
    lib = ctypes.CDLL(str(path))
    fns = {}
    for n in ACCUMULATORS:
        fns[n] = getattr(lib, f"peak_{n}")
        fns[n].restype = ctypes.c_float
        fns[n].argtypes = [ctypes.c_int32, ctypes.c_float, ctypes.c_float]
    return time_peak(lambda n, iters: fns[n](iters, 0.999, 1e-3), target, seconds)


# ----------------------------------------------------------------------------- the GEMM cases


def _matmul(b_const: np.ndarray | None, m_dim, k: int, n: int) -> onnx.ModelProto:
    F = TensorProto.FLOAT
    inputs = [helper.make_tensor_value_info("a", F, [m_dim, k])]
    inits = []
    if b_const is None:
        inputs.append(helper.make_tensor_value_info("b", F, [k, n]))
    else:
        inits.append(onnx.numpy_helper.from_array(b_const, "b"))
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "gemm", inputs,
                          [helper.make_tensor_value_info("y", F, [m_dim, n])], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def cases(size: int) -> list[tuple[str, onnx.ModelProto, dict[str, np.ndarray], float]]:
    """(name, model, feeds, flops) of each timed MatMul."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size)).astype(np.float32)
    b = rng.standard_normal((size, size)).astype(np.float32)
    m = size - size // 40  # not a multiple of any tile's rows
    return [
        ("const B", _matmul(b, size, size, size), {"a": a}, 2.0 * size ** 3),
        ("run-time B", _matmul(None, size, size, size), {"a": a, "b": b}, 2.0 * size ** 3),
        (f"symbolic M (m={m})", _matmul(b, "m", size, size), {"a": a[:m]}, 2.0 * m * size * size),
    ]


def _expected(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    b = feeds["b"] if "b" in feeds else onnx.numpy_helper.to_array(model.graph.initializer[0])
    return feeds["a"].astype(np.float64) @ b.astype(np.float64)


def time_python(model: wasm_runtime.Model, feeds, warmup_s: float, min_time_s: float) -> float:
    """The fastest ms of ``model.run(feeds)`` after a warm-up: like the peak's, the run
    other processes disturbed least."""
    end = time.perf_counter() + warmup_s
    while time.perf_counter() < end:
        model.run(feeds)
    times = []
    end = time.perf_counter() + min_time_s
    while len(times) < 3 or time.perf_counter() < end:
        t = time.perf_counter()
        model.run(feeds)
        times.append((time.perf_counter() - t) * 1e3)
    return min(times)


class Node:
    """gemm_peak_node.mjs as a child process, one JSON request per line."""

    def __init__(self, *flags: str):
        self.proc = subprocess.Popen([str(node_binary()), *flags, str(HERE / "gemm_peak_node.mjs")],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)

    def __call__(self, op: str, **req) -> dict:
        self.proc.stdin.write(json.dumps({"op": op, **req}) + "\n")
        self.proc.stdin.flush()
        reply = json.loads(self.proc.stdout.readline())
        if not reply.pop("ok"):
            raise RuntimeError(f"node {op}: {reply['error']}")
        return reply

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def node_peak(node: Node, path: Path, target: Target, seconds: float) -> tuple[float, int]:
    runs = node("peak", wasm=str(path), functions=[f"peak_{n}" for n in ACCUMULATORS], args=[0.999, 1e-3],
                seconds=seconds)["runs"]
    return max((peak_flops(target, int(r["name"].split("_")[1]), r["iters"]) / r["ms"] / 1e6,
                int(r["name"].split("_")[1])) for r in runs)


def _raw_inputs(feeds: dict[str, np.ndarray], tmp: Path) -> list[dict]:
    out = []
    for name, arr in feeds.items():
        f = tmp / f"{name}.bin"
        np.ascontiguousarray(arr).tofile(f)
        out.append({"name": name, "dtype": str(arr.dtype), "shape": list(arr.shape), "file": str(f)})
    return out


# ----------------------------------------------------------------------------- the report


def host_line(native: Target) -> str:
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                 platform.processor() or platform.machine())
    node = node_version()
    from importlib.metadata import version

    return (f"{model} (LLVM CPU {native.cpu}), {os.cpu_count()} logical CPUs, one thread; wasmtime "
            f"{version('wasmtime')}, Node {node}, llvmlite {version('llvmlite')}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="shorter timings and 512^3 products")
    ap.add_argument("--size", type=int, help="the products' M, K and N (default 1024; 512 with --quick)")
    ap.add_argument("--out", type=Path, help="also write the table (markdown) here")
    args = ap.parse_args()
    size = args.size or (512 if args.quick else 1024)
    warmup_s, min_time_s = (0.3, 0.5) if args.quick else (1.0, 2.0)
    peak_s = 0.1 if args.quick else PEAK_SECONDS
    wasm, native = get_target("wasm32"), get_target("native")
    relaxed = relaxed_simd(wasm)
    tmp = Path(tempfile.mkdtemp(prefix="symwasm-peak-"))
    todo = cases(size)
    rows = []  # (engine, (peak, accumulators), tile, [gflops per case])
    node = Node()
    # Node 20's V8 validates relaxed SIMD only behind a flag, which Node 22 and later reject
    node_relaxed = Node(*relaxed_flags())
    try:
        for target in (wasm, relaxed, native):
            is_relaxed = variant(target) != "baseline"
            out = tmp / (target.name + ("-relaxed" if is_relaxed else ""))
            out.mkdir()
            peak_path = build_peak(target, out)
            tile = tile_for(target)
            tile_text = f"{tile.mr}x{tile.nr}, {target.f32_lanes} lanes"
            paths = []
            for i, (name, model, feeds, _) in enumerate(todo):
                path = out / f"case{i}.{'wasm' if target.is_wasm else 'so'}"
                path = compile_model(model, path, target=target.name, relaxed=is_relaxed).variants.get(
                    variant(target), path)
                got = wasm_runtime.load(path, threads=1).run(feeds)["y"]
                np.testing.assert_allclose(got, _expected(model, feeds), rtol=1e-3, atol=1e-2 * np.sqrt(size),
                                           err_msg=f"{name} on {target.name}")
                paths.append(path)
            name = "wasm32 relaxed SIMD" if is_relaxed else "wasm32"
            engines = [(f"{name}, wasmtime", wasmtime_peak), (f"{name}, Node", None)] if target.is_wasm \
                else [(f"native ({target.cpu})", native_peak)]
            child = node_relaxed if is_relaxed else node
            for engine, peak_fn in engines:
                print(f"{engine}: peak ...", file=sys.stderr, flush=True)
                peak = peak_fn(peak_path, target, peak_s) if peak_fn else node_peak(child, peak_path, target, peak_s)
                gflops = []
                for (name, model, feeds, flops), path in zip(todo, paths):
                    if peak_fn is None:
                        child("load", wasm=str(path))
                        ms = min(child("bench", inputs=_raw_inputs(feeds, tmp), warmup_s=warmup_s,
                                      min_time_s=min_time_s, min_runs=3)["times_ms"])
                    else:
                        ms = time_python(wasm_runtime.load(path, threads=1), feeds, warmup_s, min_time_s)
                    gflops.append(flops / ms / 1e6)
                    print(f"  {name}: {ms:.1f} ms, {gflops[-1]:.1f} GFLOP/s", file=sys.stderr, flush=True)
                rows.append((engine, peak, tile_text, gflops))
    finally:
        node.close()
        node_relaxed.close()
    names = [name for name, *_ in todo]
    lines = [f"# GEMM kernel against the measured peak ({size}x{size}x{size} float32 MatMul)", "",
             f"Host: {host_line(native)}.", "",
             "| engine | GEMM tile | peak GFLOP/s (accumulators) | " + " | ".join(names) + " |",
             "| --- | --- | ---: |" + " ---: |" * len(names)]
    for engine, (peak, accs), tile_text, gflops in rows:
        cells = [f"{g:.1f} ({100 * g / peak:.0f}%)" for g in gflops]
        lines.append(f"| {engine} | {tile_text} | {peak:.1f} ({accs}) | " + " | ".join(cells) + " |")
    lines += ["", "Each case cell is the kernel's GFLOP/s (2·M·K·N over the fastest run, host call included) "
              "and its percentage of that engine's peak. The peak is the best of "
              f"{', '.join(map(str, ACCUMULATORS))} independent `acc * x + y` chains on vectors of the "
              "target's lanes, built with the GEMM kernel's `mac` (FMA natively when the CPU has it; a "
              "multiply and an add on wasm32, whose SIMD128 has no fused multiply-add; `f32x4.relaxed_madd` "
              "in the relaxed-SIMD variant, `compile --relaxed-simd`, which Node 20 runs only with "
              "`--experimental-wasm-relaxed-simd`).", ""]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
