"""The ``symwasm`` command: compile, run and inspect models. ``run`` and ``inspect`` need only
the runtime (numpy, wasmtime): nothing of the compiler is imported for them."""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from wasm_runtime.metadata import SYMBOL_KINDS, declared_dim, shape_text

EPILOG = """examples:
  symwasm compile model.onnx -o model.wasm
  symwasm compile model.onnx -o model.so --target native --bind batch=1
  symwasm compile model.onnx --target native --cpu x86-64-v3   (runs on any CPU with AVX2 and FMA)
  symwasm compile model.onnx --bind seq=128,batch=1 --static   (fails unless every shape is then known)
  symwasm compile model.onnx --range seq=1:512   (or --max seq=512: memory reserved for the largest shapes)
  symwasm inspect model.wasm --bind batch=1,seq=128   (with the memory those sizes need)
  symwasm run model.wasm --input x=x.npy --save-dir out/
  symwasm run model.wasm --random n=4      (random inputs, symbol n bound to 4)
  symwasm run model.wasm --random n=4 --benchmark 200   (load, first-run and steady-state times)
  symwasm diff model.onnx --bind batch=1,seq=16   (symwasm against onnxruntime: run this first)
  symwasm diff model.onnx --inputs x.npz --nodes   (names the first node that diverges)
"""

COMPILER_EXTRA = "symwasm[compiler]"



def _parse_binds(items: list[str], what: str) -> dict[str, int]:
    """NAME=VALUE items, each possibly a comma-separated list (``seq=128,batch=1``)."""
    out = {}
    for item in (part for group in items for part in group.split(",") if part):
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise SystemExit(f"error: {what} expects NAME=VALUE, got '{item}'")
        try:
            out[name] = int(value)
        except ValueError:
            raise SystemExit(f"error: {what} {name}: '{value}' is not an integer") from None
    return out


def _parse_ranges(items: list[str]) -> dict[str, tuple[int | None, int | None]]:
    out = {}
    for item in items:
        name, sep, span = item.partition("=")
        lo, colon, hi = span.partition(":")
        try:
            if not sep or not name or not colon:
                raise ValueError
            out[name] = (int(lo) if lo else None, int(hi) if hi else None)
        except ValueError:
            raise SystemExit(f"error: --range expects NAME=MIN:MAX (either may be left out), got '{item}'") from None
    return out


def _lacks_compiler(command: str, e: ModuleNotFoundError) -> int:
    """Exit status 2 with what to install, for a command that needs the compiler's packages
    in a runtime-only installation (a missing module of our own is a bug: raised)."""
    if (e.name or "").split(".")[0] in ("toolkit", "wasm_runtime"):
        raise e
    print(f"error: symwasm {command} needs the compiler's packages, and this installation lacks them "
          f"(no module named '{e.name}'): pip install '{COMPILER_EXTRA}'", file=sys.stderr)
    return 2


def cmd_compile(args) -> int:
    try:
        from .codegen.target import get_target
        from .compiler import compile_model
        from .ir.graph import CompileError
        from .link import LinkError
    except ModuleNotFoundError as e:
        return _lacks_compiler("compile", e)

    try:
        tgt = get_target(args.target, args.cpu)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.relaxed_simd and not tgt.is_wasm:
        print("error: --relaxed-simd is a wasm32 variant; the native target uses the CPU's own FMA "
              "(see --cpu)", file=sys.stderr)
        return 2
    src = Path(args.model)
    out = Path(args.output) if args.output else src.with_suffix(".wasm" if args.target == "wasm32" else ".so")
    binds = _parse_binds(args.bind, "--bind")
    ranges = _parse_ranges(args.range)
    for name, hi in _parse_binds(args.max, "--max").items():
        lo, old_hi = ranges.get(name, (None, None))
        ranges[name] = (lo, hi if old_hi is None else min(hi, old_hi))
    progress = None if args.quiet else (lambda msg: print(f"  {msg}", file=sys.stderr, flush=True))
    if not args.quiet:
        cpu = "" if tgt.is_wasm else f" (CPU {tgt.cpu})"
        print(f"compiling {src} for {args.target}{cpu}", file=sys.stderr, flush=True)
    try:
        r = compile_model(src, out, target=args.target, binds=binds, progress=progress, ranges=ranges,
                          static=args.static, cpu=args.cpu, relaxed=args.relaxed_simd, threads=args.threads,
                          check_facts=args.check_facts,
                          overridable=[n for a in args.overridable for n in a.split(",") if n])
    except CompileError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except LinkError as e:
        print(f"error: linking failed (a symwasm bug): {e}", file=sys.stderr)
        return 2
    for line in compile_report(r, out, args.cpu):
        print(line)
    return 0


