"""The memory planner against its lower bound (issue 7).

For the benchmark set's 2-layer transformer encoder (bert2: symbolic batch and seq,
../shared/benchmarks/make_models.py), prints per binding the planned activation memory
(static arena + dynamic arena, from the module's own formula), the lower bound every plan
must reach (the most bytes live at one point of the program, liveness recomputed here),
their ratio, and what one allocation per buffer would hold at its peak (no reuse at all).
It then runs the compiled module at each binding under a memory limit of exactly
``required_bytes`` to show the number is what a run needs. Memory, not time: nothing here
is timed.

    .venv/bin/python benchmarks/memory_plan.py [--bind batch=1,seq=128 ...]
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from toolkit.compiler import compile_model  # noqa: E402
from toolkit.program import memory  # noqa: E402
import wasm_runtime  # noqa: E402

MODELS = REPO.parent / "shared" / "benchmarks" / "make_models.py"
DEFAULT = ["batch=1,seq=128", "batch=4,seq=128", "batch=1,seq=512"]


def bert2(models: Path = MODELS):
    spec = importlib.util.spec_from_file_location("make_models", models)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.bert2(np.random.default_rng(4))


def no_reuse(prog, bindings) -> int:
    """Every buffer in a block of its own: the sum of all buffer sizes."""
    total = 0
    for _, _, ins in prog.instrs():
        if ins.name in ("ALLOC", "ALLOC_STATIC", "ALLOC_AT"):
            n = memory.evaluate(memory._bytes(ins.args[0]), bindings)
            total += n or 0
    return total


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bind", action="append", help="symbol values, e.g. batch=1,seq=128 (repeatable)")
    ap.add_argument("--target", default="wasm32", choices=("wasm32", "native"))
    ap.add_argument("--models", type=Path, default=MODELS, help=f"the model generator (default {MODELS})")
    args = ap.parse_args(argv)
    bindings = [dict((k, int(v)) for k, v in (p.split("=") for p in b.split(","))) for b in (args.bind or DEFAULT)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("bert2.wasm" if args.target == "wasm32" else "bert2.so")
        r = compile_model(bert2(args.models), path, target=args.target)
        plan = r.program.memory
        print(f"bert2 ({args.target}): static arena {plan.static_bytes} bytes; dynamic arena "
              f"{plan.dynamic_bytes} bytes in {len(plan.blocks)} shared blocks; "
              f"{len(plan.runtime)} run-time allocations")
        print()
        print("| binding | planned (static + dynamic) | lower bound (largest live set) | planned / bound "
              "| no reuse | run under limit = required_bytes |")
        print("|---|---|---|---|---|---|")
        for b in bindings:
            planned = plan.static_bytes + memory.evaluate(plan.dynamic_bytes, b)
            bound = memory.live_peak(r.program, b, plan)
            model = wasm_runtime.load(path)
            model.set_memory_limit(model.required_bytes(**b))
            x = np.random.default_rng(0).standard_normal((b["batch"], b["seq"], 256)).astype(np.float32)
            try:
                model.run({"x": x})
                ran = "ok"
            except wasm_runtime.ModelError as e:
                ran = f"failed: {e}"
            model.close()
            print(f"| {', '.join(f'{k}={v}' for k, v in b.items())} | {planned / 2**20:.2f} MiB | "
                  f"{bound / 2**20:.2f} MiB | {planned / bound:.3f}x | {no_reuse(r.program, b) / 2**20:.2f} MiB "
                  f"| {ran} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
