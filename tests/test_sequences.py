"""Optionals and sequences inside a model: the importer resolves them at compile time (their
structure is known: constant positions, splits of a known number of parts), so only tensors
reach the module. Each model is checked on both targets against onnx.reference (which runs
the sequence ops themselves), at several bindings of its symbolic dims from one module;
what cannot be resolved at compile time, or would cross the module's boundary, fails naming
the node or the input/output."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import wasm_runtime
from toolkit.frontend.onnx.importer import import_model
from toolkit.ir.graph import CompileError
from util import check_model, const, make_model, ort_reference, rand, vinfo

N = helper.make_node


def test_split_erase_insert_stack(target):
    """SplitToSequence into rows (keepdims=0: each a (b,) vector), the last erased, y put in
    front, SequenceLength, then stacked along a new axis 1."""
    nodes = [N("SplitToSequence", ["x"], ["rows"], axis=1, keepdims=0),
             N("SequenceErase", ["rows"], ["short"]),
             N("SequenceInsert", ["short", "y", "zero"], ["seq"]),
             N("SequenceLength", ["seq"], ["n"]),
             N("ConcatFromSequence", ["seq"], ["stacked"], axis=1, new_axis=1)]
    m = make_model(nodes, [vinfo("x", np.float32, ["b", 4]), vinfo("y", np.float32, ["b"])],
                   [vinfo("n", np.int64, None), vinfo("stacked", np.float32, None)],
                   [const("zero", np.array(0, np.int64))], opset=18)
    rng = np.random.default_rng(0)
    check_model(m, target, [{"x": rand(rng, (b, 4)), "y": rand(rng, (b,))} for b in (1, 3)])


def test_split_lengths_at_and_concat(target):
    """A constant 1-D split of a symbolic axis (its sum is checked at run time), elements read
    by negative and positive positions, and concatenated back in another order along axis -1."""
    nodes = [N("SplitToSequence", ["x", "split"], ["parts"], axis=-1),
             N("SequenceAt", ["parts", "minus_one"], ["last"]),
             N("SequenceAt", ["parts", "zero"], ["first"]),
             N("SequenceConstruct", ["last", "first"], ["swapped"]),
             N("ConcatFromSequence", ["swapped"], ["y"], axis=-1)]
    m = make_model(nodes, [vinfo("x", np.float32, [2, "t"])], [vinfo("last", np.float32, None),
                                                               vinfo("y", np.float32, None)],
                   [const("split", np.array([1, 3], np.int64)), const("minus_one", np.array(-1, np.int64)),
                    const("zero", np.array(0, np.int32))], opset=13)
    rng = np.random.default_rng(1)
    mod = check_model(m, target, [{"x": rand(rng, (2, 4))}])
    with pytest.raises(wasm_runtime.ModelError, match=r"\(SplitToSequence\): the split sizes against dim 1 of 'x'"):
        mod.run({"x": rand(rng, (2, 5))})


def test_split_scalar_chunks(target):
    """A scalar split: chunks of 2 along a static axis of 5, the last one smaller, then
    concatenated back along axis 1 (no new axis) with a symbolic other dim."""
    nodes = [N("SplitToSequence", ["x", "two"], ["chunks"], axis=1),
             N("SequenceLength", ["chunks"], ["n"]),
             N("SequenceAt", ["chunks", "two"], ["tail"]),
             N("ConcatFromSequence", ["chunks"], ["y"], axis=1)]
    m = make_model(nodes, [vinfo("x", np.float32, ["b", 5])],
                   [vinfo("n", np.int64, None), vinfo("tail", np.float32, None), vinfo("y", np.float32, None)],
                   [const("two", np.array(2, np.int64))], opset=24)
    rng = np.random.default_rng(2)
    check_model(m, target, [{"x": rand(rng, (b, 5))} for b in (2, 3)])


def test_construct_empty_insert_identity(target):
    """SequenceEmpty filled by inserts at the end and at a negative position, passed through
    an Identity, then stacked (int64 elements)."""
    nodes = [N("SequenceEmpty", [], ["e"], dtype=TensorProto.INT64),
             N("SequenceInsert", ["e", "a"], ["s1"]),
             N("SequenceInsert", ["s1", "b"], ["s2"]),
             N("SequenceInsert", ["s2", "c", "minus_one"], ["s3"]),
             N("Identity", ["s3"], ["s4"]),
             N("ConcatFromSequence", ["s4"], ["y"], axis=0, new_axis=1)]
    m = make_model(nodes, [vinfo(k, np.int64, ["n"]) for k in "abc"], [vinfo("y", np.int64, None)],
                   [const("minus_one", np.array(-1, np.int64))], opset=17)
    rng = np.random.default_rng(3)
    check_model(m, target, [{k: rng.integers(-9, 9, n).astype(np.int64) for k in "abc"} for n in (1, 4)])


def test_optionals(target):
    """Optional of a tensor and of a sequence, and an empty one: OptionalHasElement is true,
    true, false (and false without an input); OptionalGetElement gives the tensor back, and
    takes a plain tensor from version 18. The reference is onnxruntime: onnx.reference's
    Optional without an input makes [None], which its OptionalHasElement counts as an element
    (the spec and the conformance case test_optional_has_element_empty_optional_input say false)."""
    nodes = [N("Optional", ["x"], ["ox"]),
             N("SequenceConstruct", ["x", "x"], ["pair"]),
             N("Optional", ["pair"], ["opair"]),
             N("Optional", [], ["none"], type=helper.make_tensor_type_proto(TensorProto.FLOAT, None)),
             N("OptionalHasElement", ["ox"], ["has_x"]),
             N("OptionalHasElement", ["opair"], ["has_pair"]),
             N("OptionalHasElement", ["none"], ["has_none"]),
             N("OptionalHasElement", [], ["has_nothing"]),
             N("OptionalHasElement", ["x"], ["has_tensor"]),
             N("OptionalGetElement", ["ox"], ["got"]),
             N("OptionalGetElement", ["opair"], ["pair_again"]),
             N("ConcatFromSequence", ["pair_again"], ["both"], axis=0),
             N("OptionalGetElement", ["x"], ["plain"])]
    outs = ["has_x", "has_pair", "has_none", "has_nothing", "has_tensor"]
    m = make_model(nodes, [vinfo("x", np.float32, ["n", 2])],
                   [vinfo(o, np.bool_, None) for o in outs] + [vinfo(o, np.float32, None) for o in ("got", "both",
                                                                                                    "plain")],
                   opset=18)
    rng = np.random.default_rng(4)
    check_model(m, target, [{"x": rand(rng, (n, 2))} for n in (1, 3)], ref=ort_reference)


def test_sequences_in_subgraphs(target):
    """An If branch reads an element of a sequence built outside it; a Loop body builds and
    stacks its own sequence each iteration."""
    then = helper.make_graph([N("SequenceAt", ["parts", "one"], ["t"])], "then", [], [vinfo("t", np.float32, None)])
    orelse = helper.make_graph([N("SequenceAt", ["parts", "zero"], ["e"])], "else", [],
                               [vinfo("e", np.float32, None)])
    body = helper.make_graph(
        [N("Identity", ["c"], ["c_out"]),
         N("SequenceConstruct", ["acc", "acc"], ["twice"]),
         N("ConcatFromSequence", ["twice"], ["stacked"], axis=0, new_axis=1),
         N("ReduceSum", ["stacked", "zeros"], ["acc_out"], keepdims=0)],
        "body", [vinfo("i", np.int64, []), vinfo("c", np.bool_, []), vinfo("acc", np.float32, ["n"])],
        [vinfo("c_out", np.bool_, []), vinfo("acc_out", np.float32, ["n"])])
    nodes = [N("SplitToSequence", ["x"], ["parts"], axis=0, keepdims=0),
             N("If", ["flag"], ["picked"], then_branch=then, else_branch=orelse),
             N("Loop", ["trips", "go", "picked"], ["doubled"], body=body)]
    m = make_model(nodes, [vinfo("x", np.float32, [2, "n"]), vinfo("flag", np.bool_, [])],
                   [vinfo("picked", np.float32, None), vinfo("doubled", np.float32, None)],
                   [const("one", np.array(1, np.int64)), const("zero", np.array(0, np.int64)),
                    const("zeros", np.array([0], np.int64)), const("trips", np.array(3, np.int64)),
                    const("go", np.array(True))], opset=17)
    rng = np.random.default_rng(5)
    check_model(m, target, [{"x": rand(rng, (2, n)), "flag": np.array(f)} for n, f in ((3, True), (5, False))])


def _map_body():
    """SequenceMap's body: (row, scale, shift) -> (row * scale + shift, its length as int64);
    'bias', captured from outside, is added too."""
    return helper.make_graph(
        [N("Mul", ["row", "scale"], ["scaled"]),
         N("Add", ["scaled", "shift"], ["moved"]),
         N("Add", ["moved", "bias"], ["out"]),
         N("Shape", ["row"], ["shape"]),
         N("ReduceProd", ["shape"], ["size"], keepdims=0)],
        "body", [vinfo("row", np.float32, None), vinfo("scale", np.float32, None), vinfo("shift", np.float32, None)],
        [vinfo("out", np.float32, None), vinfo("size", np.int64, None)])


def test_sequence_map(target):
    """SequenceMap is unrolled: over the parts of a split whose part lengths differ (1 and 3
    along a symbolic-batch tensor), with a second sequence input mapped element by element,
    a tensor input given whole to every element and an outer value the body captures; its
    two output sequences are concatenated and stacked."""
    nodes = [N("SplitToSequence", ["x", "split"], ["parts"], axis=1),
             N("SplitToSequence", ["s"], ["scales"], axis=0, keepdims=0),
             N("SequenceMap", ["parts", "scales", "shift"], ["moved", "sizes"], body=_map_body()),
             N("ConcatFromSequence", ["moved"], ["y"], axis=1),
             N("ConcatFromSequence", ["sizes"], ["n"], axis=0, new_axis=1)]
    m = make_model(nodes, [vinfo("x", np.float32, ["b", 4]), vinfo("s", np.float32, [2]),
                           vinfo("shift", np.float32, ["b", 1]), vinfo("bias", np.float32, [])],
                   [vinfo("y", np.float32, None), vinfo("n", np.int64, None)],
                   [const("split", np.array([1, 3], np.int64))], opset=18)
    rng = np.random.default_rng(6)
    check_model(m, target, [{"x": rand(rng, (b, 4)), "s": rand(rng, (2,)), "shift": rand(rng, (b, 1)),
                             "bias": rand(rng, ())} for b in (1, 3)], ref=ort_reference)


def test_sequence_map_nested_and_empty(target):
    """A body that builds and maps a sequence of its own (SequenceMap inside SequenceMap) and
    a map over an empty sequence, whose output dtype comes from the body's declared type.
    Neither onnx.reference nor onnxruntime runs a nested SequenceMap (the first refuses the
    body's attributes, the second's inlined Loop is unsorted), so numpy is the reference:
    each row r of x becomes [-r; -r]."""
    inner = helper.make_graph([N("Neg", ["v"], ["w"])], "inner", [vinfo("v", np.float32, None)],
                              [vinfo("w", np.float32, None)])
    outer = helper.make_graph(
        [N("SequenceConstruct", ["r", "r"], ["pair"]),
         N("SequenceMap", ["pair"], ["negs"], body=inner),
         N("ConcatFromSequence", ["negs"], ["cat"], axis=0)],
        "outer", [vinfo("r", np.float32, None)], [vinfo("cat", np.float32, None)])
    nodes = [N("SplitToSequence", ["x"], ["rows"], axis=0, keepdims=1),
             N("SequenceMap", ["rows"], ["doubled"], body=outer),
             N("ConcatFromSequence", ["doubled"], ["y"], axis=0),
             N("SequenceEmpty", [], ["none"], dtype=TensorProto.FLOAT),
             N("SequenceMap", ["none"], ["still_none"], body=inner),
             N("SequenceLength", ["still_none"], ["zero"])]
    m = make_model(nodes, [vinfo("x", np.float32, [3, "n"])],
                   [vinfo("y", np.float32, None), vinfo("zero", np.int64, None)], opset=17)
    rng = np.random.default_rng(7)
    check_model(m, target, [{"x": rand(rng, (3, n))} for n in (1, 4)],
                ref=lambda _, f: {"y": np.repeat(-f["x"], 2, axis=0), "zero": np.array(0, np.int64)})


# ----------------------------------------------------------------------------- refused

BOUNDARY = ("sequences and optionals are not supported as a model's inputs or outputs: symwasm's VM carries tensors "
            "only, and each element of a sequence has its own shape")


def _refused(nodes, inputs, outputs, initializers=(), opset=18) -> str:
    with pytest.raises(CompileError) as e:
        import_model(make_model(nodes, inputs, outputs, initializers, opset=opset))
    return str(e.value)


def test_sequence_input_refused():
    seq = helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None)
    text = _refused([N("SequenceLength", ["s"], ["n"])], [seq], [vinfo("n", np.int64, None)])
    assert text == f"input 's' is a sequence (seq(tensor(float))); {BOUNDARY} (inside a model they are supported " \
                   f"where their structure is known at compile time)"


def test_optional_input_refused():
    opt = helper.make_value_info("o", helper.make_optional_type_proto(
        helper.make_tensor_type_proto(TensorProto.INT64, ["n"])))
    text = _refused([N("OptionalHasElement", ["o"], ["h"])], [opt], [vinfo("h", np.bool_, None)])
    assert text.startswith(f"input 'o' is an optional (optional(tensor(int64))); {BOUNDARY}")


def test_sequence_output_refused():
    text = _refused([N("SplitToSequence", ["x"], ["s"])], [vinfo("x", np.float32, [3, 2])],
                    [helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None)])
    assert text.startswith(f"graph output 's' is a sequence of 3 float32 tensors; {BOUNDARY}")


def test_run_time_position_refused():
    text = _refused([N("SequenceConstruct", ["x"], ["s"]), N("SequenceAt", ["s", "p"], ["y"], name="at")],
                    [vinfo("x", np.float32, [2]), vinfo("p", np.int64, [])], [vinfo("y", np.float32, None)])
    assert text == ("node 'at' (SequenceAt): position (input 'p') is known only at run time, which is not "
                    "supported: symwasm resolves sequences at compile time, so positions must be constants")


def test_position_out_of_range():
    text = _refused([N("SequenceConstruct", ["x", "x"], ["s"]), N("SequenceErase", ["s", "p"], ["t"], name="er"),
                     N("ConcatFromSequence", ["t"], ["y"], axis=0)],
                    [vinfo("x", np.float32, [2])], [vinfo("y", np.float32, None)], [const("p", np.array(-3))])
    assert text == "node 'er' (SequenceErase): position -3 is out of range for a sequence of 2 elements " \
                   "(valid: -2 to 1)"


def test_sequence_into_ordinary_op_refused():
    text = _refused([N("SequenceConstruct", ["x"], ["s"]), N("Add", ["s", "x"], ["y"], name="add")],
                    [vinfo("x", np.float32, [2])], [vinfo("y", np.float32, None)])
    assert text == ("node 'add' (Add): input 's' is a sequence of 1 float32 tensors, which symwasm resolves at "
                    "compile time; Add takes tensors only (Identity and the optional and sequence ops read "
                    "optionals and sequences)")


def test_empty_optional_get_element_refused():
    text = _refused([N("Optional", [], ["o"], type=helper.make_tensor_type_proto(TensorProto.FLOAT, None)),
                     N("OptionalGetElement", ["o"], ["y"], name="get")], [], [vinfo("y", np.float32, None)])
    assert text == "node 'get' (OptionalGetElement): input 'o' is an empty optional of tensor(float): it has no " \
                   "element to get"


def test_split_of_symbolic_dim_refused():
    text = _refused([N("SplitToSequence", ["x"], ["s"], name="sp"), N("ConcatFromSequence", ["s"], ["y"], axis=0)],
                    [vinfo("x", np.float32, ["n", 2])], [vinfo("y", np.float32, None)])
    assert text == ("node 'sp' (SplitToSequence): dim 0 of 'x' is n, known only at run time, which is not "
                    "supported for chunks of 1: the number of parts must be known at compile time")


def test_concat_of_empty_sequence_refused():
    text = _refused([N("SequenceEmpty", [], ["s"]), N("ConcatFromSequence", ["s"], ["y"], axis=0, name="cat")],
                    [], [vinfo("y", np.float32, None)])
    assert text == "node 'cat' (ConcatFromSequence): the sequence 's' is empty; there is nothing to concatenate"


def test_if_branch_yielding_a_sequence_refused():
    """Out of scope: If carries tensors, and its branches' sequences would have to agree."""
    branch = helper.make_graph([N("SequenceConstruct", ["x"], ["s"])], "b", [],
                               [helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None)])
    text = _refused([N("If", ["c"], ["seq"], then_branch=branch, else_branch=branch, name="if"),
                     N("ConcatFromSequence", ["seq"], ["y"], axis=0)],
                    [vinfo("x", np.float32, [2]), vinfo("c", np.bool_, [])], [vinfo("y", np.float32, None)])
    assert text == ("node 'if' (If): output 's' of subgraph 'b' is a sequence of 1 float32 tensors; subgraphs that "
                    "yield sequences or optionals are not supported (symwasm resolves those at compile time, and If "
                    "and Loop carry tensors)")