def compile_report(r, out: Path, cpu: str | None) -> list[str]:
    """What ``compile`` wrote and chose: the files and their sizes, the target (wasm32's
    variants and the features an engine needs; the native CPU and its ISA extensions), the
    memory plan, the outputs, and whether anything stays dynamic."""
    meta = r.metadata
    code = r.module_bytes - r.weights_bytes
    lines = [f"wrote {out} ({r.target}, {r.module_bytes / 1e6:.2f} MB: weights {r.weights_bytes / 1e6:.2f} MB, "
             f"code and program {code / 1e3:.1f} kB) in {r.seconds:.2f} s"]
    for name, path in r.variants.items():
        if path != out:
            lines.append(f"wrote {path} (the {name} variant: {path.stat().st_size / 1e6:.2f} MB)")
    if r.target == "wasm32":
        variants = meta["variants"]
        chosen = ", ".join(f"{name} ({v['file']}" + "".join(f", + {f}" for f in v["features"]
                                                            if f not in meta["features"]) + ")"
                           for name, v in variants.items())
        more = "" if len(variants) > 1 else "; --relaxed-simd adds relaxed-simd"
        lines.append(f"target: wasm32, engines need {', '.join(meta['features'])}; variants: {chosen}{more}")
    else:
        whose = "this machine's CPU" if cpu in (None, "native") else "given by --cpu"
        lines.append(f"target: native, CPU {meta['cpu']} ({whose}), ISA extensions: "
                     f"{', '.join(meta['features']) or 'none beyond the baseline'}")
    plan = r.program.memory
    if plan is not None:
        dyn = f", dynamic arena {plan.dynamic_bytes} bytes" if plan.blocks else ""
        res = f" (reserved {plan.reserve} at the --range/--max bounds)" if plan.reserve else ""
        rt = f", {len(plan.runtime)} buffers sized from data at run time" if plan.runtime else ""
        lines.append(f"memory: static arena {plan.static_bytes} bytes{dyn}{res}{rt}")
    outputs = [f"{i['name']}: {i['dtype']}{shape_text(i['shape'])}" for i in meta["outputs"]]
    lines.append(f"outputs: {', '.join(outputs)}")
    dynamic = meta["dynamic"]
    if dynamic["values"] or dynamic["control_flow"]:
        what = []
        if dynamic["values"]:
            what.append(f"{len(dynamic['values'])} dims known only at run time, from symbols "
                        f"{', '.join(dynamic['symbols'])}")
        if dynamic["control_flow"]:
            what.append(f"{len(dynamic['control_flow'])} control-flow nodes")
        lines.append(f"dynamic: {' and '.join(what)} (symwasm inspect {out} says why)")
    else:
        lines.append("static: every shape is known at compile time")
    return lines


def _random_input(info, binds: dict[str, int], rng: np.random.Generator) -> np.ndarray:
    shape = []
    for d in info.shape:
        if isinstance(d, int):
            shape.append(d)
        elif d in binds or declared_dim(d) in binds:  # --random N=4 sizes a copy N@y of a shared name too
            shape.append(binds.get(d, binds.get(declared_dim(d))))
        else:
            raise SystemExit(f"error: input '{info.name}' has symbolic dim '{d}': give --random {d}=VALUE")
    if info.dtype == np.bool_:
        return rng.random(shape) < 0.5
    if info.dtype.kind == "i":
        return rng.integers(0, 10, size=shape).astype(info.dtype)
    return rng.standard_normal(shape).astype(info.dtype)


CACHE_TEXT = {"hit": "compiled code from the cache", "stored": "compiled, and stored in the code cache",
              "replaced": "compiled; the cache's entry did not verify and was written again",
              "off": "compiled; the code cache is off"}


