"""String tensors end to end (toolkit/ops/text.py, the C kernels of sw_lib.h, both hosts):
the ops that only move elements, string constants, Equal, StringConcat, StringSplit,
StringNormalizer, RegexFullMatch; and ImageDecoder. Each runs on both targets at two or
more bindings of its symbolic dims from one module, against onnx.reference (ImageDecoder
against Pillow, which made onnx's own test data)."""
from __future__ import annotations

import io

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import wasm_runtime
from util import build, check_model, const, make_model, reference, vinfo
from toolkit.compiler import compile_model
from toolkit.ir.graph import CompileError

S, U8 = TensorProto.STRING, TensorProto.UINT8


def sv(name, shape):
    return helper.make_tensor_value_info(name, S, shape)


def strings(rows) -> np.ndarray:
    return np.array(rows, dtype=object)


WORDS = ["", "a", "bé", "日本語", "x y  z", "emoji 🎉!", "Straße", "ΑΒΓ δ", "tab\tsep", "end "]


def random_strings(rng: np.random.Generator, shape) -> np.ndarray:
    n = int(np.prod(shape))
    return strings([WORDS[i] for i in rng.integers(0, len(WORDS), n)]).reshape(shape)


def test_moving_ops_carry_strings(target):
    """Ops that only move elements (views, Transpose, Gather, Concat, Slice, Expand, Where,
    Tile) work on strings unchanged."""
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
        helper.make_node("Reshape", ["t", "minus1"], ["flat"]),
        helper.make_node("Gather", ["x", "idx"], ["g"], axis=1),
        helper.make_node("Concat", ["x", "x"], ["c"], axis=0),
        helper.make_node("Slice", ["x", "zero", "two", "one"], ["s"]),
        helper.make_node("Transpose", ["t"], ["t2"], perm=[1, 0]),
        helper.make_node("Where", ["mask", "x", "t2"], ["w"]),
        helper.make_node("Tile", ["x", "reps"], ["tile"]),
        helper.make_node("Unsqueeze", ["x", "zero"], ["u"]),
    ]
    inits = [const("minus1", np.array([-1], np.int64)), const("idx", np.array([0, -1], np.int64)),
             const("zero", np.array([0], np.int64)), const("two", np.array([2], np.int64)),
             const("one", np.array([1], np.int64)), const("reps", np.array([2, 1], np.int64))]
    outs = [sv(n, None) for n in ("t", "flat", "g", "c", "s", "w", "tile", "u")]
    m = make_model(nodes, [sv("x", ["n", "m"]), vinfo("mask", np.bool_, ["n", "m"])], outs, inits)
    rng = np.random.default_rng(0)
    check_model(m, target, [{"x": random_strings(rng, (n, k)), "mask": rng.random((n, k)) < 0.5}
                            for n, k in ((2, 3), (4, 1), (3, 5))])


def test_string_constant(target):
    """A string initializer (its elements made addresses at run time) concatenated with an input."""
    c = helper.make_tensor("c", S, [3], [s.encode() for s in ("héllo", "", "日本")])
    m = make_model([helper.make_node("Concat", ["x", "c"], ["y"], axis=0),
                    helper.make_node("Gather", ["c", "i"], ["z"], axis=0)],
                   [sv("x", ["n"]), vinfo("i", np.int64, ["k"])], [sv("y", None), sv("z", None)], [c])
    check_model(m, target, [{"x": strings(["a", "b"]), "i": np.array([2, 0], np.int64)},
                            {"x": strings([]), "i": np.array([1, 1, 1], np.int64)}])


def test_equal(target):
    m = make_model([helper.make_node("Equal", ["a", "b"], ["y"])], [sv("a", ["n", "m"]), sv("b", ["m"])],
                   [vinfo("y", np.bool_, None)], opset=19)
    rng = np.random.default_rng(1)
    check_model(m, target, [{"a": random_strings(rng, (n, k)), "b": random_strings(rng, (k,))}
                            for n, k in ((3, 4), (1, 1), (5, 2), (0, 3))])


