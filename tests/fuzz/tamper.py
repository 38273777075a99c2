"""Module tampering: one program word of a compiled module changed, the way a corrupt download
(``corrupt``) or a forger who also rewrites the checksum (``forged``) would change it. The host
must never crash, hang or raise anything but ModelError:

- corrupt: the VM's checksum refuses the module at load, naming the file; a module that loads
  anyway must give the right answers (else it counts as a wrong result).
- forged: the program is someone else's now, so its answers may differ; it must still be
  refused, fail with a ModelError, be stopped by the time limit, or finish. A crash, a trap,
  a hang or a traceback is a failure.

    python -m tests.fuzz.tamper [--cases N] [--seed S] [--targets wasm32,native]

Each target's cases run in a child process that reports one line per case, so a crash is
counted and the campaign goes on with the next case.
"""
from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from toolkit.vm import isa

F, I64 = TensorProto.FLOAT, TensorProto.INT64
BAD = ("crash", "hang", "trap", "traceback", "wrong result")
TIME_LIMIT = 2.0  # seconds per run; a forged loop is stopped by it


def _model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info(*i) for i in inputs],
                          [helper.make_tensor_value_info(*o) for o in outputs], initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def models():
    """(model, feeds) pairs: elementwise, a data-dependent output, a reshape from shape
    values, a gather with run-time indices, a matmul."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    return [
        (_model([helper.make_node("Add", ["x", "b"], ["s"]), helper.make_node("Relu", ["s"], ["y"])],
                [("x", F, ["n", 4]), ("b", F, [4])], [("y", F, None)]),
         {"x": x, "b": rng.standard_normal(4).astype(np.float32)}),
        (_model([helper.make_node("NonZero", ["x"], ["nz"]), helper.make_node("Transpose", ["nz"], ["y"], perm=[1, 0])],
                [("x", F, ["n", 4])], [("y", I64, None)]), {"x": np.maximum(x, 0)}),
        (_model([helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Slice", ["s", "a", "e"], ["s0"]),
                 helper.make_node("Concat", ["s0", "m1"], ["t"], axis=0), helper.make_node("Reshape", ["x", "t"], ["y"])],
                [("x", F, ["n", 4])], [("y", F, None)],
                [numpy_helper.from_array(np.array(v, np.int64), k) for k, v in (("a", [1]), ("e", [2]), ("m1", [-1]))]),
         {"x": x}),
        (_model([helper.make_node("Gather", ["x", "i"], ["y"], axis=0)], [("x", F, ["n", 4]), ("i", I64, ["k"])],
                [("y", F, None)]), {"x": x, "i": np.array([4, 0, -1], np.int64)}),
        (_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [("x", F, ["n", 4]), ("w", F, [4, "m"])],
                [("y", F, None)]), {"x": x, "w": rng.standard_normal((4, 3)).astype(np.float32)}),
    ]


def _compile(target: str, workdir: Path):
    """Per model: the module's path, its encoded program, where the words and the checksum
    lie in the file, the feeds and the reference outputs."""
    from onnx.reference import ReferenceEvaluator

    from tests.util import lower_model
    from toolkit.compiler import checks_facts, compile_model
    from toolkit.codegen.embed import checksum

    out = []
    for i, (m, feeds) in enumerate(models()):
        path = workdir / f"t{i}.{'wasm' if target == 'wasm32' else 'so'}"
        compile_model(m, path, target=target)
        enc = lower_model(m, target, check_facts=checks_facts())[1].encode()  # the program compile_model embeds
        data = path.read_bytes()
        words = np.asarray(enc.words, "<i4").tobytes()
        csum = np.asarray([checksum(enc)], "<i8").tobytes()
        assert data.count(words) == 1 and data.count(csum) == 1, "the program must be findable in the file"
        ref = dict(zip([o.name for o in m.graph.output], ReferenceEvaluator(m).run(None, feeds)))
        out.append((path, enc, data.index(words), data.index(csum), feeds, ref))
    return out


def _mutate(enc, rnd: random.Random) -> tuple[list[int], str]:
    """One word changed: usually an operand to another in-range value of its kind (what a
    verifier that only checks ranges lets through), sometimes to an arbitrary value."""
    words = list(enc.words)
    instrs = list(isa.decode(words))
    pc, op, _ = rnd.choice(instrs)
    slots = []  # (word index, kind)
    at = pc + 1
    for spec in op.operands:
        k = isa.kind(spec)
        if k.endswith("*"):
            n = words[at]
            slots.append((at, "count"))
            slots += [(at + 1 + j, k[:-1]) for j in range(n)]
            at += 1 + n
        else:
            slots.append((at, k))
            at += 1
    if not slots or rnd.random() < 0.1:
        where, kind = pc, "opcode"
    else:
        where, kind = rnd.choice(slots)
    limits = {"reg": len(enc.reg_names), "slot": len(enc.heap_init), "kernel": len(enc.kernels),
              "msg": len(enc.strings), "input": len(enc.inputs) // 3, "output": len(enc.outputs),
              "pc": len(words), "opcode": len(isa.OPS), "count": 9}
    old = words[where]
    if rnd.random() < 0.15 or kind not in limits:
        new = rnd.choice([rnd.randrange(-2 ** 31, 2 ** 31), old ^ (1 << rnd.randrange(31)), old + 1, old - 1])
    else:
        new = rnd.randrange(max(1, limits[kind]))
        if kind == "pc":
            new = rnd.choice([p for p, _, _ in instrs])
    if new == old:
        new = old + 1
    words[where] = new
    return words, f"{op.name} word {where - pc} ({kind}) {old} -> {new}"


def _worker(target: str, mode: str, seed: int, start: int, count: int) -> None:
    """Runs cases start..start+count-1, printing one JSON line per case before and after."""
    import wasm_runtime
    from toolkit.codegen.embed import checksum

    workdir = Path(tempfile.mkdtemp(prefix="symwasm-tamper-"))
    compiled = _compile(target, workdir)
    for case in range(start, start + count):
        rnd = random.Random(f"{seed}/{target}/{mode}/{case}")
        path, enc, w_at, c_at, feeds, ref = compiled[case % len(compiled)]
        words, what = _mutate(enc, rnd)
        data = bytearray(path.read_bytes())
        new_words = np.asarray(words, "<i4").tobytes()
        data[w_at:w_at + len(new_words)] = new_words
        if mode == "forged":
            enc2 = type(enc)(**{**enc.__dict__, "words": words})
            data[c_at:c_at + 8] = np.asarray([checksum(enc2)], "<i8").tobytes()
        bad = workdir / f"case{case}{path.suffix}"
        bad.write_bytes(bytes(data))
        print(json.dumps({"case": case, "what": what, "start": True}), flush=True)
        outcome = _one(wasm_runtime, bad, feeds, ref, mode)
        bad.unlink()
        print(json.dumps({"case": case, "what": what, "outcome": outcome}), flush=True)


def _one(wasm_runtime, path, feeds, ref, mode) -> str:
    try:
        m = wasm_runtime.load(path)
    except wasm_runtime.ModelError:
        return "refused at load"
    except Exception:  # noqa: BLE001 - what the campaign is looking for
        import traceback
        traceback.print_exc()
        return "traceback"
    outcome = "ran"
    for _ in range(2):  # twice: an error must leave the model usable
        try:
            got = m.run(feeds, timeout=TIME_LIMIT)
        except wasm_runtime.ModelError as e:
            outcome = ("stopped by the time limit" if e.status == wasm_runtime.STATUS["CANCELLED"]
                       else "trap" if "trapped" in str(e) else "run error")
            continue
        except Exception:  # noqa: BLE001
            import traceback
            traceback.print_exc()
            return "traceback"
        same = set(got) == set(ref) and all(
            got[k].shape == np.asarray(ref[k]).shape and np.allclose(got[k], ref[k], rtol=1e-5, atol=1e-5)
            for k in ref)
        if not same:
            outcome = "wrong result" if mode == "corrupt" else "ran (forged answer)"
    return outcome


def campaign(cases: int, seed: int = 0, targets=("wasm32", "native"), modes=("corrupt", "forged"),
             quiet: bool = False) -> dict[str, Counter]:
    """cases per target and mode; returns {f"{target} {mode}": Counter of outcomes}."""
    results: dict[str, Counter] = {}
    for target in targets:
        for mode in modes:
            counts: Counter = Counter()
            next_case = 0
            while next_case < cases:
                cmd = [sys.executable, "-m", "tests.fuzz.tamper", "--worker", target, mode, str(seed),
                       str(next_case), str(cases - next_case)]
                proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                running, deadline = None, time.monotonic() + 60 + cases * (4 * TIME_LIMIT)
                try:
                    out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    proc.kill()
                    out, err = proc.communicate()
                    hung = True
                else:
                    hung = False
                for line in out.splitlines():
                    rec = json.loads(line)
                    if rec.get("start"):
                        running = rec
                    else:
                        counts[rec["outcome"]] += 1
                        if rec["outcome"] in BAD and not quiet:
                            print(f"  {target} {mode} case {rec['case']}: {rec['outcome']} ({rec['what']})")
                        running = None
                        next_case = rec["case"] + 1
                if running is not None:  # the child died (or hung) inside this case
                    kind = "hang" if hung else "crash"
                    counts[kind] += 1
                    if not quiet:
                        print(f"  {target} {mode} case {running['case']}: {kind} ({running['what']}); "
                              f"exit {proc.returncode}: {err.strip().splitlines()[-1:] if err else ''}")
                    next_case = running["case"] + 1
                elif proc.returncode != 0 and next_case < cases:
                    raise RuntimeError(f"the tamper worker failed before its first case:\n{err}")
            results[f"{target} {mode}"] = counts
    return results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=150, help="tampered modules per target and mode (default 150)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--targets", default="wasm32,native")
    ap.add_argument("--worker", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        target, mode, seed, start, count = args.worker
        _worker(target, mode, int(seed), int(start), int(count))
        return 0
    t0 = time.perf_counter()
    results = campaign(args.cases, args.seed, tuple(args.targets.split(",")))
    total = sum(sum(c.values()) for c in results.values())
    bad = sum(c[k] for c in results.values() for k in BAD)
    print(f"tampered modules: {total} in {time.perf_counter() - t0:.0f} s")
    for key, c in results.items():
        print(f"  {key:<16} " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    print(f"failures (crash, hang, trap, traceback, wrong result): {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
