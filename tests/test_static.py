"""Dynamic to static (seeds 001/004): a model compiled with its symbols bound is the same
program as the model exported with those dims static, and that program is static (kernel
calls over a compile-time arena). ``compile_model(..., static=True)`` (``--static``) accepts
only such models and otherwise names each value and dim that stays dynamic, and why."""
import numpy as np
import onnx
import pytest
from onnx import helper

import wasm_runtime
from samples.models import reshape_of_shape
from toolkit.compiler import compile_model, static_program_problems
from toolkit.codegen.target import get_target
from toolkit.frontend.onnx.importer import import_model
from toolkit.ir.graph import FOLD_LIMIT, CompileError
from toolkit.passes import run_pipeline
from toolkit.passes.dynamic import check_static, describe, report
from toolkit.program.liveness import ARENA_LIMIT
from util import _TMP, check_model, const, make_model, reference, vinfo

# every test here asserts on the program a plain compile makes (a static one): a
# fact-checking run keeps the folded values' computations to check them
pytestmark = pytest.mark.plain_program

# what a static program is made of: inputs checked against static dims, kernel calls over
# the arena, views, constants, outputs
STATIC_INSTRUCTIONS = {"INPUT", "DIM", "CHECK_EQ", "ALLOC_STATIC", "VIEW", "CALL", "CONST", "OUTPUT", "RETURN", "FREE"}
_count = [0]


def _path(suffix=".wasm"):
    _count[0] += 1
    return _TMP / f"static{_count[0]}{suffix}"