def test_equal_before_19_refuses_strings(tmp_path):
    m = make_model([helper.make_node("Equal", ["a", "b"], ["y"], name="eq")], [sv("a", [2]), sv("b", [2])],
                   [vinfo("y", np.bool_, None)], opset=13)
    with pytest.raises(CompileError, match="eq.*Equal-13 does not take strings"):
        compile_model(m, tmp_path / "never.wasm")


def test_string_concat(target):
    m = make_model([helper.make_node("StringConcat", ["a", "b"], ["y"])], [sv("a", ["n", 1]), sv("b", ["m"])],
                   [sv("y", None)], opset=20)
    rng = np.random.default_rng(2)
    mod = check_model(m, target, [{"a": random_strings(rng, (n, 1)), "b": random_strings(rng, (k,))}
                                  for n, k in ((3, 4), (1, 1), (0, 2), (6, 3))])
    # the outputs of one run stay valid (their bytes are in the run's pool) until the next
    first = mod.run({"a": strings([["x"]]), "b": strings(["1", "22"])})
    assert first["y"].tolist() == [["x1", "x22"]]


@pytest.mark.parametrize("attrs", [{}, {"delimiter": " "}, {"delimiter": "  "}, {"delimiter": "é"},
                                   {"delimiter": " ", "maxsplit": 1}, {"maxsplit": 0}, {"maxsplit": 2}])
def test_string_split(target, attrs):
    m = make_model([helper.make_node("StringSplit", ["x"], ["y", "z"], **attrs)], [sv("x", ["n"])],
                   [sv("y", None), vinfo("z", np.int64, None)], opset=20)
    rng = np.random.default_rng(3)
    feeds = [{"x": strings(["a b  c", " lead", "trail ", "", "béébé", "x"])},
             {"x": random_strings(rng, (7,))}, {"x": strings([])}]
    check_model(m, target, feeds)


def normalizer_reference(model: onnx.ModelProto, feeds) -> dict:
    """StringNormalizer as its spec (and onnxruntime) says, in Python's str methods: whole
    elements are stopwords; case-insensitive compares both sides after the same case change.
    (onnx.reference also strips accents and drops empty strings, which the spec does not say.)"""
    node = model.graph.node[0]
    a = {x.name: helper.get_attribute_value(x) for x in node.attribute}
    case = a.get("case_change_action", b"NONE").decode()
    stops = [w.decode() for w in a.get("stopwords", [])]
    change = {"LOWER": str.lower, "UPPER": str.upper, "NONE": lambda s: s}[case]
    fold = (lambda s: s) if a.get("is_case_sensitive", 0) else (str.upper if case == "UPPER" else str.lower)
    x = feeds["x"]
    kept = [change(s) for s in x.reshape(-1) if fold(s) not in {fold(w) for w in stops}] or [""]
    return {"y": strings(kept).reshape((1, -1) if x.ndim == 2 else (-1,))}


@pytest.mark.parametrize("attrs", [
    {"case_change_action": "LOWER"},
    {"case_change_action": "UPPER", "stopwords": ["monday"], "is_case_sensitive": 0},
    {"case_change_action": "NONE", "stopwords": ["Monday", "bé"], "is_case_sensitive": 1},
    {"case_change_action": "UPPER", "stopwords": ["a", "b", "monday"]},
])
def test_string_normalizer(target, attrs):
    m = make_model([helper.make_node("StringNormalizer", ["x"], ["y"], **attrs)], [sv("x", ["n"])],
                   [sv("y", None)], opset=10)
    feeds = [{"x": strings(["Monday", "tuesday", "MONDAY", "bé", "Ωmega", "ǅ", "", "ΟΔΟΣ"])},
             {"x": strings(["a", "b"])}, {"x": strings(["Straße"])}]
    check_model(m, target, feeds, ref=normalizer_reference)


def test_string_normalizer_two_dims(target):
    m = make_model([helper.make_node("StringNormalizer", ["x"], ["y"], case_change_action="UPPER",
                                     stopwords=["x"])], [sv("x", [1, "n"])], [sv("y", None)], opset=10)
    check_model(m, target, [{"x": strings([["x", "y", "zé"]])}, {"x": strings([["x"]])}], ref=normalizer_reference)
    # the reference's own answer where it agrees with the spec (no accents, no empty strings)
    check_model(m, target, [{"x": strings([["x", "y", "z"]])}])