def test_sequence_map_lengths_differ_refused():
    text = _refused([N("SplitToSequence", ["x"], ["a"], axis=0), N("SplitToSequence", ["x"], ["b"], axis=1),
                     N("SequenceMap", ["a", "b", "c"], ["m", "k"], body=_map_body(), name="map"),
                     N("ConcatFromSequence", ["m"], ["y"], axis=0)],
                    [vinfo("x", np.float32, [2, 3]), vinfo("c", np.float32, [])], [vinfo("y", np.float32, None)])
    assert text == ("node 'map' (SequenceMap): input 'b' is a sequence of 3 float32 tensors and input 'a' a "
                    "sequence of 2 float32 tensors; the sequences SequenceMap maps over must have one length")


def test_sequence_map_body_arity_refused():
    text = _refused([N("SplitToSequence", ["x"], ["a"], axis=0),
                     N("SequenceMap", ["a"], ["m", "k"], body=_map_body(), name="map"),
                     N("ConcatFromSequence", ["m"], ["y"], axis=0)],
                    [vinfo("x", np.float32, [2, 3])], [vinfo("y", np.float32, None)])
    assert text == "node 'map' (SequenceMap): the body takes 3 inputs; the node has 1"


def test_sequence_map_body_error_names_the_element():
    """A body node that fails is named under the SequenceMap node and the element it was
    unrolled for ('map/1/mm': element 0 is square, element 1 is not)."""
    body = helper.make_graph([N("MatMul", ["row", "row"], ["sq"], name="mm")], "body",
                             [vinfo("row", np.float32, None)], [vinfo("sq", np.float32, None)])
    text = _refused([N("SplitToSequence", ["x", "split"], ["a"], axis=1),
                     N("SequenceMap", ["a"], ["m"], body=body, name="map"),
                     N("ConcatFromSequence", ["m"], ["y"], axis=0)],
                    [vinfo("x", np.float32, [2, 3])], [vinfo("y", np.float32, None)],
                    [const("split", np.array([2, 1], np.int64))])
    assert text == "node 'map/1/mm' (MatMul): inner dims ('a/part1' dim 1 vs 'a/part1' dim 0): 1 != 2"