def exported_static(model: onnx.ModelProto, binds: dict[str, int]) -> onnx.ModelProto:
    """The same model as exported with the named input dims fixed."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for vi in m.graph.input:
        for d in vi.type.tensor_type.shape.dim:
            if d.dim_param in binds:
                d.dim_value = binds[d.dim_param]  # (a oneof: clears dim_param)
    return m


def assert_static_program(prog) -> None:
    names = [ins.name for _, _, ins in prog.instrs()]
    assert "ALLOC" not in names, "a run-time allocation"
    assert "BRANCH" not in names and "JUMP" not in names, "control flow"
    counting = [k.name for k in prog.kernels if k.noutputs == 0]
    assert not counting, f"kernels that size outputs from data: {counting}"
    assert set(names) <= STATIC_INSTRUCTIONS, set(names) - STATIC_INSTRUCTIONS
    assert not static_program_problems(prog)


def assert_same_program(a, b) -> None:
    ea, eb = a.encoded, b.encoded
    for f in ("words", "strings", "heap_init", "arena_size", "kernels", "kernel_info", "kernel_sigs",
              "inputs", "outputs"):
        assert getattr(ea, f) == getattr(eb, f), f
    assert [n for n, _ in ea.consts] == [n for n, _ in eb.consts]
    for (_, x), (_, y) in zip(ea.consts, eb.consts):
        np.testing.assert_array_equal(x, y)


# ----------------------------------------------------------------------------- models


def mlp_reshape():
    """x: [batch, seq, 16] flattened to (batch * seq, 16) by a target computed from Shape(x),
    a Gemm and Relu, then reshaped back to (batch, seq, 8) from Shape(x)[0:2]."""
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((8, 16)) * 0.25).astype(np.float32)
    m = make_model([
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "i0"], ["b"], axis=0),
        helper.make_node("Gather", ["s", "i1"], ["t"], axis=0),
        helper.make_node("Mul", ["b", "t"], ["bt"]),
        helper.make_node("Unsqueeze", ["bt", "ax0"], ["bt1"]),
        helper.make_node("Concat", ["bt1", "c16"], ["flat"], axis=0),
        helper.make_node("Reshape", ["x", "flat"], ["x2"]),
        helper.make_node("Gemm", ["x2", "w", "bias"], ["h"], transB=1),
        helper.make_node("Relu", ["h"], ["hr"]),
        helper.make_node("Slice", ["s", "zero", "two"], ["s01"]),
        helper.make_node("Concat", ["s01", "c8"], ["back"], axis=0),
        helper.make_node("Reshape", ["hr", "back"], ["y"]),
    ], [vinfo("x", np.float32, ["batch", "seq", 16])], [vinfo("y", np.float32, None)],
        [const("i0", np.array(0, np.int64)), const("i1", np.array(1, np.int64)), const("ax0", np.array([0], np.int64)),
         const("c16", np.array([16], np.int64)), const("c8", np.array([8], np.int64)),
         const("zero", np.array([0], np.int64)), const("two", np.array([2], np.int64)),
         const("w", w), const("bias", np.zeros(8, np.float32))])
    return m, {"batch": 1, "seq": 128}, {"x": rng.standard_normal((1, 128, 16)).astype(np.float32)}


def seed002():
    m = reshape_of_shape()[0]
    return m, {"n": 4}, {"a": np.arange(40, dtype=np.float32).reshape(4, 10), "b": np.ones(1, np.float32)}


def range_of_shape():
    """positions = Range(0, Shape(x)[0], 1) (seed 003), and the float form an exporter writes
    for positional terms: Range(0., Cast(Shape(x)[1]), 1.) added to x."""
    m = make_model([
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "i0"], ["n"], axis=0),
        helper.make_node("Range", ["z", "n", "one"], ["pos"]),
        helper.make_node("Gather", ["s", "i1"], ["k"], axis=0),
        helper.make_node("Cast", ["k"], ["kf"], to=onnx.TensorProto.FLOAT),
        helper.make_node("Range", ["zf", "kf", "onef"], ["posf"]),
        helper.make_node("Add", ["x", "posf"], ["y"]),
    ], [vinfo("x", np.float32, ["seq", "dim"])], [vinfo("pos", np.int64, None), vinfo("y", np.float32, None)],
        [const("i0", np.array(0, np.int64)), const("i1", np.array(1, np.int64)), const("z", np.array(0, np.int64)),
         const("one", np.array(1, np.int64)), const("zf", np.array(0, np.float32)),
         const("onef", np.array(1, np.float32))])
    return m, {"seq": 128, "dim": 6}, {"x": np.random.default_rng(1).standard_normal((128, 6)).astype(np.float32)}


def fill_expand_of_shape():
    """ConstantOfShape(Shape(x)) and Expand(b, Shape(x)), each added to x; and NonZero of a
    constant mask choosing columns of x (its count is known at compile time)."""
    m = make_model([
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("ConstantOfShape", ["s"], ["ones"], value=helper.make_tensor("v", onnx.TensorProto.FLOAT,
                                                                                       [1], [1.0])),
        helper.make_node("Expand", ["b", "s"], ["bx"]),
        helper.make_node("Add", ["x", "ones"], ["x1"]),
        helper.make_node("Add", ["x1", "bx"], ["y"]),
        helper.make_node("NonZero", ["mask"], ["nz"]),
        helper.make_node("Squeeze", ["nz", "ax0"], ["cols"]),
        helper.make_node("Gather", ["x", "cols"], ["picked"], axis=1),
    ], [vinfo("x", np.float32, ["batch", 4])], [vinfo("y", np.float32, None), vinfo("picked", np.float32, None)],
        [const("b", np.array([0.5, -1, 2, 3], np.float32)), const("mask", np.array([1, 0, 1, 1], np.int64)),
         const("ax0", np.array([0], np.int64))])
    return m, {"batch": 3}, {"x": np.arange(12, dtype=np.float32).reshape(3, 4)}


MODELS = {"mlp_reshape": mlp_reshape, "seed002": seed002, "range_of_shape": range_of_shape,
          "fill_expand_of_shape": fill_expand_of_shape}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_bound_is_the_static_export(name):
    """--bind of the symbolic model gives the very program of the model exported static, and
    that program is static."""
    m, binds, _ = MODELS[name]()
    bound = compile_model(m, _path(), binds=binds)
    static = compile_model(exported_static(m, binds), _path())
    assert_same_program(bound, static)
    assert_static_program(bound.program)
    assert not bound.metadata["dynamic"]["values"]
    # and the symbolic model is not static: --static names a symbol to bind
    with pytest.raises(CompileError, match=r"--bind \w+=<value>"):
        compile_model(m, _path(), static=True)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_static_module_runs(name, target):
    m, binds, feeds = MODELS[name]()
    mod = check_model(m, target, [feeds], static=True, binds=binds)
    bigger = {k: np.concatenate([v, v]) for k, v in feeds.items() if v.ndim}
    with pytest.raises(wasm_runtime.ModelError, match="expected"):
        mod.run({**feeds, **bigger})


# ----------------------------------------------------------------------------- what folds


def _graph(m, **kw):
    return run_pipeline(import_model(m, **kw), get_target("wasm32"))


def test_nonzero_of_a_constant_is_static():
    m = make_model([helper.make_node("NonZero", ["c"], ["nz"]), helper.make_node("Add", ["nz", "x"], ["y"])],
                   [vinfo("x", np.int64, [2, 1])], [vinfo("y", np.int64, None)],
                   [const("c", np.array([[0, 2, 0], [1, 0, 3]], np.float32))])
    g = _graph(m)
    assert g.values["y"].shape == (2, 3)
    np.testing.assert_array_equal(g.values["nz"].const, np.array(np.nonzero([[0, 2, 0], [1, 0, 3]])))
    assert [n.source for n in g.nodes] == ["Add"]


def _filled_weight(consumer: str, k: int = FOLD_LIMIT // 1024 + 1):
    """A ConstantOfShape of ``k`` x 1024 elements (by default FOLD_LIMIT + 1024, more than
    folds unless it is a weight), read by ``consumer``: MatMul's B, or an Add (not a weight)."""
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["w"], name="fill",
                              value=helper.make_tensor("v", onnx.TensorProto.FLOAT, [1], [0.25])),
             helper.make_node("MatMul", ["x", "w"], ["y"], name="mm") if consumer == "MatMul" else
             helper.make_node("Add", ["x", "w"], ["y"], name="add")]
    x_shape = ["n", k] if consumer == "MatMul" else [k, 1024]
    return make_model(nodes, [vinfo("x", np.float32, x_shape)], [vinfo("y", np.float32, None)],
                      [const("shape", np.array([k, 1024], np.int64))])


