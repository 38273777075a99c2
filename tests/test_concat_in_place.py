"""Inputs written in place (toolkit/program/memory.py plan_in_place): the producers of a
static Concat's inputs write them into their parts of its output, and the Concat copies
only what no kernel of the graph wrote into a buffer of its own. On both targets against
onnx.reference, with the program checked for which parts were placed and the static arena
for parts that outlive other buffers. The planner reads the op's declaration
(``in_place_inputs``, ``input_offsets``), not its class: a test-only op that declares it
gets the places, a Concat that does not gets none."""
from dataclasses import dataclass

import numpy as np
import pytest
from onnx import helper

from toolkit.codegen.target import get_target, new_module
from toolkit.frontend.onnx.importer import import_model
from toolkit.ops.base import CoreOp
from toolkit.ops.movement import Concat
from toolkit.passes import run_pipeline
from toolkit.program import liveness, memory
from toolkit.program.ir import Program
from toolkit.program.kernels import KernelTable
from toolkit.program.lower import lower_graph
from util import check_model, make_model, lower_model, split_target, vinfo

F32 = np.float32
N = helper.make_node


@pytest.fixture(params=("wasm32", "native"))
def target(request) -> str:
    return request.param


def _calls(prog) -> list[str]:
    return [ins.args[0].name for _, _, ins in prog.instrs() if ins.name == "CALL"]


def _statics(prog) -> dict[str, object]:
    """Value name -> its ALLOC_STATIC's buffer."""
    return {ins.args[0].name: ins.args[2] for _, _, ins in prog.instrs() if ins.name == "ALLOC_STATIC"}


def _fire(batch=1):
    """squeezenet's fire module in small: two branches of one input, concatenated on the
    channels, then read by another op."""
    nodes = [N("Relu", ["x"], ["a"]), N("Neg", ["x"], ["b"]), N("Concat", ["a", "b"], ["c"], axis=1),
             N("Sigmoid", ["c"], ["y"])]
    return make_model(nodes, [vinfo("x", F32, [batch, 3, 5, 7])], [vinfo("y", F32, None)])


def test_parts_are_written_in_place(target):
    model = _fire()
    _, prog, _ = lower_model(model, target)
    assert not any("concat" in k for k in _calls(prog))
    statics = _statics(prog)
    assert statics["a"].parent is statics["c"] and statics["a"].at == 0
    assert statics["b"].parent is statics["c"] and statics["b"].at == 3 * 5 * 7 * 4
    assert statics["a"].offset == statics["c"].offset and statics["b"].offset == statics["c"].offset + 420
    rng = np.random.default_rng(0)
    check_model(model, target, [{"x": rng.standard_normal((1, 3, 5, 7)).astype(F32)}])


def test_a_batch_keeps_the_copy(target):
    """With a batch of 2 the parts are not contiguous in the output."""
    model = _fire(batch=2)
    _, prog, _ = lower_model(model, target)
    assert any("concat" in k for k in _calls(prog))
    assert all(b.parent is None for b in _statics(prog).values())
    check_model(model, target, [{"x": np.random.default_rng(1).standard_normal((2, 3, 5, 7)).astype(F32)}])


def test_what_cannot_be_placed_is_copied(target):
    """A graph input, an input taken twice, a graph output and a view (Reshape) are copied;
    the part written in place is still read correctly by a later node."""
    nodes = [N("Relu", ["x"], ["a"]), N("Neg", ["x"], ["b"]), N("Exp", ["x"], ["o"]),
             N("Reshape", ["a", "shape"], ["v"]), N("Abs", ["x"], ["p"]),
             N("Concat", ["x", "b", "b", "o", "v", "p"], ["c"], axis=0),
             N("Add", ["p", "p"], ["later"])]
    from util import const
    model = make_model(nodes, [vinfo("x", F32, [2, 6])],
                       [vinfo("c", F32, None), vinfo("o", F32, None), vinfo("later", F32, None)],
                       [const("shape", np.array([2, 6], np.int64))])
    _, prog, _ = lower_model(model, target)
    statics = _statics(prog)
    assert statics["p"].parent is statics["c"] and statics["p"].at == 5 * 12 * 4
    assert all(statics[n].parent is None for n in ("b", "o", "a"))
    check_model(model, target, [{"x": np.random.default_rng(2).standard_normal((2, 6)).astype(F32)}])


