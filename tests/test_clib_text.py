"""The string kernels of wasm_runtime/clib/sw_text.c, called natively through tests/clib.py:
onnx's own node test cases for Equal on strings, StringConcat, StringSplit and
StringNormalizer; then broader inputs against Python's str methods (the reference
onnx.reference itself calls): ==, +, str.split, str.lower and str.upper, over random and
edge-case data (empty strings and tensors, scalars, broadcasting up to rank 8, multi-byte
UTF-8, invalid UTF-8 kept as bytes, every Unicode code point's case mapping).
"""
from __future__ import annotations

import importlib
import importlib.util
import operator
import sys

import numpy as np
import onnx
import pytest
from onnx import helper

from tests import clib

CLIB_DIR = clib.CLIB_DIR
OK, INTERNAL, CANCELLED = 0, 5, 6
CASES = ("NONE", "LOWER", "UPPER")


@pytest.fixture(scope="module")
def lib():
    """sw_text.c alone, so these tests do not depend on the other C files."""
    return clib.library(("sw_text.c",))


# ---- calling the kernels --------------------------------------------------------------


def strings(values, shape=None) -> np.ndarray:
    """An object array of str/bytes with this shape (any shape, a dim of 0 or rank 0 too)."""
    values = list(values)
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return arr.reshape(shape if shape is not None else (len(values),))


def call(lib, name, args, params=(), blob=b"", cancel=0):
    status, scalars, _ = clib.call(name, args, params=params, blob=blob, cancel=cancel, lib=lib)
    return status, scalars


def guarded_pool(n: int) -> tuple[clib.Arg, np.ndarray]:
    """A pool of n bytes followed by guard bytes, to see a write past its end."""
    buf = np.full(n + 64, 0xA5, np.uint8)
    return clib.Arg(buf[:n]), buf


def run_equal(lib, a, b):
    shape = np.broadcast_shapes(a.shape, b.shape)
    out = clib.Arg(shape=shape, dtype=np.bool_)
    status, _ = call(lib, "text_equal", [clib.Arg(strings=a), clib.Arg(strings=b), out])
    assert status == OK
    return out.array()


def run_concat(lib, a, b):
    xa, xb = clib.Arg(strings=a), clib.Arg(strings=b)
    status, scalars = call(lib, "text_concat_size", [xa, xb])
    assert status == OK
    total = scalars[0]
    pool, buf = guarded_pool(total)
    out = clib.Arg(shape=np.broadcast_shapes(a.shape, b.shape), dtype="string")
    status, _ = call(lib, "text_concat", [xa, xb, pool, out])
    assert status == OK
    assert (buf[total:] == 0xA5).all()
    out.keep.append(pool)  # the output's text lives in the pool
    return out, total


def split_params(delimiter, maxsplit):
    d = (delimiter or "").encode() if not isinstance(delimiter, bytes) else delimiter
    return (int(delimiter is not None), -1 if maxsplit is None else maxsplit, len(d)), d


def run_split(lib, x, delimiter=None, maxsplit=None):
    params, blob = split_params(delimiter, maxsplit)
    xa = clib.Arg(strings=x)
    status, scalars = call(lib, "text_split_count", [xa], params, blob)
    assert status == OK
    y = clib.Arg(shape=x.shape + (scalars[0],), dtype="string")
    z = clib.Arg(shape=x.shape, dtype=np.int64)
    status, _ = call(lib, "text_split", [xa, y, z], params, blob)
    assert status == OK
    return xa, y, z


def normalize_params(case_change, case_sensitive, stopwords):
    words = [w.encode() if isinstance(w, str) else w for w in stopwords]
    return (CASES.index(case_change), int(case_sensitive), len(words), *(len(w) for w in words)), b"".join(words)