def test_large_constant_weights_fold():
    """A weight computed from constants folds whatever its size (it is packed at compile
    time, as onnxruntime folds it when a session starts); the same fill read by an Add stays a
    run-time fill of the module's arena."""
    g = _graph(_filled_weight("MatMul"))
    assert g.values["w"].const is not None and g.values["w"].const.size > FOLD_LIMIT
    assert [n.source for n in g.nodes] == ["MatMul"]
    g = _graph(_filled_weight("Add"))
    assert g.values["w"].const is None
    assert [n.source for n in g.nodes] == ["ConstantOfShape", "Add"]


def test_a_weight_past_what_a_module_addresses_is_not_evaluated():
    """A float32 weight of ARENA_LIMIT bytes and a row more stays a run-time fill (nothing
    of its size is evaluated while importing), and compiling it fails by name: the arena
    cannot hold it."""
    model = _filled_weight("MatMul", k=ARENA_LIMIT // 4 // 1024 + 1)
    g = _graph(model)
    assert g.values["w"].const is None
    assert [n.source for n in g.nodes] == ["ConstantOfShape", "MatMul"]
    with pytest.raises(CompileError, match="'w'.*more than the .* a module can address"):
        compile_model(model, _path())


@pytest.mark.parametrize("target", ["wasm32", "native"])
def test_large_folded_weight_runs(target):
    """The folded weight's product against onnx.reference, for two batch sizes."""
    rng = np.random.default_rng(5)
    k = FOLD_LIMIT // 1024 + 1
    check_model(_filled_weight("MatMul"), target, [{"x": rng.standard_normal((n, k)).astype(np.float32)}
                                                   for n in (1, 13)], rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("start,limit,delta", [(0.0, 5.0, 1.0), (0.5, 2.2, 0.25), (10.0, 0.0, -3.0), (1.0, 1.0, 1.0),
                                               (0.0, 1.0, 0.1)])
def test_float_range_of_constants_is_static(start, limit, delta):
    m = make_model([helper.make_node("Range", ["s", "l", "d"], ["y"])], [], [vinfo("y", np.float32, None)],
                   [const(n, np.array(v, np.float32)) for n, v in zip("sld", (start, limit, delta))])
    g = _graph(m)
    want = reference(m, {})["y"]
    assert g.values["y"].shape == want.shape
    np.testing.assert_array_equal(g.values["y"].const, want)


def test_float_range_with_zero_delta_stays_dynamic():
    """The length is undefined: the kernel's run-time error says so."""
    m = make_model([helper.make_node("Range", ["s", "l", "d"], ["y"], name="rg")], [], [vinfo("y", np.float32, None)],
                   [const(n, np.array(v, np.float32)) for n, v in zip("sld", (0.0, 3.0, 0.0))])
    assert str(_graph(m).values["y"].shape[0]).startswith("range_")


# ----------------------------------------------------------------------------- --static


def _argwhere():
    """Seed 000 as tests/test_seeds.py builds it: NonZero then Transpose, x: [n, m]."""
    return make_model([helper.make_node("NonZero", ["x"], ["nz"], name="nz"),
                       helper.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0], name="t")],
                      [vinfo("x", np.float32, ["n", "m"])], [vinfo("idx", np.int64, None)])