def test_a_part_outlives_the_buffers_between(target):
    """The first part is written long before the Concat, with buffers made and dropped in
    between: the arena keeps the whole output's bytes from the first part on, so none of
    them lands on the part."""
    nodes = [N("Relu", ["x"], ["a"]), N("Softmax", ["x"], ["t1"]), N("Transpose", ["t1"], ["t2"], perm=[1, 0]),
             N("Softmax", ["t2"], ["t3"]), N("Transpose", ["t3"], ["t4"], perm=[1, 0]), N("Neg", ["t4"], ["b"]),
             N("Concat", ["a", "b"], ["y"], axis=0)]
    model = make_model(nodes, [vinfo("x", F32, [64, 64])], [vinfo("y", F32, None)])
    _, prog, _ = lower_model(model, target)
    statics = _statics(prog)
    assert statics["a"].parent is statics["y"]
    spans = liveness.static_spans(prog, liveness.intervals(prog))
    y_span = next(s for r, s in spans.items() if r.name == "y")
    a_reg = next(ins.args[0] for _, _, ins in prog.instrs() if ins.name == "ALLOC_STATIC" and ins.args[0].name == "a")
    assert y_span[0] <= liveness.intervals(prog)[a_reg][0]
    lo, hi = statics["y"].offset, statics["y"].offset + statics["y"].nbytes
    between = [name for name in ("t1", "t2", "t3", "t4") if name in statics]
    assert len(between) >= 3, sorted(statics)
    for name in between:
        buf = statics[name]
        assert buf.offset + buf.nbytes <= lo or buf.offset >= hi, name
    check_model(model, target, [{"x": np.random.default_rng(3).uniform(-1, 1, (64, 64)).astype(F32)}],
                rtol=1e-5, atol=1e-5)


@dataclass(frozen=True)
class Joined(CoreOp):
    """Test-only, not a Concat: a Concat's shapes and lowering, and the in-place declaration,
    with the offsets ``at`` (default: Concat's)."""

    axis: int
    at: tuple[int, ...] | None = None

    in_place_inputs = True

    def infer(self, ctx) -> None:
        Concat(self.axis).infer(ctx)

    def input_offsets(self, node, graph) -> list[int] | None:
        return list(self.at) if self.at is not None else Concat(self.axis).input_offsets(node, graph)

    def lower(self, lw, node) -> None:
        Concat(self.axis).lower(lw, node)


@dataclass(frozen=True)
class Undeclared(Concat):
    """A Concat that does not declare that its inputs may be written in place."""

    in_place_inputs = False


def _graph_with(op_of, target="wasm32"):
    """The fire module's graph after the passes, its Concat's op replaced by ``op_of(axis)``."""
    tgt = get_target(*split_target(target))
    graph = import_model(_fire())
    graph.keep_quantized_weights = tgt.is_wasm
    graph = run_pipeline(graph, tgt)
    node = next(n for n in graph.nodes if isinstance(n.op, Concat))
    node.op = op_of(node.op.axis)
    return graph, tgt


def test_the_planner_reads_the_declaration_not_the_class(target):
    graph, tgt = _graph_with(Joined, target)
    prog = lower_graph(graph, KernelTable(new_module(tgt, "t"), tgt, Program()))
    statics = _statics(prog)
    assert statics["a"].parent is statics["c"] and statics["b"].parent is statics["c"]
    assert statics["b"].at == 3 * 5 * 7 * 4
    assert not any("concat" in k for k in _calls(prog))

    graph, tgt = _graph_with(Undeclared, target)
    prog = lower_graph(graph, KernelTable(new_module(tgt, "t"), tgt, Program()))
    assert all(b.parent is None for b in _statics(prog).values())
    assert any("concat" in k for k in _calls(prog))


def test_the_offsets_are_the_ops():
    """The planner places each input where the op says, whatever the order."""
    graph, _ = _graph_with(lambda axis: Joined(axis, at=(420, 0)))
    places = memory.plan_in_place(graph)
    assert places["a"].at == 420 and places["b"].at == 0
    assert places["a"].parent is places["c"] and places["c"].nbytes == 840