def test_string_normalizer_rank_is_checked(tmp_path):
    m = make_model([helper.make_node("StringNormalizer", ["x"], ["y"], name="norm")], [sv("x", [2, 2, 2])],
                   [sv("y", None)], opset=10)
    with pytest.raises(CompileError, match=r"norm.*takes \[C\] or \[1, C\]"):
        compile_model(m, tmp_path / "never.wasm")


def test_string_normalizer_leading_dim_is_checked_at_run_time(target):
    """[k, C] with k bound at run time: k = 2 is refused naming the node, input and dim; the
    module keeps working."""
    m = make_model([helper.make_node("StringNormalizer", ["x"], ["y"], name="norm")], [sv("x", ["k", "n"])],
                   [sv("y", None)], opset=10)
    mod = build(m, target)
    with pytest.raises(wasm_runtime.ModelError, match=r"norm.*input 'x' must be \[C\] or \[1, C\]: its dim 0: k = 2") as e:
        mod.run({"x": strings([["a"], ["b"]])})
    assert e.value.status == 1
    assert mod.run({"x": strings([["a", "b"]])})["y"].tolist() == [["a", "b"]]


@pytest.mark.parametrize("pattern", [r"[a-z]+@[a-z]+\.com", r"(ab|cd)*e?", r".*日本.*", r"\d{2,3}-\w+", ""])
def test_regex_full_match(target, pattern):
    m = make_model([helper.make_node("RegexFullMatch", ["x"], ["y"], pattern=pattern)], [sv("x", ["n"])],
                   [vinfo("y", np.bool_, None)], opset=20)
    feeds = [{"x": strings(["abc@def.com", "abcde", "e", "", "12-ab_c", "123-", "x日本y", "ABC@def.com"])},
             {"x": strings(["cdab", "ab"])}]
    check_model(m, target, feeds)


def test_regex_bad_pattern_fails_at_compile_time(tmp_path):
    m = make_model([helper.make_node("RegexFullMatch", ["x"], ["y"], pattern="(a", name="rx")], [sv("x", ["n"])],
                   [vinfo("y", np.bool_, None)], opset=20)
    with pytest.raises(CompileError, match=r"rx.*pattern '\(a'"):
        compile_model(m, tmp_path / "never.wasm")


def test_new_strings_inside_a_loop_are_refused(tmp_path):
    body = helper.make_graph([helper.make_node("StringConcat", ["s", "s"], ["s2"]),
                              helper.make_node("Identity", ["c"], ["c2"])], "body",
                             [vinfo("i", np.int64, []), vinfo("c", np.bool_, []), sv("s", [2])],
                             [vinfo("c2", np.bool_, []), sv("s2", [2])])
    m = make_model([helper.make_node("Loop", ["n", "", "x"], ["y"], body=body, name="loop")],
                   [vinfo("n", np.int64, []), sv("x", [2])], [sv("y", None)], opset=20)
    with pytest.raises(CompileError, match="new strings inside a Loop"):
        compile_model(m, tmp_path / "never.wasm")


def test_string_input_errors(target):
    m = build(make_model([helper.make_node("Identity", ["x"], ["y"])], [sv("x", ["n"])], [sv("y", None)]), target)
    with pytest.raises(wasm_runtime.ModelError, match="input 'x': element 1 is int, not a string") as e:
        m.run({"x": np.array(["a", 3], dtype=object)})
    assert e.value.status == 1
    assert m.run({"x": np.array([b"by\xc3\xa9tes", "str"], dtype=object)})["y"].tolist() == ["byétes", "str"]