def run_normalize(lib, x, case_change="NONE", case_sensitive=False, stopwords=()):
    params, blob = normalize_params(case_change, case_sensitive, stopwords)
    xa = clib.Arg(strings=x)
    status, scalars = call(lib, "text_normalize_size", [xa], params, blob)
    assert status == OK
    kept, nbytes = scalars[0], scalars[1]
    pool, buf = guarded_pool(nbytes)
    out = clib.Arg(shape=(kept,) if x.ndim == 1 else (1, kept), dtype="string")
    status, _ = call(lib, "text_normalize", [xa, pool, out], params, blob)
    assert status == OK
    assert (buf[nbytes:] == 0xA5).all()
    out.keep += [pool, xa]  # the output's text lives in the pool or the input
    return out, nbytes


def elements(arg: clib.Arg) -> list[tuple[int, int]]:
    n = int(np.prod(arg.shape, dtype=np.int64))
    elems = (clib.Str * max(n, 1)).from_address(arg.t.data)
    return [(elems[i].ptr, elems[i].len) for i in range(n)]


# ---- the independent references ----------------------------------------------------------


def as_text(v) -> str:
    """bytes as Python decodes them with surrogateescape (how clib reads outputs back)."""
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else v


def ref_split(x: np.ndarray, delimiter, maxsplit):
    sep = None if not delimiter else as_text(delimiter)
    parts = [as_text(s).split(sep, -1 if maxsplit is None else maxsplit) for s in x.reshape(-1)]
    width = max((len(p) for p in parts), default=0)
    y = strings([q for p in parts for q in p + [""] * (width - len(p))], x.shape + (width,))
    return y, np.array([len(p) for p in parts], np.int64).reshape(x.shape)


def ref_normalize(x: np.ndarray, case_change, case_sensitive, stopwords):
    """The spec's StringNormalizer on Python's str (see sw_text.c for where onnx.reference departs)."""
    fold = str.upper if case_change == "UPPER" else str.lower
    texts = [as_text(s) for s in x.reshape(-1)]
    stops = [as_text(w) for w in stopwords]
    if case_sensitive:
        kept = [s for s in texts if s not in stops]
    else:
        folded = {fold(w) for w in stops}
        kept = [s for s in texts if fold(s) not in folded]
    change = {"NONE": lambda s: s, "LOWER": str.lower, "UPPER": str.upper}[case_change]
    kept = [change(s) for s in kept] or [""]
    return strings(kept, (len(kept),) if x.ndim == 1 else (1, len(kept)))


# ---- onnx's node test cases -----------------------------------------------------------------


def node_cases():
    """onnx's cases for these ops: importing an op's case module records its cases
    (collect_testcases would import every op's, which takes seconds)."""
    import onnx.backend.test.case.node as cases

    for module in ("equal", "string_concat", "string_split", "stringnormalizer"):
        importlib.import_module(f"{cases.__name__}.{module}")

    ops = ("Equal", "StringConcat", "StringSplit", "StringNormalizer")
    return [c for c in cases._NodeTestCases
            if c.model.graph.node[0].op_type in ops and c.data_sets[0][0][0].dtype == object]


NODE_CASES = node_cases()


def test_node_cases_found():
    names = {c.name for c in NODE_CASES}
    assert {"test_equal_string", "test_string_concat_utf8", "test_string_split_empty_tensor",
            "test_strnormalizer_export_monday_insensintive_upper_twodim"} <= names
    assert len(NODE_CASES) >= 19


@pytest.mark.parametrize("case", NODE_CASES, ids=[c.name for c in NODE_CASES])
def test_onnx_node_case(lib, case):
    node = case.model.graph.node[0]
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    attrs = {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}
    inputs, expected = case.data_sets[0]
    if node.op_type == "Equal":
        got = [run_equal(lib, *inputs)]
    elif node.op_type == "StringConcat":
        got = [run_concat(lib, *inputs)[0].array()]
    elif node.op_type == "StringSplit":
        _, y, z = run_split(lib, inputs[0], attrs.get("delimiter"), attrs.get("maxsplit"))
        got = [y.array(), z.array()]
    else:
        stopwords = [w.decode() for w in attrs.get("stopwords", [])]
        out, _ = run_normalize(lib, inputs[0], attrs.get("case_change_action", "NONE"),
                               attrs.get("is_case_sensitive", 0), stopwords)
        got = [out.array()]
    for g, e in zip(got, expected):
        assert g.shape == e.shape
        assert g.tolist() == e.tolist()