def test_static_rejects_seed000_naming_nonzero():
    with pytest.raises(CompileError) as e:
        compile_model(_argwhere(), _path(), static=True)
    msg = str(e.value)
    assert "node 'nz' (NonZero): value 'nz' dim 1 (nonzero_0) depends on data: NonZero 'nz' counts its " \
           "non-zero elements at run time" in msg
    assert "node 't' (Transpose): value 'idx' dim 0 (nonzero_0) depends on data: NonZero 'nz'" in msg
    assert "input 'x' dim 0 (n) is the symbol 'n': bind it with --bind n=<value>" in msg
    assert "input 'x' dim 1 (m) is the symbol 'm': bind it with --bind m=<value>" in msg
    # binding the inputs leaves NonZero, which no binding makes static
    with pytest.raises(CompileError) as e:
        compile_model(_argwhere(), _path(), static=True, binds={"n": 4, "m": 5})
    msg = str(e.value)
    assert "NonZero 'nz' counts its non-zero elements at run time" in msg and "--bind" not in msg


def test_static_accepts_seed002_after_bind(target):
    path = _path(".wasm" if target == "wasm32" else ".so")
    with pytest.raises(CompileError, match=r"value 'd' dim 1 \(n or 10\) depends on input 'a' dim 0, the symbol "
                                           r"'n': bind it with --bind n=<value>"):
        compile_model(seed002()[0], path, target=target, static=True)
    r = compile_model(seed002()[0], path, target=target, static=True, binds={"n": 4})
    assert_static_program(r.program)
    assert r.graph.values["d"].shape == (1, 4, 10, 1)
    feeds = seed002()[2]
    got = wasm_runtime.load(path).run(feeds)
    np.testing.assert_array_equal(got["d"], reference(seed002()[0], feeds)["d"])


def test_static_names_the_chain_of_a_runtime_reshape_target():
    m = make_model([helper.make_node("Cast", ["t"], ["ti"], to=onnx.TensorProto.INT64, name="cast"),
                    helper.make_node("Reshape", ["x", "ti"], ["y"], name="r")],
                   [vinfo("x", np.float32, [6]), vinfo("t", np.float32, [2])], [vinfo("y", np.float32, None)])
    with pytest.raises(CompileError) as e:
        check_static(_graph(m))
    assert "node 'r' (Reshape): value 'y' dim 0 (reshape_0) depends on data: Reshape 'r' reads its target " \
           "shape at run time from 'ti', computed by Cast 'cast' from input 't'" in str(e.value)


def test_static_names_a_range_over_an_input_value():
    m = make_model([helper.make_node("Range", ["z", "l", "o"], ["y"], name="rg")], [vinfo("l", np.int64, [])],
                   [vinfo("y", np.int64, None)], [const("z", np.array(0, np.int64)), const("o", np.array(1, np.int64))])
    with pytest.raises(CompileError, match=r"value 'y' dim 0 \(range_0\) depends on data: Range 'rg' reads its "
                                           r"length at run time from input 'l'"):
        check_static(_graph(m))


