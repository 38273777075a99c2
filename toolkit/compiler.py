"""The compile driver: ONNX -> graph of core ops -> passes -> program IR and kernels -> words,
kernel object and weights -> one module file."""
from __future__ import annotations

import base64
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Collection, Mapping

from . import __version__
from .abi import FORMAT_VERSION
from .codegen.embed import Encoded, embed_program
from .codegen.parallel import emit_objects
from .codegen.target import get_target, new_module, relaxed_simd, variant, with_threads
from .frontend.onnx.importer import import_model
from .ir import dims as D
from .ir.graph import CompileError, Graph
from .link import link_variants
from .passes import run_pipeline
from .passes.dynamic import check_static
from .passes.dynamic import report as dynamic_report
from .program.ir import Program
from .program.kernels import KernelTable
from .program.lower import lower_graph


@dataclass
class CompileResult:
    path: Path
    target: str
    graph: Graph
    program: Program
    encoded: Encoded
    metadata: dict
    seconds: float = 0.0
    module_bytes: int = 0
    weights_bytes: int = 0
    stages: dict[str, float] = field(default_factory=dict)
    variants: dict[str, Path] = field(default_factory=dict)  # wasm32: each variant's file


def _dim_json(d):
    return d if isinstance(d, int) else str(d)


def build_metadata(graph: Graph, prog: Encoded, target, memory=None, variants: dict | None = None) -> dict:
    def io(name):
        v = graph.values[name]
        entry = {"name": name, "dtype": v.dtype.name, "shape": [_dim_json(d) for d in v.shape]}
        if name in graph.input_defaults:  # compile --overridable: what a run that does not feed it gets
            d = graph.input_defaults[name]
            le = d.astype(d.dtype.newbyteorder("<")) if d.dtype.kind in "biuf" else d  # ml_dtypes' formats: bytes
            entry["default"] = {"shape": list(d.shape), "data": base64.b64encode(le.tobytes()).decode()}
        return entry

    symbols = {}
    for v in graph.values.values():
        for d in v.shape:
            for s in D.free_symbols(d):
                symbols[s.name] = {"kind": s.kind, "min": s.lo, "max": s.hi}
    values = {}
    for name, v in graph.values.items():
        entry = {"dtype": v.dtype.name, "shape": [_dim_json(d) for d in v.shape]}
        if v.const is not None:
            entry["kind"] = "const"
        elif v.sym is not None:
            entry["kind"] = "shape-value"
            entry["value"] = [_dim_json(d) for d in v.sym]
        else:
            entry["kind"] = "input" if name in graph.inputs else "computed"
        if v.producer is not None:
            entry["node"] = v.producer.name
            entry["op"] = v.producer.source
            entry["core"] = str(v.producer.op)
        values[name] = entry
    # each node's kernel plan, for the ops with more than one kernel (toolkit.codegen.plan)
    plans = {n.name: {"op": n.source, "route": n.op.plan.route, "plan": n.op.plan.describe(),
                      "fused": [str(p) for p in getattr(n.op, "post", ())]}
             for n in graph.all_nodes() if getattr(n.op, "plan", None) is not None}
    return {
        "format": "symwasm", "format_version": list(FORMAT_VERSION), "compiler": __version__,
        # what a host must support: wasm features, or the native CPU's ISA extensions
        "target": target.name, "features": list(target.wasm_features if target.is_wasm else target.isa),
        "cpu": None if target.is_wasm else target.cpu,
        # wasm32: the model's files, one per variant, each with the features an engine needs;
        # a host loads the best its engine validates (the files differ only in their code)
        "variants": variants,
        "model": {"name": graph.name, "opset": graph.opset, "notes": graph.notes, "check_facts": graph.check_facts,
                  "weight_inputs": graph.weight_inputs},
        "inputs": [io(n) for n in graph.inputs], "outputs": [io(n) for n in graph.outputs],
        "symbols": dict(sorted(symbols.items())), "values": values, "plans": plans,
        # what stays dynamic and why (inspect prints it; empty when --static would accept the model)
        "dynamic": dynamic_report(graph),
        # the memory plan: arenas, the dynamic arena's size as a formula (hosts evaluate it:
        # required_bytes), which values share storage
        "memory": memory.to_json() if memory is not None else None,
        "program": {"words": prog.words, "strings": prog.strings, "heap_init": prog.heap_init,
                    "arena_size": prog.arena_size,
                    "kernels": prog.kernels, "kernel_info": prog.kernel_info, "kernel_sigs": prog.kernel_sigs,
                    "registers": prog.reg_names,
                    "slots": {str(k): v for k, v in sorted(prog.slot_names.items())},
                    "blocks": {str(k): v for k, v in sorted(prog.blocks.items())},
                    "consts": [name for name, _ in prog.consts]},
    }


def static_program_problems(prog: Program) -> list[str]:
    """What keeps a program from being static: run-time allocations, counting calls that size
    outputs from data, branches and jumps. Empty for a static program."""
    out = []
    for _, _, ins in prog.instrs():
        if ins.name == "ALLOC":
            out.append(f"'{ins.args[0].name}' is allocated at run time")
        elif ins.name in ("BRANCH", "JUMP"):
            out.append(f"the program has a {ins.name}")
        elif ins.name == "CALL" and ins.args[0].noutputs == 0 and ins.args[0].nscalars:
            out.append(f"kernel {ins.args[0].name} computes sizes at run time")
    return out


def check_static_program(prog: Program) -> None:
    """The program of a graph that passed the ``--static`` check is static (a bug otherwise)."""
    problems = static_program_problems(prog)
    if problems:
        raise CompileError("--static: every shape is known, yet the program is not static (a symwasm bug): "
                           + "; ".join(problems))