# ---- Equal and StringConcat: broadcasting ------------------------------------------------

ALPHABET = ["a", "b", "", " ", "é", "Σ", "ж", "中", "😀", "\x00", "ß"]


def random_strings(rng, shape, alphabet=ALPHABET, longest=4) -> np.ndarray:
    n = int(np.prod(shape, dtype=np.int64))
    return strings(("".join(rng.choice(alphabet, rng.integers(0, longest + 1))) for _ in range(n)), shape)


def broadcast_pair(rng) -> tuple[tuple, tuple]:
    """Two shapes that broadcast: ranks 0..8, dims 0..3, each input may drop leading dims
    and stretch any dim from 1."""
    rank = int(rng.integers(0, 9))
    out = [int(rng.choice([1, 2, 3] if rank > 5 else [0, 1, 2, 3], p=None)) for _ in range(rank)]

    def operand():
        dims = [1 if rng.random() < 0.3 else d for d in out]
        return tuple(dims[int(rng.integers(0, rank + 1)):])

    return operand(), operand()


def test_equal_broadcast_random(lib):
    rng = np.random.default_rng(1)
    small = ["a", "b", "", "é", "😀"]
    for _ in range(150):
        sa, sb = broadcast_pair(rng)
        a, b = random_strings(rng, sa, small, 2), random_strings(rng, sb, small, 2)
        got = run_equal(lib, a, b)
        want = np.asarray(np.frompyfunc(operator.eq, 2, 1)(a, b), dtype=bool)
        assert got.shape == want.shape and (got == want).all(), (sa, sb)


def test_concat_broadcast_random(lib):
    rng = np.random.default_rng(2)
    for _ in range(150):
        sa, sb = broadcast_pair(rng)
        a, b = random_strings(rng, sa), random_strings(rng, sb)
        out, total = run_concat(lib, a, b)
        want = np.frompyfunc(operator.add, 2, 1)(a, b)
        got = out.array()
        assert got.shape == np.shape(want) and got.tolist() == np.asarray(want).tolist(), (sa, sb)
        assert total == sum(len(s.encode()) for s in np.asarray(want, dtype=object).reshape(-1))


def test_concat_scalars_and_empty(lib):
    scalar = strings(["中"], ())
    out, _ = run_concat(lib, scalar, strings(["a", "", "😀"]))
    assert out.array().tolist() == ["中a", "中", "中😀"]
    out, total = run_concat(lib, strings([], (0, 3)), strings(["x", "y", "z"]))
    assert out.shape == (0, 3) and total == 0
    out, total = run_concat(lib, strings([""], ()), strings([""], ()))
    assert out.array().tolist() == "" and total == 0
    assert elements(out) == [(0, 0)]


def test_equal_is_bytewise(lib):
    # precomposed and decomposed é, and invalid bytes, compare as bytes
    a = strings(["é", "e\u0301", b"\xff", b"\xff\xfe", "a\x00"])
    b = strings(["e\u0301", "e\u0301", b"\xff", b"\xff", "a"])
    assert run_equal(lib, a, b).tolist() == [False, True, True, False, False]


def test_broadcast_mismatch_is_internal(lib):
    a, b = clib.Arg(strings=strings(["a", "b"])), clib.Arg(strings=strings(["a", "b", "c"]))
    status, _ = call(lib, "text_equal", [a, b, clib.Arg(shape=(3,), dtype=np.bool_)])
    assert status == INTERNAL
    status, _ = call(lib, "text_concat_size", [a, b])
    assert status == INTERNAL
    ok = clib.Arg(strings=strings(["x"]))
    status, _ = call(lib, "text_equal", [a, ok, clib.Arg(shape=(3,), dtype=np.bool_)])  # wrong out shape
    assert status == INTERNAL


