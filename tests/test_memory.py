"""Memory: buffers with shapes known at compile time live in a static arena planned by
liveness; the rest are allocated at run time and freed after their last reader."""
import numpy as np
from onnx import helper

from toolkit.codegen.target import get_target, new_module
from toolkit.frontend.onnx.importer import import_model
from toolkit.frontend.onnx.registry import registry
from toolkit.lower import Lowerer
from toolkit.vm import isa
from util import check_model, make_model, rand, vinfo


def _chain(shape, n_ops=6):
    """x -> Relu -> Neg -> Abs -> ... : each value is read only by the next op."""
    ops = ["Relu", "Neg", "Abs", "Sigmoid", "Neg", "Exp"][:n_ops]
    names = ["x"] + [f"t{i}" for i in range(len(ops) - 1)] + ["y"]
    nodes = [helper.make_node(op, [a], [b]) for op, a, b in zip(ops, names, names[1:])]
    return make_model(nodes, [vinfo("x", np.float32, shape)], [vinfo("y", np.float32, None)])


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
    graph = import_model(model)
    lw = Lowerer(graph, new_module(get_target("wasm32"), "t"))
    reg = registry()
    prog = lw.lower(lambda node: reg.lookup(node.op, graph.opset).lower)
    return lw, prog


def _ops(prog):
    return [op.name for _, op, _ in isa.decode(prog.words)]


def test_static_model_uses_only_the_arena_and_reuses_it():
    _, prog = _lower(_chain([64, 64]))
    ops = _ops(prog)
    assert "ALLOC" not in ops and "FREE" not in ops
    assert ops.count("ALLOC_STATIC") == 6
    one = 64 * 64 * 4
    assert prog.arena_size <= 3 * one  # six buffers, at most three alive at once


def test_symbolic_model_allocates_at_run_time():
    _, prog = _lower(_chain(["n", 64]))
    ops = _ops(prog)
    assert "ALLOC_STATIC" not in ops and ops.count("ALLOC") == 6 and "FREE" in ops
    assert prog.arena_size == 0


def test_arena_plan_never_overlaps_live_buffers():
    rng = np.random.default_rng(0)
    for _ in range(20):
        lw, prog = _lower(_random_dag(rng, [8, 16]))
        bufs = list(lw._static.values())
        forever = 10 ** 9
        for i, a in enumerate(bufs):
            a_off = prog.words[a.word]
            assert a_off % 64 == 0 and a_off + a.nbytes <= prog.arena_size
            for b in bufs[i + 1:]:
                b_off = prog.words[b.word]
                live_together = a.start <= (b.end if b.end is not None else forever) and \
                    b.start <= (a.end if a.end is not None else forever)
                if live_together:
                    assert a_off + a.nbytes <= b_off or b_off + b.nbytes <= a_off


def test_arena_models_run_correctly(target):
    rng = np.random.default_rng(1)
    check_model(_chain([16, 24]), target, [{"x": rand(rng, (16, 24))} for _ in range(3)], rtol=2e-6)
    dag = _random_dag(np.random.default_rng(2), [4, 8])
    check_model(dag, target, [{"x": rand(rng, (4, 8), lo=-1, hi=1)} for _ in range(3)], rtol=1e-5)


def test_mixed_static_and_symbolic(target):
    """A static weight path (arena) next to a symbolic batch path (run-time allocation)."""
    w = np.random.default_rng(3).standard_normal((5, 5)).astype(np.float32)
    m = make_model([helper.make_node("Relu", ["w"], ["wr"]), helper.make_node("Neg", ["wr"], ["wn"]),
                    helper.make_node("MatMul", ["x", "wn"], ["y"])],
                   [vinfo("x", np.float32, ["n", 5]), vinfo("w", np.float32, [5, 5])], [vinfo("y", np.float32, None)])
    rng = np.random.default_rng(4)
    check_model(m, target, [{"x": rand(rng, (n, 5)), "w": w} for n in (1, 6)])
    _, prog = _lower(m)
    assert {"ALLOC", "ALLOC_STATIC"} <= set(_ops(prog))