def cmd_run(args) -> int:
    import wasm_runtime

    try:
        model = wasm_runtime.load(args.model, cache=not args.no_cache, threads=args.threads)
    except (FileNotFoundError, ValueError, OSError) as e:
        print(f"error: cannot load {args.model}: {e}", file=sys.stderr)
        return 1
    except (wasm_runtime.ModelError, ImportError) as e:  # says the file, and why it cannot load
        print(f"error: {e}", file=sys.stderr)
        return 1
    if model.threads_note:
        print(f"note: {model.threads_note}", file=sys.stderr)
    feeds = {}
    for item in args.input:
        name, sep, path = item.partition("=")
        if not sep:
            print(f"error: --input expects NAME=FILE.npy, got '{item}'", file=sys.stderr)
            return 1
        try:
            feeds[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            print(f"error: input '{name}': cannot read {path}: {e}", file=sys.stderr)
            return 1
    if args.random is not None:
        binds = _parse_binds(args.random, "--random")
        rng = np.random.default_rng(args.seed)
        for info in model.inputs:
            if info.name not in feeds:
                feeds[info.name] = _random_input(info, binds, rng)
    times = []
    try:
        for i in range(1 + (args.benchmark or 0)):
            t = time.perf_counter()
            outputs = model.run(feeds)
            times.append(time.perf_counter() - t)
            if args.benchmark:
                _progress_bar(i, args.benchmark)
    except wasm_runtime.ModelError as e:
        if args.benchmark and times:  # end the progress bar's line
            print(file=sys.stderr)
        print(f"error: {e}", file=sys.stderr)
        return 1
    save = Path(args.save_dir) if args.save_dir else None
    if save:
        save.mkdir(parents=True, exist_ok=True)
    for name, arr in outputs.items():
        print(f"{name}: {arr.dtype}{list(arr.shape)}")
        with np.printoptions(threshold=20, edgeitems=3, precision=5):
            print("  " + str(arr).replace("\n", "\n  "))
        if save:
            np.save(save / f"{name}.npy", arr)
    if args.benchmark:
        for line in benchmark_report(model, times[0], times[1:]):
            print(line)
    return 0


def _progress_bar(done: int, total: int, width: int = 30) -> None:
    """The steady-state runs' progress on stderr, redrawn in place (``done`` of the first
    run, which is not one of them, draws the empty bar); at most one redraw a percent."""
    if done == 0 or done == total or 100 * done // total != 100 * (done - 1) // total:
        filled = width * done // total
        end = "\n" if done == total else ""
        print(f"\rsteady state [{'#' * filled}{'.' * (width - filled)}] {done}/{total}", end=end,
              file=sys.stderr, flush=True)


def benchmark_report(model, first: float, steady: list[float]) -> list[str]:
    """Load time (and where the compiled code came from), first run, and the steady-state
    runs' median and spread."""
    how = "a native library: nothing to compile" if model.code_cache is None else \
        CACHE_TEXT.get(model.code_cache, f"compiled; the code cache is {model.code_cache}")
    ms = np.array(steady) * 1e3
    q1, median, q3 = np.percentile(ms, [25, 50, 75])
    threads = f"{model.threads} thread{'s' if model.threads > 1 else ''}"
    return [f"load: {model.load_seconds * 1e3:.2f} ms ({how}); calls run on {threads}",
            f"first run: {first * 1e3:.3f} ms",
            f"steady state: median {median:.3f} ms over {len(ms)} runs (quartiles {q1:.3f}-{q3:.3f}, "
            f"min {ms.min():.3f}, max {ms.max():.3f})"]


def _requires(meta: dict) -> str:
    """What the module needs of its host: wasm features, or a CPU and its ISA extensions
    (and which of them this machine lacks)."""
    features = ", ".join(meta["features"])
    if meta["target"] == "wasm32":
        return f", requires wasm features: {features}" if features else ""
    from wasm_runtime.cpu import missing_features

    text = f", CPU {meta.get('cpu')}, requires ISA extensions: {features or 'none beyond the baseline'}"
    missing = missing_features(meta["features"])
    return text + (f" (this machine lacks {', '.join(missing)}: it cannot load the library)" if missing else "")


def cmd_inspect(args) -> int:
    from wasm_runtime.metadata import read_metadata

    from . import abi
    from .vm import isa

    try:
        meta = read_metadata(args.model)
    except (OSError, ValueError) as e:
        print(f"error: cannot read {args.model}: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(meta, indent=1))
        return 0
    size = Path(args.model).stat().st_size
    p = meta["program"]
    print(f"{args.model}: symwasm module, format {'.'.join(map(str, meta['format_version']))}, "
          f"compiler {meta.get('compiler')}")
    print(f"  target {meta['target']}{_requires(meta)}, {size / 1e3:.1f} kB")
    variants = meta.get("variants") or {}
    if len(variants) > 1:  # the model's files, and what each needs beyond the baseline
        parts = []
        for name, v in variants.items():
            extra = [f for f in v["features"] if f not in meta["features"]]
            parts.append(f"{name} ({v['file']}{': + ' + ', '.join(extra) if extra else ''})")
        print(f"  variants: {', '.join(parts)}; hosts run the best their engine validates")
    print(f"  model '{meta['model']['name']}', opset {meta['model']['opset']}")
    for note in meta["model"].get("notes", []):
        print(f"  note: {note}")
    if meta["model"].get("check_facts"):
        print("  compiled with --check-facts: the compiler's facts about values and dims are checked at run time")
    print("\ninputs:")
    for i in meta["inputs"]:
        print(f"  {i['name']}: {i['dtype']}{shape_text(i['shape'])}")
    print("outputs:")
    for o in meta["outputs"]:
        print(f"  {o['name']}: {o['dtype']}{shape_text(o['shape'])}")
    print("\nsymbols:")
    for name, s in meta["symbols"].items():
        rng = f", range [{s['min']}, {'inf' if s['max'] is None else s['max']}]"
        print(f"  {name}: {SYMBOL_KINDS.get(s['kind'], s['kind'])}{rng}")
    if not meta["symbols"]:
        print("  none: every shape is static")
    _print_dynamic(meta.get("dynamic"))
    _print_memory(meta, meta["inputs"], args.bind)
    _print_plans(meta.get("plans"))
    print("\nvalues:")
    width = max((len(n) for n in meta["values"]), default=0)
    for name, v in meta["values"].items():
        how = v["kind"] + (f" = {shape_text(v['value'])}" if "value" in v else "")
        src = f"  <- {v['op']} '{v['node']}'" if "node" in v else ""
        if "core" in v and v["core"].lower().split("(")[0] != v["op"].lower():
            src += f" as {v['core']}"
        print(f"  {name:<{width}}  {v['dtype']}{shape_text(v['shape'])}  [{how}]{src}")
    if not args.no_program:
        print(f"\nprogram: {len(p['words'])} words, {len(p['registers'])} registers, "
              f"{len(p['heap_init'])} shape slots, {len(p['kernels'])} kernels, {len(p['consts'])} constants, "
              f"static arena {p.get('arena_size', 0)} bytes")
        slots = {int(k): v for k, v in p["slots"].items()}
        blocks = {int(k): v for k, v in p.get("blocks", {}).items()}
        info, sigs = p.get("kernel_info", []), p.get("kernel_sigs", [])
        fields = abi.kernel_info_fields(meta["format_version"])
        print("kernels:")
        for i, k in enumerate(p["kernels"]):
            n = len(fields)
            if len(info) < n * i + n:
                print(f"  {k}")
                continue
            entry = dict(zip(fields, info[n * i: n * i + n]))
            nt, ns, nout, at, parted = (entry.get(f, 0) for f in abi.KERNEL_INFO)
            types = kernel_signature_text(sigs, at, nt)
            print(f"  {k}: {', '.join(types[:nt - nout])} -> {', '.join(types[nt - nout:])}"
                  + (f"; {ns} scalars" if ns else "") + ("; split across threads" if parted else ""))
        print()
        print(isa.disassemble(p["words"], p["strings"], p["kernels"], p["registers"], slots, blocks))
        if args.messages:
            print("\nmessages:")
            for i, s in enumerate(p["strings"]):
                print(f"  msg#{i}: {s}")
    return 0


def _print_plans(plans: dict | None) -> None:
    """Each kernel plan (ops with more than one kernel): the route, its tile, how the weights
    are packed, its scratch, and the elementwise ops fused into its epilogue."""
    if not plans:
        return
    print(f"\nkernel plans ({len(plans)} nodes; routes: "
          f"{', '.join(f'{r} {n}' for r, n in sorted(Counter(p['route'] for p in plans.values()).items()))}):")
    for name, p in plans.items():
        fused = f"; then {', '.join(p['fused'])}" if p.get("fused") else ""
        print(f"  {p['op']} '{name}': {p['plan']}{fused}")


def _print_memory(meta: dict, inputs: list, bind: dict | None) -> None:
    """The memory plan: arenas, the peak activation memory as a formula of the symbols, and
    as numbers for ``--bind`` values."""
    from wasm_runtime import formula

    plan = meta.get("memory")
    if plan is None:
        return
    print("\nmemory plan:")
    print(f"  static arena: {plan['static_bytes']} bytes (buffers of static shape, allocated once)")
    print(f"  dynamic arena: {plan['dynamic_formula']} bytes (buffers sized by the input dims, "
          f"{len(plan['blocks'])} shared block{'s' * (len(plan['blocks']) != 1)}, sized once per run)")
    if plan["reserve"]:
        print(f"  reserved at the symbols' upper bounds: {plan['reserve']} bytes (steady-state runs allocate nothing)")
    for b in plan["blocks"]:
        print(f"    [{b['offset']}, +{b['size']}): {', '.join(b['values'])}")
    if plan["runtime"]:
        print(f"  run-time allocations (sizes known only from data): {', '.join(plan['runtime'])}")
    peak = f"{plan['static_bytes']} + {plan['dynamic_formula']}" if plan["blocks"] else str(plan["static_bytes"])
    print(f"  peak activation memory: {peak} bytes" + (" plus the run-time allocations" if plan["runtime"] else ""))
    if bind:
        # an input's own copy of a shared dim name (N@y) is sized from the name when not given
        sized = {**{s: bind[declared_dim(s)] for s in meta["symbols"] if declared_dim(s) in bind}, **bind}
        try:
            dyn = formula.evaluate(plan["dynamic_bytes"], sized)
        except KeyError as e:
            print(f"  for {_bindings(bind)}: symbol {e} needs a value too")
            return
        print(f"  for {_bindings(bind)}: {plan['static_bytes'] + dyn} bytes "
              f"({plan['static_bytes']} static + {dyn} dynamic)")


def _bindings(bind: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in bind.items())


def _print_dynamic(dynamic: dict | None) -> None:
    """The values whose shapes are known only at run time, and why (what --static rejects)."""
    from .describe import describe

    if dynamic is None:  # a module of a compiler before this section
        return
    print("\ndynamic (known only at run time, and why):")
    if not dynamic["values"] and not dynamic["control_flow"]:
        print("  nothing: every shape is known at compile time and nothing branches "
              "(compile --static accepts this model)")
        return
    for name, s in dynamic["symbols"].items():
        print(f"  symbol {name}: {s['why']}")
    for e in dynamic["values"]:
        print(f"  {describe(e, dynamic['symbols'])}")
    for text in dynamic["control_flow"]:
        print(f"  {text}")


def kernel_signature_text(sigs: list[int], at: int, ntensors: int) -> list[str]:
    """A kernel's tensor types as text (float32(_0, 10)) from the kernel_sigs table."""
    from .abi import DIM_UNCHECKED, DTYPES

    names = {d.code: d.name for d in DTYPES}
    out = []
    for _ in range(ntensors):
        code, rank = sigs[at], sigs[at + 1]
        dims = sigs[at + 2: at + 2 + rank]
        at += 2 + rank
        text = [str(d) if d >= 0 else "expr" if d == DIM_UNCHECKED else f"_{-1 - d}" for d in dims]
        out.append(f"{names[code]}({', '.join(text)})")
    return out


def cmd_diff(args) -> int:
    try:
        from .diff import DiffError, diff_model
    except ModuleNotFoundError as e:
        return _lacks_compiler("diff", e)
    try:
        binds = _parse_binds(args.bind, "--bind")
    except SystemExit as e:  # (its message is the error line; a usage error exits with 2 here)
        print(e, file=sys.stderr)
        return 2
    progress = None if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    try:
        result = diff_model(args.model, target=args.target, binds=binds,
                            inputs=args.inputs, seed=args.seed, reference=args.reference, rtol=args.rtol,
                            atol=args.atol, nodes=args.nodes, cpu=args.cpu, progress=progress)
    except DiffError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.to_json(), indent=1))
    else:
        for line in result.lines():
            print(line)
    return 0 if result.ok else 1