def test_concat_pool_too_small(lib):
    a, b = strings(["abc", "de"]), strings(["f"])
    pool, buf = guarded_pool(5)  # 6 bytes are needed
    status, _ = call(lib, "text_concat", [clib.Arg(strings=a), clib.Arg(strings=b), pool,
                                          clib.Arg(shape=(2,), dtype="string")])
    assert status == INTERNAL
    assert (buf[5:] == 0xA5).all()


# ---- StringSplit ---------------------------------------------------------------------------


def check_split(lib, x, delimiter, maxsplit):
    xa, y, z = run_split(lib, x, delimiter, maxsplit)
    want_y, want_z = ref_split(x, delimiter, maxsplit)
    assert z.array().tolist() == want_z.tolist(), (delimiter, maxsplit)
    assert y.shape == want_y.shape and y.array().tolist() == want_y.tolist(), (delimiter, maxsplit)
    return xa, y, z


@pytest.mark.parametrize("maxsplit", [None, 0, 1, 2, 50])
def test_split_delimiter_random(lib, maxsplit):
    rng = np.random.default_rng(3)
    letters = ["a", "b", "-", "é", "Σ", "中", "😀", " "]
    x = random_strings(rng, (6, 40), letters, 12)
    for delimiter in ["-", "a", "ab", "--", "é", "中😀", "😀", " ", "aba"]:
        check_split(lib, x, delimiter, maxsplit)


def test_split_search_is_exact(lib):
    """Two-Way search against str.split over a two-letter alphabet, where needles are
    periodic or not and matches overlap (the hard cases of the critical factorization)."""
    rng = np.random.default_rng(4)
    x = strings("".join(rng.choice(["a", "b"], rng.integers(0, 30))) for _ in range(300))
    for m in range(1, 9):
        for _ in range(6):
            check_split(lib, x, "".join(rng.choice(["a", "b"], m)), None)
    for delimiter in ["aaaa", "abab", "aab", "baa", "abaab", "bbbbbbba"]:
        check_split(lib, x, delimiter, None)
        check_split(lib, x, delimiter, 2)


SPACES = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]


def test_split_whitespace_random(lib):
    rng = np.random.default_rng(5)
    # every white space character Python knows, and look-alikes it does not split on
    letters = ["a", "b", "ж", "😀", "\u200b", "\ufeff", "\u180e", "\x1b"] + SPACES
    x = random_strings(rng, (3, 100), letters, 10)
    for maxsplit in (None, 0, 1, 3, 100):
        check_split(lib, x, None, maxsplit)
        check_split(lib, x, "", maxsplit)  # an empty delimiter splits on white space too


def test_split_edge_cases(lib):
    x = strings(["", " ", "  a  ", "a", "a-", "-a", "--", "a--b", "\u3000x\u3000y\u3000"])
    for delimiter in (None, "-", "a", "--", "x"):
        for maxsplit in (None, 0, 1, 5):
            check_split(lib, x, delimiter, maxsplit)
    # no element has a part: the parts dim is 0
    _, y, z = check_split(lib, strings(["", "  ", "\t\n"]), None, None)
    assert y.shape == (3, 0) and z.array().tolist() == [0, 0, 0]
    # empty tensors and a scalar
    for shape in [(0,), (2, 0, 3), ()]:
        x = random_strings(np.random.default_rng(6), shape)
        check_split(lib, x, "a", None)
        check_split(lib, x, None, 1)
    # a delimiter longer than the text, and the delimiter itself
    check_split(lib, strings(["ab", "abcabc", "abc"]), "abcabc", None)


def test_split_parts_point_into_input(lib):
    x = strings(["a-bb-", "ccc", "中-"])
    xa, y, _ = run_split(lib, x, "-", None)
    inputs = elements(xa)
    rows = np.array(elements(y), dtype=object).reshape(3, 3, 2)
    for (ptr, length), row, want in zip(inputs, rows, ref_split(x, "-", None)[0]):
        for (p, n), w in zip(row, want):
            if w == "" and (p, n) == (0, 0):
                continue  # padding
            assert ptr <= p and p + n <= ptr + length
    assert tuple(rows[1][1]) == (0, 0) and tuple(rows[1][2]) == (0, 0)  # "ccc" has one part