def test_string_elements_must_point_into_their_buffer():
    """The VM refuses a string input whose element points outside its input buffer (a host
    that wrote addresses wrongly, or a hostile one): INVALID_INPUT naming the input and element."""
    m = build(make_model([helper.make_node("Identity", ["x"], ["y"])], [sv("x", ["n"])], [sv("y", None)]), "wasm32")
    b, ctx = m._b, m._ctx
    ptr = b.call("sw_input_buffer", ctx, 0, 64)
    good = np.array([[ptr + 32, 3], [ptr + 35, 2]], "<i8").tobytes() + b"abcde"
    for elems, ok in ((good, True), (np.array([[ptr + 32, 3], [ptr + 60, 10]], "<i8").tobytes(), False),
                      (np.array([[0, 3], [ptr + 32, 0]], "<i8").tobytes(), False),
                      (np.array([[ptr + 32, -1], [ptr + 32, 0]], "<i8").tobytes(), False),
                      (np.array([[ptr, 3], [ptr + 32, 0]], "<i8").tobytes(), False)):
        b.write(ptr, elems)
        b.write(m._shape_buffer, np.array([2] + [0] * 7, "<i8").tobytes())
        status = b.call("sw_set_input", ctx, 0, 8, 1)
        if ok:
            assert status == 0
        else:
            assert status == 1
            assert "string element" in b.cstr(b.call("sw_last_error", ctx)) and "'x'" in b.cstr(b.call("sw_last_error", ctx))


# ----------------------------------------------------------------------------- ImageDecoder

PIL = pytest.importorskip("PIL.Image")


def _encoded(fmt: str, h: int, w: int, seed: int, **save) -> np.ndarray:
    rng = np.random.default_rng(seed)
    img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    with io.BytesIO() as f:
        PIL.fromarray(img).save(f, format=fmt, **save)
        return np.frombuffer(f.getvalue(), np.uint8).copy()


def _pillow(data: np.ndarray, pixel_format: str) -> np.ndarray:
    im = PIL.open(io.BytesIO(data.tobytes()))
    if pixel_format == "Grayscale":
        return np.array(im.convert("L"))[:, :, None]
    rgb = np.array(im.convert("RGB"))
    return rgb[:, :, ::-1] if pixel_format == "BGR" else rgb


@pytest.mark.parametrize("fmt", ["BMP", "PPM", "TIFF", "PNG", "JPEG"])
@pytest.mark.parametrize("pixel_format", ["RGB", "BGR", "Grayscale"])
def test_image_decoder(target, fmt, pixel_format):
    m = make_model([helper.make_node("ImageDecoder", ["data"], ["y"], pixel_format=pixel_format)],
                   [vinfo("data", np.uint8, ["n"])], [vinfo("y", np.uint8, None)], opset=20)
    mod = build(m, target)
    for h, w, seed in ((32, 32, 0), (7, 13, 1), (17, 40, 2)):
        data = _encoded(fmt, h, w, seed)
        got = mod.run({"data": data})["y"]
        np.testing.assert_array_equal(got, _pillow(data, pixel_format), err_msg=f"{fmt} {h}x{w}")


def test_image_decoder_refusals(target):
    m = make_model([helper.make_node("ImageDecoder", ["data"], ["y"], name="dec")], [vinfo("data", np.uint8, ["n"])],
                   [vinfo("y", np.uint8, None)], opset=20)
    mod = build(m, target)
    cases = [(np.frombuffer(b"definitely not an image", np.uint8), "not an image in a known format"),
             (_encoded("WEBP", 8, 8, 0), "recognized but not decoded"),
             (_encoded("PNG", 32, 32, 0)[:60], "corrupt or truncated")]
    for data, why in cases:
        with pytest.raises(wasm_runtime.ModelError, match=f"dec.*cannot decode input 'data': .*{why}") as e:
            mod.run({"data": data})
        assert e.value.status == 1
    # the context is usable after a refusal
    assert mod.run({"data": _encoded("BMP", 2, 3, 0)})["y"].shape == (2, 3, 3)


def test_onnx_reference_agrees_on_strings():
    """The reference these tests use handles the string ops (a guard against comparing two
    empty results)."""
    m = make_model([helper.make_node("StringConcat", ["a", "b"], ["y"])], [sv("a", [2]), sv("b", [2])],
                   [sv("y", None)], opset=20)
    out = reference(m, {"a": strings(["a", "b"]), "b": strings(["c", "d"])})["y"]
    assert out.tolist() == ["ac", "bd"]
    assert onnx.TensorProto.STRING == S