def test_chain_through_a_fused_elementwise_chain(target):
    """Div -> Ceil -> Relu fuse into one node (the Div, with its chain as post ops) that
    makes the Relu's output; the reason a Range's length is dynamic follows that node back
    to the input, and the model compiles and runs (the report had looked up the Relu node's
    input, which fusion removed: an internal KeyError)."""
    m = make_model([helper.make_node("Div", ["l", "d"], ["q"], name="div"),
                    helper.make_node("Ceil", ["q"], ["c"], name="ceil"),
                    helper.make_node("Relu", ["c"], ["r"], name="relu"),
                    helper.make_node("Range", ["z", "r", "o"], ["y"], name="rg")],
                   [vinfo("l", np.float32, [])], [vinfo("y", np.float32, None)],
                   [const("d", np.array(2.0, np.float32)), const("z", np.array(0.0, np.float32)),
                    const("o", np.array(1.0, np.float32))])
    with pytest.raises(CompileError, match=r"Range 'rg' reads its length at run time from 'r', computed by Div "
                                           r"'div' from input 'l'"):
        check_static(_graph(m))
    check_model(m, target, [{"l": np.array(v, np.float32)} for v in (7.0, 0.5, -3.0)])


def test_static_names_an_unnamed_input_dim():
    """--bind takes dim_param names only: the message says what to do instead."""
    m = make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [vinfo("x", np.float32, [None, 3])],
                   [vinfo("y", np.float32, None)])
    with pytest.raises(CompileError) as e:
        check_static(_graph(m))
    assert "node 'relu' (Relu): value 'y' dim 0 (x_dim0_0) is input 'x' dim 0, a dim the model leaves unnamed " \
           "(symwasm calls it 'x_dim0_0')" in str(e.value)


def test_static_slice_with_symbolic_bounds_says_to_bind():
    m = make_model([helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Sub", ["s", "one"], ["e"]),
                    helper.make_node("Slice", ["x", "zero", "e"], ["y"], name="sl")],
                   [vinfo("x", np.float32, ["n"])], [vinfo("y", np.float32, None)],
                   [const("one", np.array([1], np.int64)), const("zero", np.array([0], np.int64))])
    with pytest.raises(CompileError, match=r"Slice 'sl' sizes it at run time: its bounds \('e' = \[-1 \+ n\]\) may be "
                                           r"negative; bind n to make it static"):
        check_static(_graph(m))
    check_static(_graph(m, binds={"n": 5}))


def test_static_program_problems_name_what_is_dynamic():
    """The program-level check behind --static finds allocations and counting calls."""
    r = compile_model(_argwhere(), _path())
    problems = static_program_problems(r.program)
    assert "'nz' is allocated at run time" in problems
    assert any("count_nonzero" in p and "computes sizes at run time" in p for p in problems)


def test_metadata_dynamic_section():
    r = compile_model(_argwhere(), _path(), binds={"m": 3})
    d = r.metadata["dynamic"]
    assert d["symbols"] == {
        "n": {"kind": "input", "input": ["x", 0], "why": "input 'x' dim 0, the symbol 'n': bind it with --bind n=<value>"},
        "nonzero_0": {"kind": "data", "input": None,
                      "why": "data: NonZero 'nz' counts its non-zero elements at run time"}}
    assert [(e["value"], e["dim"], e["expr"], e["op"], e["symbols"]) for e in d["values"]] == \
        [("x", 0, "n", None, ["n"]), ("nz", 1, "nonzero_0", "NonZero", ["nonzero_0"]),
         ("idx", 0, "nonzero_0", "Transpose", ["nonzero_0"])]
    assert d == report(r.graph) and not d["control_flow"]
    assert describe(d["values"][2], d["symbols"]) == \
        "node 't' (Transpose): value 'idx' dim 0 (nonzero_0) depends on data: NonZero 'nz' counts its non-zero " \
        "elements at run time"


def test_describe_a_dim_of_several_symbols():
    m = make_model([helper.make_node("Concat", ["x", "y"], ["z"], axis=0, name="cat"),
                    helper.make_node("Reshape", ["z", "flat"], ["f"], name="r")],
                   [vinfo("x", np.float32, ["n", 2]), vinfo("y", np.float32, ["m", 2])], [vinfo("f", np.float32, None)],
                   [const("flat", np.array([-1], np.int64))])
    r = report(_graph(m))
    text = [describe(e, r["symbols"]) for e in r["values"]]
    assert "node 'cat' (Concat): value 'z' dim 0 (m + n) depends on input 'y' dim 0, the symbol 'm': bind it with " \
           "--bind m=<value>; and depends on input 'x' dim 0, the symbol 'n': bind it with --bind n=<value>" in text
    assert any(t.startswith("node 'r' (Reshape): value 'f' dim 0 (2*m + 2*n) depends on") for t in text)