def test_split_invalid_utf8(lib):
    rng = np.random.default_rng(7)
    pieces = [b"a", b" ", b"\xc2\xa0", b"\xc2", b"\xa0", b"\xe3\x80\x80", b"\xe3\x80", b"\xed\xa0\x80",
              b"\xf4\x90\x80\x80", b"\xc0\xa0", b"\xff", b"-", "😀".encode()]
    x = strings(b"".join(rng.choice(pieces, rng.integers(0, 8))) for _ in range(400))
    for maxsplit in (None, 1):
        check_split(lib, x, None, maxsplit)
        check_split(lib, x, b"-", maxsplit)
        # a valid delimiter only matches whole code points, whatever bytes surround it
        check_split(lib, x, "\u00a0", maxsplit)
        check_split(lib, x, "\u3000", maxsplit)


def test_split_output_too_small(lib):
    params, blob = split_params("-", None)
    x = clib.Arg(strings=strings(["a-b-c"]))
    y = clib.Arg(shape=(1, 2), dtype="string")
    status, _ = call(lib, "text_split", [x, y, clib.Arg(shape=(1,), dtype=np.int64)], params, blob)
    assert status == INTERNAL


# ---- StringNormalizer ----------------------------------------------------------------------

WORDS = ["Monday", "monday", "MONDAY", "straße", "STRASSE", "Straße", "ǅ", "ǆ", "Ǆ", "ΣΑΣ", "σας",
         "ΣΑΣ ΣΑΣ", "İ", "i̇", "ﬀ", "FF", "", " ", "a b", "Ж", "ж", "中"]


@pytest.mark.parametrize("case_change", CASES)
@pytest.mark.parametrize("case_sensitive", [0, 1])
def test_normalize_random(lib, case_change, case_sensitive):
    rng = np.random.default_rng(8 + CASES.index(case_change) + 3 * case_sensitive)
    for trial in range(40):
        x = strings(rng.choice(WORDS, rng.integers(0, 8)))
        if trial % 2:
            x = x.reshape(1, -1)
        stops = list(rng.choice(WORDS, rng.integers(0, 4)))
        out, _ = run_normalize(lib, x, case_change, case_sensitive, stops)
        want = ref_normalize(x, case_change, case_sensitive, stops)
        assert out.shape == want.shape and out.array().tolist() == want.tolist(), (x, stops)


def test_normalize_agrees_with_onnx_reference(lib):
    """Where onnx.reference follows the spec (elements without spaces, non-empty, and a case
    change when stopwords are compared ignoring case), it gives what sw_text.c gives."""
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(9)
    words = ["Monday", "monday", "MONDAY", "Tuesday", "x", "Zz", "zZ"]
    for trial in range(30):
        x = strings(rng.choice(words, rng.integers(1, 7)))
        x = x.reshape(1, -1) if trial % 2 else x
        case_change = CASES[trial % 3]
        sensitive = int(case_change == "NONE" or rng.random() < 0.5)
        stops = list(rng.choice(words, rng.integers(0, 3)))
        node = helper.make_node("StringNormalizer", ["x"], ["y"], case_change_action=case_change,
                                is_case_sensitive=sensitive, stopwords=stops or None)
        graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", onnx.TensorProto.STRING, x.shape)],
                                  [helper.make_tensor_value_info("y", onnx.TensorProto.STRING, None)])
        want = ReferenceEvaluator(helper.make_model(graph)).run(None, {"x": x})[0]
        out, _ = run_normalize(lib, x, case_change, sensitive, stops)
        assert out.array().tolist() == want.tolist()