def _tolerance(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        x = -1.0
    if not x >= 0:
        raise argparse.ArgumentTypeError(f"expected a tolerance >= 0, got '{text}'")
    return x


def _count_of(what: str):
    """An argparse type: a whole number of ``what`` (runs, threads), at least 1."""
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            n = 0
        if n < 1:
            raise argparse.ArgumentTypeError(f"expected a positive number of {what}, got '{text}'")
        return n
    return parse


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="symwasm", description="Compile ONNX models with symbolic dims into self-contained "
        "WebAssembly modules (or native libraries), run them, inspect them, and compare their results with a "
        "reference (diff).",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    c = sub.add_parser("compile", help="compile an ONNX model", description="Compile an ONNX model "
                       "(opset 7 or newer, as exported: no conversion needed) into one .wasm module or a "
                       "native shared library.")
    c.add_argument("model", help="the .onnx file")
    c.add_argument("-o", "--output", help="output file (default: the model's name with .wasm or .so)")
    c.add_argument("--target", choices=("wasm32", "native"), default="wasm32",
                   help="wasm32 (default): one .wasm, no imports; native: a shared library for this host")
    c.add_argument("--cpu", metavar="NAME",
                   help="with --target native: the CPU the code is for, native (the default: this "
                        "machine's CPU, with every extension it has), an x86-64 psABI level (x86-64, "
                        "x86-64-v2, x86-64-v3: AVX2 and FMA, x86-64-v4: AVX-512) or an LLVM CPU name "
                        "(skylake, znver3, sapphirerapids). The library records it, and loading it on a "
                        "CPU that lacks one of its extensions fails, naming them"),
    c.add_argument("--relaxed-simd", action="store_true",
                   help="with --target wasm32: also write the relaxed-SIMD variant, MODEL.relaxed.wasm "
                        "next to the output (multiply-adds fused by f32x4.relaxed_madd). Engines without "
                        "relaxed SIMD reject it, so the baseline stays; the Python host and the JS loader "
                        "pick the variant their engine validates")
    c.add_argument("--threads", action="store_true",
                   help="with --target wasm32: also write the threads variant of each file, MODEL.threads.wasm "
                        "(and MODEL.relaxed.threads.wasm): shared memory, so the Python host and the JS loader run "
                        "a call's products, convolutions and large row kernels on several threads (threads=N); a "
                        "native library always can")
    c.add_argument("--bind", action="append", default=[], metavar="SYMBOL=VALUE[,...]",
                   help="fix symbolic dims (the model's named input dims) at compile time, e.g. "
                        "--bind seq=128,batch=1 (repeatable): the model is compiled as if exported with "
                        "those sizes, shape computations that depend only on them fold away, and the "
                        "module accepts only inputs of those sizes")
    c.add_argument("--static", action="store_true",
                   help="require a static module: every shape known at compile time (after --bind), so "
                        "the program is only kernel calls over a memory arena planned at compile time, "
                        "with no run-time allocation, no sizes computed from data and no control flow. "
                        "Otherwise compiling fails, listing each value and dim that stays dynamic and why "
                        "(an input symbol to --bind, or an op such as NonZero whose output size depends "
                        "on data)")
    c.add_argument("--check-facts", action="store_true",
                   help="check at run time every fact the compiler relied on about a value or a dim: shape "
                        "values it derived (a Concat of dims, a Gather from a shape) are computed again by "
                        "their kernels, bounds it proved from symbols' ranges, Reshape's 0 and -1 it resolved "
                        "and branches it decided are checked; a run fails naming the node and the fact that "
                        "did not hold. Slower: for testing symwasm, or a model that gives a wrong answer")
    c.add_argument("--range", action="append", default=[], metavar="SYMBOL=MIN:MAX",
                   help="bound a symbol, e.g. --range seq=1:512; the module rejects other values "
                        "with a message naming the input and dim (repeatable)")
    c.add_argument("--max", action="append", default=[], metavar="SYMBOL=VALUE[,...]",
                   help="an upper bound for symbols, e.g. --max seq=512,batch=8 (like --range seq=:512): "
                        "the module rejects larger inputs, and the memory planned from the input dims is "
                        "reserved once for the largest legal shapes, so steady-state runs allocate nothing")
    c.add_argument("--overridable", action="append", default=[], metavar="NAME[,...]|all",
                   help="initializers the model also lists as inputs (as ONNX IR version 3 wrote every "
                        "weight) are compiled as the constants they hold, and a run cannot feed them; "
                        "these stay inputs, their values the default a run gets when it does not feed "
                        "them (repeatable; 'all' for every one). onnxruntime lets a run override any")
    c.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    c.set_defaults(fn=cmd_compile)

    r = sub.add_parser("run", help="run a compiled model", description="Run a compiled model "
                       "(.wasm under wasmtime, or a native library) on .npy inputs.")
    r.add_argument("model", help="the .wasm or native library")
    r.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                   help="an input from a .npy file (repeatable)")
    r.add_argument("--random", nargs="*", metavar="SYMBOL=VALUE",
                   help="random data for inputs not given, with these symbol values")
    r.add_argument("--seed", type=int, default=0, help="seed for --random (default 0)")
    r.add_argument("--benchmark", type=_count_of("runs"), nargs="?", const=100, metavar="N",
                   help="time the model: its load, its first run, then N more runs (default 100), with a "
                        "progress bar on stderr; reports the load time (and whether the compiled code came "
                        "from the cache), the first run and the steady state's median and spread")
    r.add_argument("--threads", type=_count_of("threads"), metavar="N",
                   help="run each call on N threads, this one included (default: the CPUs this process may "
                        "use, or SYMWASM_THREADS); a .wasm needs its threads variant beside it (compile --threads), "
                        "else it runs on one and says so")
    r.add_argument("--no-cache", action="store_true",
                   help="compile the .wasm without the compiled-code cache (neither read nor written)")
    r.add_argument("--save-dir", help="write each output to DIR/<name>.npy")
    r.set_defaults(fn=cmd_run)

    i = sub.add_parser("inspect", help="show a compiled model's metadata and program",
                       description="Show the metadata (inputs, outputs, symbols), which values stay "
                       "dynamic and why, the symbolic shape of every value, and the VM program of a "
                       "compiled model, without running it.")
    i.add_argument("model", help="the .wasm or native library")
    i.add_argument("--json", action="store_true", help="print the raw metadata JSON")
    i.add_argument("--no-program", action="store_true", help="omit the VM program")
    i.add_argument("--messages", action="store_true", help="also list the error message table")
    i.add_argument("--bind", type=lambda t: _parse_binds([t], "--bind"), metavar="SYMBOL=VALUE[,...]",
                   help="print the memory the plan needs for these symbol values, e.g. --bind batch=1,seq=128")
    i.set_defaults(fn=cmd_inspect)

    d = sub.add_parser("diff", help="compare symwasm's results with a reference's (run this first when a "
                       "model misbehaves)", description="Run an ONNX model through symwasm and through a "
                       "reference (onnxruntime when it is installed, else onnx.reference) on the same inputs and "
                       "compare every output: shape, dtype, largest absolute and relative error, and a verdict. "
                       "Exit status 0 when everything matches, 1 when something diverges, 2 when the diff "
                       "cannot run (bad usage, inputs that do not fit, a model that does not compile).")
    d.add_argument("model", help="the .onnx file")
    d.add_argument("--target", choices=("wasm32", "native"), default="wasm32",
                   help="compile for wasm32 (default) or this host's CPU, as compile does")
    d.add_argument("--cpu", metavar="NAME", help="with --target native: the CPU the code is for, as compile takes it")
    d.add_argument("--bind", action="append", default=[], metavar="SYMBOL=VALUE[,...]",
                   help="fix symbolic dims at compile time, as compile does; random inputs take their "
                        "symbolic dims from these values (every symbol of the inputs needs one)")
    d.add_argument("--inputs", metavar="FILE.npz",
                   help="the inputs, one array per input name (np.savez(path, x=..., mask=...)); "
                        "default: random values of the declared shapes")
    d.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    d.add_argument("--reference", choices=("auto", "ort", "onnx"), default="auto",
                   help="ort: onnxruntime (its graph optimizations off); onnx: onnx.reference; auto "
                        "(default): onnxruntime if it is installed, else onnx.reference")
    d.add_argument("--rtol", type=_tolerance, metavar="X",
                   help="relative tolerance of float values (default 1e-4; 1e-2 for 16-bit floats)")
    d.add_argument("--atol", type=_tolerance, metavar="X",
                   help="absolute tolerance of float values (default 1e-5; 1e-3 for 16-bit floats); "
                        "a float agrees when |symwasm - reference| <= atol + rtol * |reference|; other "
                        "dtypes must be equal")
    d.add_argument("--nodes", action="store_true",
                   help="compare every intermediate value too (a copy of the model returns each node's "
                        "tensor outputs), and name the first node whose result diverges while its inputs "
                        "agree: its op, its output's shapes and errors, and what its inputs held")
    d.add_argument("--json", action="store_true", help="print the comparison as JSON")
    d.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    d.set_defaults(fn=cmd_diff)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
