"""tests/family.py, the test suite's one module per op family: cases merged into one model
keep their names and dims apart, a wrong output of one case fails that case, a case that
cannot compile sends its family's cases to modules of their own, a call that differs from
the recorded one compiles alone, and tests drawing from one generator of the file, each in
turn, draw in their real run what they drew when recorded."""
import numpy as np
import pytest
from onnx import helper

import family
import util
from util import build, check_model, make_model, rand, reference, vinfo

RNG = np.random.default_rng(5)  # the file's generator, as many test files have one


def _add(shape_a, shape_b, dtype=np.float32):
    return make_model([helper.make_node("Add", ["a", "b"], ["y"])],
                      [vinfo("a", dtype, shape_a), vinfo("b", dtype, shape_b)], [vinfo("y", dtype, None)])


def _cases(target):
    """Two cases with the same value names and the same dim name n, bound differently in the
    same run, and one of a different dtype with two feed sets where the others have three."""
    rng = np.random.default_rng(0)
    return [
        family.Case(_add(["n", 3], [3]), target, [{"a": rand(rng, (n, 3)), "b": rand(rng, (3,))} for n in (2, 0, 5)], {}),
        family.Case(_add(["n", "n"], ["n"]), target, [{"a": rand(rng, (n, n)), "b": rand(rng, (n,))} for n in (4, 1, 3)],
                    {}),
        family.Case(_add(["n"], [1], np.int64), target, [{"a": rand(rng, (n,), np.int64), "b": rand(rng, (1,), np.int64)}
                                                        for n in (7, 2)], {}),
    ]


def test_merged_cases_keep_names_and_dims_apart(target):
    cases = _cases(target)
    fam = family.Family(cases)
    merged = family.merge(cases)
    assert [i.name for i in merged.graph.input] == ["c0_a", "c0_b", "c1_a", "c1_b", "c2_a", "c2_b"]
    assert merged.graph.input[2].type.tensor_type.shape.dim[0].dim_param == "c1_n"
    fam.run(build)
    assert not fam.failed
    for c in cases:
        got = fam.outputs[id(c)]
        assert len(got) == len(c.feeds)
        for feeds, out in zip(c.feeds, got):
            np.testing.assert_array_equal(out["y"], reference(c.model, feeds)["y"])


def _branch_reading_outer(k: float):
    """y = If(c, then: x + w (w the graph's initializer), else: x): a branch reading an outer value."""
    add = helper.make_node("Add", ["x", "w"], ["t"])
    then = helper.make_graph([add], "then", [], [vinfo("t", np.float32, None)])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [], [vinfo("e", np.float32, None)])
    return make_model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                      [vinfo("c", np.bool_, []), vinfo("x", np.float32, ["n"])], [vinfo("y", np.float32, None)],
                      [helper.make_tensor("w", helper.np_dtype_to_tensor_dtype(np.dtype(np.float32)), [1], [k])])


def test_a_branch_reads_its_own_cases_outer_values(target):
    """Two cases whose If branches read their graph's initializer w (1 and 10): each branch
    reads its own case's, under its tag, and the family compiles."""
    rng = np.random.default_rng(2)
    cases = [family.Case(_branch_reading_outer(k), target, [{"c": np.array(c), "x": rand(rng, (3,))}
                                                            for c in (True, False)], {}) for k in (1.0, 10.0)]
    fam = family.Family(cases)  # (tags the cases)
    then = next(a.g for a in family.merge(cases).graph.node[1].attribute if a.name == "then_branch")
    assert list(then.node[0].input) == ["c1_x", "c1_w"]
    fam.run(build)
    assert not fam.failed
    for c in cases:
        for feeds, out in zip(c.feeds, fam.outputs[id(c)]):
            np.testing.assert_array_equal(out["y"], reference(c.model, feeds)["y"])