def test_normalize_shapes(lib):
    for shape in [(0,), (1, 0)]:
        out, nbytes = run_normalize(lib, strings([], shape), "UPPER", 0, ["a"])
        assert out.array().tolist() == ([""] if len(shape) == 1 else [[""]]) and nbytes == 0
    out, _ = run_normalize(lib, strings(["a", "b"], (1, 2)), "LOWER", 1, ["a", "b"])
    assert out.shape == (1, 1) and out.array().tolist() == [[""]]
    assert elements(out) == [(0, 0)]


def test_normalize_none_points_into_input(lib):
    x = strings(["Stop", "keep", "中"])
    xa = clib.Arg(strings=x)
    params, blob = normalize_params("NONE", 0, ["STOP"])
    status, scalars = call(lib, "text_normalize_size", [xa], params, blob)
    assert status == OK and scalars[:2] == [2, 0]
    out = clib.Arg(shape=(2,), dtype="string")
    status, _ = call(lib, "text_normalize", [xa, clib.Arg(np.zeros(0, np.uint8)), out], params, blob)
    assert status == OK and elements(out) == elements(xa)[1:]


def chunks(step=4096):
    """Every code point (surrogates aside), in strings of ``step`` code points."""
    cps = [c for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF]
    return strings("".join(map(chr, cps[i:i + step])) for i in range(0, len(cps), step))


def test_case_mapping_every_code_point(lib):
    x = chunks()
    for case_change, method in (("LOWER", str.lower), ("UPPER", str.upper)):
        out, nbytes = run_normalize(lib, x, case_change)
        want = [method(s) for s in x]
        assert out.array().tolist() == want
        assert nbytes == sum(len(s.encode()) for s in want)


def test_case_mapping_final_sigma(lib):
    """Σ lower-cases to ς at the end of a word: after a cased letter and case-ignorable ones
    (apostrophe, combining marks, U+02B0 which is both), not before another cased letter."""
    rng = np.random.default_rng(10)
    letters = ["Σ", "σ", "A", "a", " ", "'", ".", "\u0301", "\u02b0", "1", "ǅ", "\U0001d400", "\u00ad"]
    x = strings("".join(rng.choice(letters, rng.integers(0, 9))) for _ in range(3000))
    out, _ = run_normalize(lib, x, "LOWER")
    assert out.array().tolist() == [s.lower() for s in x]


def test_case_mapping_invalid_utf8(lib):
    """Bytes that start no well-formed sequence pass through unchanged, as with Python's
    surrogateescape: neither cased nor case-ignorable."""
    rng = np.random.default_rng(11)
    pieces = [b"A", b"\xce\xa3", b"\xc3\x9f", b"\xc3", b"\x9f", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
              b"\xe0\x80\xaf", b"\xff", b"'", "ǅ".encode(), b"\xcc\x81", b"\xf0\x9f\x98"]
    x = strings(b"".join(rng.choice(pieces, rng.integers(0, 8))) for _ in range(2000))
    for case_change, method in (("LOWER", str.lower), ("UPPER", str.upper)):
        out, _ = run_normalize(lib, x, case_change)
        assert out.array().tolist() == [method(as_text(s)) for s in x]


def test_normalize_pool_too_small(lib):
    params, blob = normalize_params("UPPER", 0, [])
    pool, buf = guarded_pool(2)  # "SS" + "A" needs 3 bytes
    status, _ = call(lib, "text_normalize", [clib.Arg(strings=strings(["ß", "a"])), pool,
                                             clib.Arg(shape=(2,), dtype="string")], params, blob)
    assert status == INTERNAL
    assert (buf[2:] == 0xA5).all()


# ---- every function: broken descriptors, cancel, wasm32 -----------------------------------