def test_static_rejects_control_flow_even_with_static_shapes():
    """Both branches yield (n, 3): bound, every shape is known, but the program branches."""
    def branch(name, op):
        return helper.make_graph([helper.make_node(op, ["x"], [name])], name, [], [vinfo(name, np.float32, None)])

    m = make_model([helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0, name="sum"),
                    helper.make_node("Greater", ["s", "zero"], ["c"], name="gt"),
                    helper.make_node("If", ["c"], ["y"], name="if", then_branch=branch("t", "Relu"),
                                     else_branch=branch("e", "Neg"))],
                   [vinfo("x", np.float32, ["n", 3])], [vinfo("y", np.float32, None)],
                   [const("zero", np.array(0, np.float32))])
    with pytest.raises(CompileError) as e:
        compile_model(m, _path(), static=True, binds={"n": 2})
    assert str(e.value).splitlines()[1:] == [
        "control flow:", "  node 'if' (If): control flow runs at run time (a static program has no branches or loops)"]
    r = compile_model(m, _path(), binds={"n": 2})
    assert r.metadata["dynamic"]["control_flow"] and not r.metadata["dynamic"]["values"]
    assert any("BRANCH" in p for p in static_program_problems(r.program))


def _where_equal_shape():
    """The PyTorch export of ``x.expand(-1, 3)``-style code: ``Where(Equal(s, -1), 1, s)``
    on a shape, then Expand. Comparisons of dims fold when provable (a dim is never -1), so
    the Expand target is the symbolic shape (n, 3), not data."""
    return make_model(
        [helper.make_node("Shape", ["x"], ["s"]),
         helper.make_node("Slice", ["s", "zero", "one"], ["s0"]),
         helper.make_node("Concat", ["s0", "three"], ["want"], axis=0),
         helper.make_node("Equal", ["want", "minus1"], ["is_neg"]),
         helper.make_node("Where", ["is_neg", "ones", "want"], ["tgt"]),
         helper.make_node("Expand", ["x", "tgt"], ["y"])],
        [vinfo("x", np.float32, ["n", 1])], [vinfo("y", np.float32, None)],
        [const("three", np.array([3], np.int64)), const("minus1", np.array([-1, -1], np.int64)),
         const("ones", np.array([1, 1], np.int64)), const("zero", np.array([0], np.int64)),
         const("one", np.array([1], np.int64))])


def test_comparisons_of_shape_values_fold(target):
    graph = _graph(_where_equal_shape())
    assert [str(d) for d in graph.values["y"].shape] == ["n", "3"]
    assert set(report(graph)["symbols"]) == {"n"}  # no data-dependent symbol
    check_model(_where_equal_shape(), target, [{"x": np.arange(k, dtype=np.float32).reshape(k, 1)}
                                               for k in (1, 4)])



def test_data_dependent_ops_of_constants_fold():
    """TopK, NonZero and Compress of constants fold at import: their outputs are constants
    of static shape, so a Shape of them is static too (and --static accepts the model)."""
    m = make_model([helper.make_node("TopK", ["c", "k"], ["v", "i"], axis=0),
                    helper.make_node("Compress", ["c", "mask"], ["cm"], axis=0),
                    helper.make_node("Shape", ["cm"], ["sh"]),
                    helper.make_node("Expand", ["x", "sh"], ["y"])],
                   [vinfo("x", np.float32, [1])],
                   [vinfo("v", np.float32, None), vinfo("i", np.int64, None), vinfo("y", np.float32, None)],
                   [const("c", np.array([3., 1., 2., 5.], np.float32)), const("k", np.array([2], np.int64)),
                    const("mask", np.array([True, False, True, True]))])
    graph = _graph(m)
    assert [graph.values[o].shape for o in ("v", "i", "y")] == [(2,), (2,), (3,)]
    np.testing.assert_array_equal(graph.values["v"].const, reference(m, {"x": np.ones(1, np.float32)})["v"])
    check_static(graph)