def checks_facts(check_facts: bool = False) -> bool:
    """Whether a compile checks its facts: asked to, or ``SYMWASM_CHECK_FACTS=1`` in the
    environment (the test suite's fact-checking run)."""
    return check_facts or os.environ.get("SYMWASM_CHECK_FACTS") == "1"


def import_for(model, tgt, binds: Mapping[str, int] | None = None,
               ranges: Mapping[str, tuple[int | None, int | None]] | None = None, check_facts: bool = False,
               overridable: Collection[str] = ()) -> Graph:
    """The model imported for target ``tgt`` (a Target), as :func:`compile_model` imports it."""
    graph = import_model(model, binds, ranges, checks_facts(check_facts), overridable)
    graph.keep_quantized_weights = tgt.is_wasm
    return graph


def lower_for(graph: Graph, tgt) -> tuple[Program, object]:
    """The program and the LLVM module (its kernels) of a graph the passes ran over."""
    module = new_module(tgt, graph.name)
    return lower_graph(graph, KernelTable(module, tgt, Program())), module


def compile_model(model, output: str | Path, target: str = "wasm32",
                  binds: Mapping[str, int] | None = None,
                  progress: Callable[[str], None] | None = None,
                  ranges: Mapping[str, tuple[int | None, int | None]] | None = None,
                  static: bool = False, cpu: str | None = None, relaxed: bool = False,
                  threads: bool = False, check_facts: bool = False, overridable: Collection[str] = (),
                  routes: Mapping[str, str] | None = None) -> CompileResult:
    """Compile an ONNX model (path, bytes or ModelProto) into ``output``. ``binds`` fixes
    symbols at compile time; ``ranges`` bounds them (checked at run time). ``static``
    demands a static module: every shape known at compile time, so the program is only
    kernel calls over a compile-time arena; otherwise the error lists each value that stays
    dynamic and why. ``cpu`` (native only) names the CPU the code is for: an LLVM CPU name or
    an x86-64 psABI level (``x86-64-v3``); None or ``native`` is this machine's.
    ``relaxed`` (wasm32 only) also writes the relaxed-SIMD variant next to ``output``
    (``model.relaxed.wasm``, FMA through ``f32x4.relaxed_madd``); both files' metadata name
    both, and hosts pick the variant their engine supports. ``threads`` (wasm32 only) also
    writes the threads variant of each (``model.threads.wasm``, ``model.relaxed.threads.wasm``):
    shared memory, so a host runs a call's split kernels on several threads (a native library
    always can). ``check_facts`` makes the module
    check at run time every fact the compiler relied on about a value or a dim (a shape value
    it derived, a bound it proved, Reshape's 0 and -1 it resolved, a branch it decided) and
    fail naming the node and the fact that did not hold: for testing the compiler. The
    environment variable ``SYMWASM_CHECK_FACTS=1`` turns it on for every compile (the test
    suite's fact-checking run, ``make check-facts``). ``overridable`` names initializers the
    model also lists as inputs (as IR version 3 wrote weights) that stay inputs a run may
    feed, their values the default (``all``: every one); the others compile as constants.
    ``routes`` (node name -> route, :mod:`toolkit.codegen.plan`) runs those nodes by the
    kernel named instead of the one the target's plan picks: for tests of every kernel on
    every target.

    Raises ValueError for an unknown target or CPU, and
    :class:`toolkit.ir.graph.CompileError` for a model symwasm cannot compile.
    """
    say = progress or (lambda _msg: None)
    t0 = time.perf_counter()
    stages: dict[str, float] = {}

    def stage(name: str, t: float) -> float:
        now = time.perf_counter()
        stages[name] = now - t
        say(f"{name}: {now - t:.2f}s")
        return now

    tgt = get_target(target, cpu)
    if relaxed and not tgt.is_wasm:
        raise ValueError("relaxed SIMD is a wasm32 variant; the native target uses the CPU's own FMA")
    out = Path(output)
    files = {tgt: out}
    if threads and not tgt.is_wasm:
        raise ValueError("the threads variant is a wasm32 one; a native library always runs on threads")
    if relaxed:
        files[relaxed_simd(tgt)] = out.with_name(f"{out.stem}.relaxed{out.suffix or '.wasm'}")
    if threads:
        files.update({with_threads(t): f.with_name(f"{f.stem}.threads{f.suffix or '.wasm'}") for t, f in list(files.items())})
    variants = {variant(t): {"file": f.name, "features": list(t.wasm_features)} for t, f in files.items()} \
        if tgt.is_wasm else None
    graph = import_for(model, tgt, binds, ranges, check_facts, overridable)
    t = stage("import", t0)
    graph = run_pipeline(graph, tgt, routes)
    if static:
        check_static(graph)
    t = stage("passes", t)
    prog, module = lower_for(graph, tgt)
    if static:
        check_static_program(prog)
    encoded = prog.encode()
    t = stage("lower", t)
    meta = build_metadata(graph, encoded, tgt, prog.memory, variants)
    meta_bytes = json.dumps(meta, separators=(",", ":")).encode()
    # a .wasm's metadata is its symwasm.metadata custom section (read without instantiating);
    # only a native library serves it through sw_metadata, so a .wasm does not carry it twice
    weights = embed_program(module, encoded, b"" if tgt.is_wasm else meta_bytes)
    objs = emit_objects(module, list(files), {k.name for k in prog.kernels if k.unswitch_loops})
    t = stage("codegen", t)
    link_variants({t_: (objs[t_], path) for t_, path in files.items()}, meta_bytes, weights)
    stage("link", t)
    return CompileResult(out, tgt.name, graph, prog, encoded, meta, time.perf_counter() - t0,
                         out.stat().st_size, len(weights), stages, {variant(t_): p for t_, p in files.items()})