def test_broken_descriptors_are_internal(lib):
    """What only a compiler bug could pass in is refused, not read past."""
    bad_len = clib.Arg(strings=strings(["abc", "d"]))
    (clib.Str * 2).from_address(bad_len.t.data)[1].len = -1
    sp, sblob = split_params("-", None)
    npar, nblob = normalize_params("LOWER", 0, [])
    assert call(lib, "text_concat_size", [bad_len, bad_len])[0] == INTERNAL
    assert call(lib, "text_split_count", [bad_len], sp, sblob)[0] == INTERNAL
    assert call(lib, "text_normalize_size", [bad_len], npar, nblob)[0] == INTERNAL
    huge = clib.Arg(strings=strings([], (0, 1, 1)))
    huge.t.shape[1] = huge.t.shape[2] = 1 << 40  # no element, but strides past int64
    assert call(lib, "text_concat_size", [huge, huge])[0] == INTERNAL
    x = clib.Arg(strings=strings(["a"], (1, 1)))
    assert call(lib, "text_split_count", [x], (1, -1, -1), b"")[0] == INTERNAL  # a negative delimiter length
    assert call(lib, "text_normalize_size", [x], (3, 0, 0), b"")[0] == INTERNAL  # no such case change
    x.t.shape[0] = 2  # [2, C] is not a StringNormalizer input
    assert call(lib, "text_normalize_size", [x], npar, nblob)[0] == INTERNAL


def all_calls():
    x = clib.Arg(strings=strings(["a-b", "Σ"]))
    sp, sblob = split_params("-", None)
    npar, nblob = normalize_params("UPPER", 0, ["x"])

    def string2():
        return clib.Arg(shape=(2,), dtype="string")

    return [
        ("text_equal", [x, x, clib.Arg(shape=(2,), dtype=np.bool_)], (), b""),
        ("text_concat_size", [x, x], (), b""),
        ("text_concat", [x, x, clib.Arg(np.zeros(16, np.uint8)), string2()], (), b""),
        ("text_split_count", [x], sp, sblob),
        ("text_split", [x, clib.Arg(shape=(2, 2), dtype="string"), clib.Arg(shape=(2,), dtype=np.int64)], sp, sblob),
        ("text_normalize_size", [x], npar, nblob),
        ("text_normalize", [x, clib.Arg(np.zeros(16, np.uint8)), string2()], npar, nblob),
    ]


@pytest.mark.parametrize("index", range(7))
def test_cancel(lib, index):
    name, args, params, blob = all_calls()[index]
    assert call(lib, name, args, params, blob)[0] == OK
    assert call(lib, name, args, params, blob, cancel=1)[0] == CANCELLED


def wasm_function_imports(obj: bytes) -> list[str]:
    """The functions a wasm object file imports (what the link would have to supply)."""
    def leb(i):
        value = shift = 0
        while True:
            byte = obj[i]
            value |= (byte & 0x7F) << shift
            shift, i = shift + 7, i + 1
            if byte < 0x80:
                return value, i

    def limits(i):
        flags, i = obj[i], i + 1
        _, i = leb(i)
        return leb(i)[1] if flags & 1 else i

    i, names = 8, []
    while i < len(obj):
        section, (size, body) = obj[i], leb(i + 1)
        if section == 2:
            count, k = leb(body)
            for _ in range(count):
                n, k = leb(k)
                k += n
                n, k = leb(k)
                name, k = obj[k:k + n].decode(), k + n
                kind, k = obj[k], k + 1
                if kind == 0:
                    names.append(name)
                    k = leb(k)[1]
                elif kind == 1:
                    k = limits(k + 1)
                elif kind == 2:
                    k = limits(k)
                elif kind == 3:
                    k += 2
                else:
                    k = leb(k + 1)[1]
        i = body + size
    return names


def test_compiles_for_wasm32(tmp_path):
    out = tmp_path / "sw_text.o"
    r = clib.compile_wasm("sw_text.c", out)
    assert r.returncode == 0, r.stderr
    # freestanding: no libc function (memcmp, memcpy...) may be left for the link to find
    assert wasm_function_imports(out.read_bytes()) == []


def test_case_table_is_generated():
    spec = importlib.util.spec_from_file_location("gen_case_table", CLIB_DIR / "gen_case_table.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert (CLIB_DIR / "sw_case_table.h").read_text() == gen.render(), \
        "sw_case_table.h is out of date: run python wasm_runtime/clib/gen_case_table.py"