def test_a_case_that_cannot_compile_fails_the_family_not_its_cases(target):
    cases = _cases(target)
    bad = make_model([helper.make_node("NoSuchOp", ["a"], ["y"])], [vinfo("a", np.float32, ["n"])],
                     [vinfo("y", np.float32, None)])
    cases.append(family.Case(bad, target, [{"a": np.zeros(2, np.float32)}], {}))
    fam = family.Family(cases)
    with pytest.warns(UserWarning, match=r"a family of 4 cases .* failed .*NoSuchOp.*one module each"):
        fam.run(build)
    assert fam.failed and fam.outputs is None


# The cases below run through check_model as the suite's op tests do: recorded, then read
# from their family's module.

def _model_and_feeds():
    rng = np.random.default_rng(1)
    return _add(["n", 4], [1, 4]), [{"a": rand(rng, (n, 4)), "b": rand(rng, (1, 4))} for n in (1, 6)]


@pytest.mark.parametrize("k", [0, 1])
def test_a_recorded_case_reads_its_family(k, target):
    model, feeds = _model_and_feeds()
    m = check_model(model, target, feeds)
    assert isinstance(m, family.Later), "recorded, so its outputs came from its family"
    # the module the case would compile alone, built when it is used
    np.testing.assert_allclose(m.run(feeds[0])["y"], feeds[0]["a"] + feeds[0]["b"])


def test_a_wrong_output_fails_its_case(target):
    """The comparison a family's case makes is the one it made alone: a reference that
    disagrees fails it, naming the output."""
    model, feeds = _model_and_feeds()

    def wrong(model, feeds):
        return {"y": reference(model, feeds)["y"] + 1}

    failed = None
    try:  # not pytest.raises: a recording that ends in "DID NOT RAISE" records nothing
        check_model(model, target, feeds, ref=wrong)
    except AssertionError as e:
        failed = e
    assert failed is not None and "Mismatched elements" in str(failed), failed
    assert "y" in str(failed).splitlines(), "the message names the output"
    assert family._by_item.get(family.current.nodeid), "this call was recorded into a family"


def test_a_call_unlike_its_recording_compiles_alone(target):
    model, feeds = _model_and_feeds()
    if family.recording() is None:  # the real run: feeds the recording did not see
        feeds = [{"a": f["a"] * 2, "b": f["b"]} for f in feeds]
    m = check_model(model, target, feeds)
    assert not isinstance(m, family.Later)


@pytest.mark.parametrize("k", [0, 1, 2])
def test_tests_drawing_from_the_files_generator_read_their_family(k, target):
    """Each of these draws its feeds from the file's RNG after the tests before it drew
    theirs, and its real run draws more than its recording did (which ends where the
    module is used): without the generators put back as each test starts (family.begin),
    the second and third would draw other feeds than recorded and compile alone."""
    before = RNG.bit_generator.state
    feeds = [{"a": rand(RNG, (n, 4)), "b": rand(RNG, (1, 4))} for n in (3, 1)]
    m = check_model(_add(["n", 4], [1, 4]), target, feeds)
    run = m.run  # a recording ends here: the stand-in is used
    x = {"a": rand(RNG, (2, 4)), "b": rand(RNG, (1, 4))}  # drawn in the real run only
    np.testing.assert_allclose(run(x)["y"], x["a"] + x["b"], rtol=1e-6)
    assert family._rng_at[family.current.nodeid][0] == (RNG, before), "it started where its recording did"
    assert isinstance(m, family.Later), "its feeds were the recorded ones, so its outputs came from its family"


def test_only_utils_check_model_makes_a_test_recorded():
    """A test file's own function named check_model (tests/test_exporters.py compiles whole
    models in one) does not make its tests recorded: recording them would run them twice."""
    def check_model(model, target):  # a file's own, of the same name
        raise AssertionError("a recording called it")

    def a_test_with(check):  # def test(target): check_model(None, target), in a module where
        names = {"check_model": check}  # check_model is ``check``
        exec("def test(target):\n    check_model(None, target)\n", names)
        return names["test"]

    assert not family._reaches_check_model(a_test_with(check_model))
    assert family._reaches_check_model(a_test_with(util.check_model))
    assert family._reaches_check_model(test_a_recorded_case_reads_its_family)
