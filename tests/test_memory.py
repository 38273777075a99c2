"""Memory: buffers with shapes known at compile time live in a static arena planned by
liveness; the rest are allocated at run time and freed after their last reader."""
import numpy as np
from onnx import helper

from util import check_model, lower_model, make_model, rand, vinfo


def _chain(shape, n_ops=6):
    """x -> Relu -> Neg -> Abs -> ... : each value is read only by the next op. float64,
    which elementwise chains do not fuse (toolkit.passes.fuse: float32 only), so each op
    keeps its own buffer."""
    ops = ["Relu", "Neg", "Abs", "Sigmoid", "Neg", "Exp"][:n_ops]
    names = ["x"] + [f"t{i}" for i in range(len(ops) - 1)] + ["y"]
    nodes = [helper.make_node(op, [a], [b]) for op, a, b in zip(ops, names, names[1:])]
    return make_model(nodes, [vinfo("x", np.float64, shape)], [vinfo("y", np.float64, None)])


def _random_dag(rng, shape, n=14):
    """Elementwise nodes reading random earlier values: lifetimes overlap irregularly."""
    names, nodes = ["x"], []
    for i in range(n):
        a, b = rng.choice(names, 2)
        nodes.append(helper.make_node(["Add", "Mul", "Sub", "Max"][i % 4], [a, b], [f"v{i}"]))
        names.append(f"v{i}")
    outs = [names[-1], names[len(names) // 2]]
    return make_model(nodes, [vinfo("x", np.float32, shape)], [vinfo(o, np.float32, None) for o in outs])


def _lower(model):
    return lower_model(model)[1]


def _ops(prog):
    return [ins.name for _, _, ins in prog.instrs()]


def test_static_model_uses_only_the_arena_and_reuses_it():
    prog = _lower(_chain([64, 64]))
    ops = _ops(prog)
    assert "ALLOC" not in ops and "FREE" not in ops
    assert ops.count("ALLOC_STATIC") == 6
    one = 64 * 64 * 8
    assert prog.arena_size <= 3 * one  # six buffers, at most three alive at once


def test_symbolic_model_plans_a_dynamic_arena():
    """Sizes are expressions of n: the six buffers take turns in two blocks of the dynamic
    arena (each dies right after its reader), sized once per run; nothing is allocated or
    freed buffer by buffer."""
    prog = _lower(_chain(["n", 64]))
    ops = _ops(prog)
    assert ops.count("ALLOC_AT") == 6 and "ALLOC" not in ops and "FREE" not in ops and ops.count("ARENA") == 1
    assert prog.arena_size == 0
    assert len(prog.memory.blocks) == 2
    assert str(prog.memory.dynamic_bytes) == "1024*n"


def test_arena_plan_never_overlaps_live_buffers():
    """Checked against live ranges recomputed by an independent walk: a buffer is live from
    its ALLOC_STATIC to the last instruction reading it (or a view of it), outputs to the end."""
    rng = np.random.default_rng(0)
    for _ in range(20):
        prog = _lower(_random_dag(rng, [8, 16]))
        instrs = [ins for _, _, ins in prog.instrs()]
        root = {}
        span = {}
        for pos, ins in enumerate(instrs):
            if ins.name == "VIEW":
                root[ins.args[0]] = root.get(ins.args[1], ins.args[1])
            for r in ins.regs("use", "usedef", "def"):
                r = root.get(r, r)
                lo, hi = span.get(r, (pos, pos))
                span[r] = (min(lo, pos), len(instrs) if ins.name == "OUTPUT" else max(hi, pos))
        bufs = [(ins.args[0], ins.args[2]) for ins in instrs if ins.name == "ALLOC_STATIC"]
        for i, (ra, a) in enumerate(bufs):
            assert a.offset % 64 == 0 and a.offset + a.nbytes <= prog.arena_size
            for rb, b in bufs[i + 1:]:
                (s1, e1), (s2, e2) = span[ra], span[rb]
                if s1 <= e2 and s2 <= e1:
                    assert a.offset + a.nbytes <= b.offset or b.offset + b.nbytes <= a.offset


def test_arena_models_run_correctly(target):
    rng = np.random.default_rng(1)
    check_model(_chain([16, 24]), target, [{"x": rand(rng, (16, 24), np.float64)} for _ in range(3)], rtol=2e-6)
    dag = _random_dag(np.random.default_rng(2), [4, 8])
    check_model(dag, target, [{"x": rand(rng, (4, 8), lo=-1, hi=1)} for _ in range(3)], rtol=1e-5)


def test_mixed_static_and_symbolic(target):
    """A static weight path (static arena) next to a symbolic batch path (dynamic arena)."""
    w = np.random.default_rng(3).standard_normal((5, 5)).astype(np.float32)
    m = make_model([helper.make_node("Relu", ["w"], ["wr"]), helper.make_node("Neg", ["wr"], ["wn"]),
                    helper.make_node("MatMul", ["x", "wn"], ["y"])],
                   [vinfo("x", np.float32, ["n", 5]), vinfo("w", np.float32, [5, 5])], [vinfo("y", np.float32, None)])
    rng = np.random.default_rng(4)
    check_model(m, target, [{"x": rand(rng, (n, 5)), "w": w} for n in (1, 6)])
    prog = _lower(m)
    assert {"ALLOC_AT", "ALLOC_STATIC"} <= set(_ops(prog))
