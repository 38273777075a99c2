"""RegexFullMatch's pattern compiler (toolkit/regex.py) and Pike VM (sw_regex.c),
run natively through tests/clib.py. References: onnx's node cases, Python's re (on the RE2
syntax Python shares, or on a Python spelling of the same pattern where the two differ) and
unicodedata. An input byte that is not UTF-8 is one unit, as Python's surrogateescape makes
it one lone surrogate, so re on that decoding is the reference for invalid input too."""
import importlib
import random
import re
import unicodedata

import numpy as np
import pytest

from tests import clib
from toolkit import regex
from toolkit.regex import RegexError, compile_pattern

SW_OK, SW_INTERNAL, SW_CANCELLED = 0, 5, 6


def lib():
    return clib.library(("sw_regex.c",))


def run(program, strings, cancel=0):
    """(status, bool array) of sw_regex_full_match over ``strings`` (str or bytes, or a
    clib.Arg of them)."""
    if isinstance(program, str):
        program = compile_pattern(program)
    x = strings if isinstance(strings, clib.Arg) else clib.Arg(strings=strings)
    y = clib.Arg(shape=x.shape, dtype=np.bool_)
    status, _, _ = clib.call("regex_full_match", [x, y], params=program, cancel=cancel, lib=lib())
    return status, y.array()


def check(pattern, strings, reference, flags=re.ASCII):
    """The VM on ``pattern`` agrees with re.fullmatch(reference) on every string."""
    status, got = run(pattern, strings)
    assert status == SW_OK
    ref = re.compile(reference, flags)
    want = [ref.fullmatch(s.decode("utf-8", "surrogateescape") if isinstance(s, bytes) else s) is not None
            for s in strings]
    wrong = [(s, bool(g), w) for s, g, w in zip(strings, got, want) if g != w]
    assert not wrong, f"{pattern!r}: (string, got, want) {wrong[:10]}"


# ---- onnx's node cases ---------------------------------------------------------------------

def onnx_cases():
    """onnx's RegexFullMatch cases. collect_testcases imports every op's case module (about
    8 s here); importing the one module that defines these runs its exports, which add them
    to the list collect_testcases returns."""
    from onnx.backend.test.case import node
    importlib.import_module(node.__name__ + ".regex_full_match")
    cases = {c.name: c for c in node._NodeTestCases if c.model.graph.node[0].op_type == "RegexFullMatch"}
    assert len(cases) >= 3, sorted(cases)
    return cases


@pytest.mark.parametrize("name", ["test_regex_full_match_basic", "test_regex_full_match_email_domain",
                                  "test_regex_full_match_empty"])
def test_onnx_node_case(name):
    case = onnx_cases()[name]
    pattern = next(a.s.decode() for a in case.model.graph.node[0].attribute if a.name == "pattern")
    for inputs, outputs in case.data_sets:
        status, got = run(pattern, inputs[0])
        assert status == SW_OK
        assert got.shape == outputs[0].shape and (got == outputs[0]).all(), (got, outputs[0])


# ---- differential: the syntax RE2 and Python share -----------------------------------------

SHARED = [
    "", "a", "abc", "a|b", "ab|cd", "(ab|cd)*e?", "a*", "a+", "a?", "a*?", "a+?b", "a??b", "a*b*c*",
    "a{3}", "a{2,}", "a{2,4}", "a{0,2}b", "a{2,4}?", "a{0}", "a{0,0}b", "(ab){1,3}", "(a|b){2,3}c",
    "(?:a|bc){2,}d?", "[abc]+", "[^abc]*", "[a-z0-9_]+", "[^a-z]", "[]a]", "[^]a]+", "[a-]+", "[-a]",
    r"[a\-z]+", "[a-c-e]+", ".", ".*", "(?s).*", "(?s:.)+x", ".+\n", "a.c", "[.]", r"\.",
    r"\d+", r"\D+", r"\w+", r"\W+", r"\S+", r"[\d.]+", r"[^\d\s]+", r"[\w-]+", r"[\W\d]+",
    "^abc$", "^$", "a^b", "a$b", "(^a|b)+", "(a|^)b", "(?m)^a$\n^b$", "(?m)(^|x)a", "(?m)a$\n?b",
    "(?m)(a$|\n)+", r"\bfoo\b", r"a\Bb", r"\b", r"foo\b.*", r"\ba+\b \bb+\b", r"(\b.\b)+",
    r"\B..\B", "(?i)abc", "(?i)[a-c]+", "(?i)[^a-c]+", "(?i:ab)c", "(?i)a[^b]c",
    "x*y*z*", "(a|ab)(c|bcd)(d*)", "(a*)*", "(a*)+b", "(a|a)*b", "((a|b)*c)*", "(?:)", "()", "(|a)+",
    "(a?){3}a{3}", "(a+|b+)*c", "(?:a*b*)*c",
    "日本", ".*日本.*", "[日本]+", "[^日本]+", "[α-ω]+", r"\x41", r"\101", r"\t\n",
    r"a\.b", r"\*\+\?\(\)\[\]\{\}\|\^\$\\", r"\ \#\!\@\%\&\-\=\~\`\'\"\,\<\>\/\;\:",
    "(?P<name>a+)b", "(?:a|b)+", r"\d{2,3}-\w+", r"[a-z]+@[a-z]+\.com", "a{", "a{2", "a{x}", "{", "}", "a}",
    "[😀-😂]+", "😀.", ".😀", "é+", "[^é]", "[\u0080-\u07ff]+", "[\u0800-\uffff]+", "[\U00010000-\U0010ffff]+",
    "[\0-\x7f]+", "\0", "[\x00-\x1f]",
]
POOL = ["", "a", "aa", "aaa", "aaaa", "b", "ab", "abc", "ABC", "aBc", "cd", "abcd", "abcde", "e", "x", "\n",
        "a\n", "\na", "a\nb", "foo", "foo bar", "foo.bar", "a b", "12", "123", "12-ab_c", "123-", "日本",
        "x日本y", "日本語", "αβγ", "é", "É", "ée", "-", "]", "a]", "a-", " \t", "\t\n\f\r ", "ab\ncd", "aab",
        "abb", "acbcd", "abcbcd", "a{", "a{2", "{", "}", "a}", "😀", "😀😁", "x😀", "\0", "\x7f", "\x80",
        "\u07ff", "\u0800", "\uffff", "\U00010000", "\U0010ffff", "a.c", "a-c", "_", "é😀日a"]
FILLERS = "ab \n日é😀_1-.xA"


def strings_for(pattern: str, seed: int) -> list[str]:
    """The pool, and random strings over the pattern's own characters and a few others."""
    rng = random.Random(seed)
    alphabet = sorted({c for c in pattern if c not in "\\()[]{}|*+?^$"} | set(FILLERS))
    return POOL + ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 9))) for _ in range(80)]


@pytest.mark.parametrize("pattern", SHARED)
def test_agrees_with_python_re(pattern):
    check(pattern, strings_for(pattern, SHARED.index(pattern)), pattern)


# RE2 spellings Python reads differently or not at all, each with a Python spelling of what
# RE2 means (RE2's syntax reference, https://github.com/google/re2/wiki/Syntax).
TRANSLATED = [
    (r"abc\z", r"abc\Z"), (r"\Aabc", "abc"), ("a$\n", r"a\Z\n"), ("a$", r"a\Z"),
    (r"\s+", "[\t\n\f\r ]+"), (r"\S", "[^\t\n\f\r ]"), (r"[\s\d]+", "[\t\n\f\r 0-9]+"),
    ("[[:alpha:]]+", "[A-Za-z]+"), ("[[:digit:][:upper:]]+", "[0-9A-Z]+"), ("[[:^space:]]+", "[^\t\n\v\f\r ]+"),
    ("[[:punct:]]", r"[!-/:-@\[-`{-~]"), ("[[:word:]]+", r"\w+"), ("[^[:alnum:]]", "[^0-9A-Za-z]"),
    ("[[:xdigit:][:blank:]]+", "[0-9A-Fa-f\t ]+"), ("[[:cntrl:]]", "[\0-\x1f\x7f]"), ("[[:print:]]+", "[ -~]+"),
    ("[[:graph:][:lower:]]+", "[!-~]+"), ("[[:ascii:]]+", "[\0-\x7f]+"),
    ("a{,2}", r"a\{,2\}"), ("a{01}", r"a\{01\}"), ("a{1,02}", r"a\{1,02\}"), ("a{1234567890}", r"a\{1234567890\}"),
    (r"\Qa.b*\E+", r"a\.b\*+"), (r"\Qab", "ab"), (r"x\Q\E*", "x*"), (r"\Q\\E", r"\\"), (r"\Q(a|b)\E", r"\(a\|b\)"),
    (r"\x{1F600}", "\U0001F600"), (r"\x{41}", "A"), (r"\x{0041}+", "A+"), (r"\12", "\n"), (r"\141\142", "ab"),
    (r"\0", "\0"), (r"\08", "\x008"), (r"\1234", "S4"), (r"\_", "_"), (r"[\_]", "_"),
    (r"(?<n>a)b", "(?P<n>a)b"), (r"(?P<名前>a)", "a"), ("a(?i)b", "a(?i:b)"), ("(?i)a(?-i)b", "(?i:a)b"),
    ("(?i:a|b)c|d", "(?i:a|b)c|d"), ("(?U)a+?b", "a+b"), ("(?U)a{2,3}", "a{2,3}"), ("(?sm)^.$", "(?s).\\Z"),
    ("(?s-s).", "."), ("(?)a", "a"), ("a(?i)*", "a*"), (r"[^\D]+", r"\d+"), (r"[^\W\d]+", "[A-Za-z_]+"),
    (r"[\x{e9}-\x{ea}]+", "[éê]+"), (r"\v", "\v"), (r"\a\f", "\a\f"), (r"\p{Any}+", "(?s).+"),
    # \B at the start of an empty text: neither side is a word character, so it holds (Python
    # 3.11 says otherwise, a bug fixed in 3.14: gh-124130)
    (r"\B", ""), (r"\B(a\B)?", ""), (r".\B.", r".\B."),
]


@pytest.mark.parametrize("pattern,python", TRANSLATED)
def test_re2_spellings(pattern, python):
    check(pattern, strings_for(pattern, len(pattern)) + ["\v", "\v\v", "ab\v", "\x08", "\a\f", "S4", "\x008",
                                                          "名", "éêe", "aB", "Ab", "AB", "\U0001F600"], python)


@pytest.mark.parametrize("pattern", ["(?i)é+", "(?i)σ+", "(?i)[σ-τ]+", "(?i)k+", "(?i)[k-m]+", "(?i)s+",
                                     "(?i)[^k]", "(?i)ß", "(?i)ǆ", "(?i)[a-zà-ÿ]+", "(?i)Ꭰ", "(?i)ᲀ"])
def test_unicode_case_folding_agrees_with_python(pattern):
    strings = ["é", "É", "ée", "Σσς", "ΣΑΣ", "τΤ", "K", "k", "\u212a", "ſ", "s", "S", "ß", "ẞ", "ss", "SS", "Ǆ",
               "ǅ", "ǆ", "ÀÿŸ", "ÿ", "Ÿ", "Ꭰ", "ꭰ", "ᲀ", "в", "В", "L", "x", ""]
    check(pattern, strings, pattern, flags=0)


def test_every_case_orbit_agrees_with_python():
    """(?i)c for each code point that has other case forms, against its neighbours and case
    forms; Python also folds i and I with ı and İ, RE2 does not (Turkish)."""
    keys = sorted({ord(c) for cp in range(0x20000) if not 0xD800 <= cp <= 0xDFFF
                   for c in (chr(cp).lower(), chr(cp).upper(), chr(cp).casefold()) if len(c) == 1 and ord(c) != cp})
    turkish = {0x130, 0x131}
    for cp in keys:
        if cp in turkish:
            continue
        c = chr(cp)
        strings = {c.lower(), c.upper(), c.casefold(), c.title(), chr(cp - 1), chr(cp + 1), c + c}
        strings = sorted(s for s in strings if not any(ord(ch) in turkish or 0xD800 <= ord(ch) <= 0xDFFF for ch in s))
        check("(?i)" + re.escape(c), strings, "(?i)" + re.escape(c), flags=0)


@pytest.mark.parametrize("name", ["L", "Lu", "Ll", "Lt", "Lm", "Lo", "M", "Mn", "N", "Nd", "Nl", "No", "P",
                                  "Pd", "Ps", "S", "Sm", "Sc", "So", "Z", "Zs", "C", "Cc", "Cf", "Co"])
def test_unicode_general_categories_agree_with_unicodedata(name):
    sample = [cp for cp in list(range(0x300)) + list(range(0x300, 0x110000, 97)) if not 0xD800 <= cp <= 0xDFFF]
    strings = clib.Arg(strings=[chr(cp) for cp in sample])
    # RE2 has no class of unassigned code points (Cn), so C is Cc, Cf, Co and Cs
    want = np.array([unicodedata.category(chr(cp)).startswith(name) and unicodedata.category(chr(cp)) != "Cn"
                     for cp in sample])
    spelled = name if len(name) == 1 else "{" + name + "}"  # \pL, \p{Lu}
    for pattern, expect in ((rf"\p{spelled}", want), (rf"\P{spelled}", ~want), (rf"\p{{^{name}}}", ~want),
                            (rf"[\p{spelled}]", want), (rf"[^\p{spelled}]", ~want)):
        status, got = run(pattern, strings)
        assert status == SW_OK
        assert (got == expect).all(), (pattern, [hex(cp) for cp, g, w in zip(sample, got, expect) if g != w][:10])


def test_invalid_utf8_is_one_unit_per_byte():
    """Each byte that starts no valid sequence (stray continuation, truncated, overlong,
    surrogate, above U+10FFFF) is a unit that only ., negated classes and \\W-like classes
    match; the reference is re on Python's surrogateescape decoding, which also makes each
    such byte one unit."""
    strings = [b"\xff", b"\x80", b"a\xffb", b"\xe6\x97", b"\xe6\x97a", b"\xed\xa0\x80", b"\xc0\xaf", b"\xc1\x81",
               b"\xf4\x90\x80\x80", b"\xf8\x88\x80\x80\x80", b"\xe6\xe6\x97\xa5", b"\xf0\x9f\x98", b"\xe0\x80\x80",
               b"\xf0\x80\x80\x80", "日".encode(), b"ab", b""]
    for pattern in [".", "..", "...", "....", ".....", "(?s).+", "[^a]", "[^a]+", r"\W+", r"\D\D", r"\S{3}",
                    r"a\W?b", r"a.b", ".*a.*", r"\b", ".日"]:
        check(pattern, strings, pattern)
    # A class of code points holds no invalid unit (a surrogate for re), its negation does;
    # the letters among these strings are a, b and 日.
    for pattern, python in [(r"[\PL]+", "[^ab日]+"), (r"[^\x{10FFFF}]+", "[^\U0010ffff]+"),
                            (r"\p{Any}", "[^\udc80-\udcff]"), (r"[\x{80}-\x{10FFFF}]+", "[\x80-\ud7ff\ue000-\U0010ffff]+"),
                            (r"[^\x{80}-\x{10FFFF}]+", "[\0-\x7f\udc80-\udcff]+")]:
        check(pattern, strings, python)


def test_long_input():
    rng = random.Random(7)
    text = "".join(rng.choice("ab日\n") for _ in range(100_000))
    for pattern in ["(?s).*日.*", "[ab日\n]*", "(?s)(a|b|日|\n)*a", "(?s).*bb日.*", r"(?s)(.)*\n"]:
        check(pattern, [text, text + "x", "a" + text], pattern)


@pytest.mark.parametrize("hostile,equivalent", [("(a*)*b", "a*b"), ("(a|a)*b", "a*b"), ("(a|aa)*c", "a*c"),
                                                ("(a+a+)+b", "a{2,}b"), ("(?:a*)*(?:a*)*b", "a*b"),
                                                ("(.*)*x", ".*x"), ("(a?){50}a{50}", "a{50,100}"),
                                                (r"(\w+\s?)*$", r"[\w\s]*"), ("(a|a?)+b", "a*b")])
def test_hostile_patterns_finish(hostile, equivalent):
    """Patterns a backtracking matcher takes exponential time on, against an equivalent one
    re matches quickly: the Pike VM must give the right answer (and so finish)."""
    strings = ["a" * 5000, "a" * 5000 + "b", "a" * 5000 + "c", "a" * 100 + "!", "a" * 75, "aaaa b", ""]
    check(hostile, strings, equivalent)


# ---- refusals --------------------------------------------------------------------------------

@pytest.mark.parametrize("pattern,reason", [
    ("(a", "missing '\\)'"), ("a)", "unexpected '\\)'"), ("(a|b", "missing '\\)'"), ("[a", "missing '\\]'"),
    ("[]", "missing '\\]'"), ("*a", "missing argument to repetition operator '\\*'"),
    ("a|*", "missing argument"), ("(*)", "missing argument"), ("(?i)*", "missing argument"),
    (r"\Q\E*", "missing argument"), ("a**", "bad repetition operator '\\*\\*'"), ("a*?*", "bad repetition operator"),
    ("a{2}{3}", "bad repetition operator '\\{2\\}\\{3\\}'"), ("a?*", "bad repetition operator"),
    ("a*+", "possessive quantifier 'a?\\*\\+'"), ("a++", "possessive"), ("a?+", "possessive"),
    ("a{2}+", "possessive"), ("a{1001}", "above RE2's limit of 1000"), ("a{2,1001}", "limit of 1000"),
    ("a{3,2}", "maximum is below the minimum"), ("(a{100}){100}", "multiply to more than 1000"),
    ("((((((((((x{2}){2}){2}){2}){2}){2}){2}){2}){2}){2})", "multiply"), ("(((x{7}){11}){13})", "multiply"),
    (r"(a)\1", "backreference '\\\\1'"), (r"\8", "backreference"), (r"\g1", "backreferences"),
    (r"(?P<n>a)\k<n>", "named backreferences"), ("(?P<n>a)(?P=n)", "named backreferences"),
    (r"a\Z", "'\\\\Z' is not in RE2's syntax"), (r"\C", "'\\\\C'.*code points"),
    ("(?=a)", "lookahead"), ("(?!a)", "negative lookahead"), ("(?<=a)b", "lookbehind"),
    ("(?<!a)b", "negative lookbehind"), ("(?>a)", "atomic groups"), ("(?#note)", "comments"),
    ("(a)(?(1)b|c)", "conditionals"), ("(?R)", "recursive calls"), ("(?1)", "recursive calls \\('\\(\\?1\\)'\\)"), ("(?P>n)", "recursive calls"),
    ("(?-1)", "recursive calls"), ("(?&n)", "recursive calls"),
    ("(?'n'a)", "named groups written"), ("(?|a|b)", "branch reset"),
    ("(?x)a", "unsupported flag 'x'"), ("(?a)a", "unsupported flag 'a'"), ("(?-)a", "'-' with no flag"),
    ("(?i-)a", "'-' with no flag"), ("(?i", "missing '\\)'"), ("(?P<>a)", "invalid group name ''"),
    ("(?P<a b>c)", "invalid group name 'a b'"), ("(?P<a", "missing '>'"),
    (r"\p{Greek}", "unsupported Unicode class '\\\\p\\{Greek\\}'.*scripts"), (r"\pX", "unsupported Unicode class"),
    (r"\p{Cn}", "unsupported Unicode class"), (r"\p{L", "missing '\\}'"), ("\\p", "needs a Unicode class name"),
    ("[[:foo:]]", "unknown class '\\[:foo:\\]'"), ("[[:a]b:]", "unknown class"), ("[[:^^alpha:]]", "unknown class '\\[:\\^\\^alpha:\\]'"), ("[z-a]", "invalid class range 'z-a'"),
    (r"[a-\d]", "invalid escape sequence '\\\\d'"), (r"[\b]", "backspace"), (r"[\A]", "invalid escape"),
    (r"\q", "invalid escape sequence '\\\\q'"), (r"\e", "invalid escape"), (r"\é", "invalid escape"),
    ("a\\", "trailing backslash"), (r"\x{110000}", "up to 10FFFF"), (r"\x{}", "hex digits"), (r"\x{12", "hex digits"),
    (r"\xZZ", "two hex digits"), (r"\x1", "two hex digits"), ("\ud800", "lone surrogate"),
    ("(" * 65 + ")" * 65, "nested deeper than 64"), ("a" + "(?i)*" * 200, "nests more than 128 levels"),
    ("(abcde){1000}", "more than the 4096 program words"), (r"\pL\PL\p{Lu}\P{Lu}\p{Ll}\P{Ll}\pN\PN", "4096 program words"),
])
def test_refused(pattern, reason):
    with pytest.raises(RegexError, match=reason):
        compile_pattern(pattern)


# ---- the program: verification, cancel, build ------------------------------------------------

def test_program_ends_are_header_and_match():
    """The format the docstring describes, read by an independent decoder: header words, one
    word per instruction, the last one MATCH, class ranges sorted and disjoint."""
    program = compile_pattern(r"(?i)[a-c]x|\d+é")
    assert program[0] == regex.HEADER_WORD
    ninstr, nclass = program[1], program[2]
    assert len(program) == regex.HEADER_WORDS + ninstr + nclass
    instrs = regex.decode(program)
    assert instrs[-1].op == "MATCH"
    for ins in instrs:
        if ins.op == "CLASS":
            assert all(lo <= hi for lo, hi in ins.ranges)
            assert all(a[1] < b[0] for a, b in zip(ins.ranges, ins.ranges[1:]))


def tampered(edit) -> list[int]:
    program = list(compile_pattern(r"a(b|c)*[x-z]\b.\d{2}"))
    edit(program, regex.decode(tuple(program)))
    return program


def _set_operand(program, pc, a=None, b=None, op=None):
    w = program[regex.HEADER_WORDS + pc]
    mask = (1 << regex.OPERAND_BITS) - 1
    w_op, w_a, w_b = w & 0xFF, w >> regex.A_SHIFT & mask, w >> regex.B_SHIFT & mask
    program[regex.HEADER_WORDS + pc] = ((w_op if op is None else op) | (w_a if a is None else a) << regex.A_SHIFT
                                        | (w_b if b is None else b) << regex.B_SHIFT)


def _first(instrs, op):
    return next(i for i in instrs if i.op == op)


def _class_word(program, k):
    return regex.HEADER_WORDS + program[1] + k


MALFORMED = {
    "bad header": lambda p, ins: p.__setitem__(0, regex.HEADER_WORD + 1),
    "no instructions": lambda p, ins: p.__setitem__(1, 0),
    "instruction count over the cap": lambda p, ins: p.__setitem__(1, regex.MAX_WORDS),
    "negative class table": lambda p, ins: p.__setitem__(2, -1),
    "class table over the cap": lambda p, ins: p.__setitem__(2, regex.MAX_WORDS - regex.HEADER_WORDS - p[1] + 1),
    "jump target out of range": lambda p, ins: _set_operand(p, _first(ins, "JMP").pc, a=p[1]),
    "split target out of range": lambda p, ins: _set_operand(p, _first(ins, "SPLIT").pc, b=p[1] + 7),
    "unknown opcode": lambda p, ins: _set_operand(p, _first(ins, "CHAR").pc, op=99),
    "opcode zero": lambda p, ins: _set_operand(p, _first(ins, "CHAR").pc, op=0),
    "reserved bits set": lambda p, ins: p.__setitem__(regex.HEADER_WORDS, p[regex.HEADER_WORDS] | 1 << 60),
    "negative word": lambda p, ins: p.__setitem__(regex.HEADER_WORDS, -1),
    "class offset inside a class": lambda p, ins: _set_operand(p, _first(ins, "CLASS").pc, a=1),
    "class offset past the table": lambda p, ins: _set_operand(p, _first(ins, "CLASS").pc, a=p[2]),
    "class range lo above hi": lambda p, ins: p.__setitem__(_class_word(p, 1), 9 | 3 << 32),
    "class range above the invalid unit": lambda p, ins: p.__setitem__(_class_word(p, 1),
                                                                         1 | (regex.INVALID_UNIT + 1) << 32),
    "class count past the table": lambda p, ins: p.__setitem__(_class_word(p, 0), p[2]),
    "class count negative": lambda p, ins: p.__setitem__(_class_word(p, 0), -1),
    "char above the invalid unit": lambda p, ins: _set_operand(p, _first(ins, "CHAR").pc, a=regex.INVALID_UNIT + 1),
    "assertion zero": lambda p, ins: _set_operand(p, _first(ins, "ASSERT").pc, a=0),
    "assertion unknown": lambda p, ins: _set_operand(p, _first(ins, "ASSERT").pc, a=len(regex.ASSERTIONS) + 1),
    "last instruction falls through": lambda p, ins: _set_operand(p, ins[-1].pc, op=regex.OP["CHAR"], a=97),
}


@pytest.mark.parametrize("what", sorted(MALFORMED))
def test_malformed_program_is_refused(what):
    program = tampered(MALFORMED[what])
    status, _ = run(program, ["abzx 12", ""])
    assert status == SW_INTERNAL, what


def test_unsorted_class_is_refused():
    program = list(compile_pattern("[ac-e]"))
    table = regex.HEADER_WORDS + program[1]
    program[table + 1], program[table + 2] = program[table + 2], program[table + 1]
    assert run(program, ["a"])[0] == SW_INTERNAL


def test_tampered_programs_never_crash():
    """Random word changes to a valid program: the VM verifies or runs them, never crashes.
    The params are padded to the cap: the VM cannot check the counts against the params'
    real length (the module's constant), only against the cap."""
    rng = random.Random(3)
    base = compile_pattern(r"(a|b)*c[^x-z]+\b(?m)$\d{1,3}")
    for _ in range(400):
        program = list(base) + [0] * (regex.MAX_WORDS - len(base))
        for _ in range(rng.randrange(1, 4)):
            k = rng.randrange(len(base))
            program[k] = rng.choice([program[k] ^ 1 << rng.randrange(64 if k else 32),
                                     rng.randrange(-5, len(program) + 5)])
            program[k] = (program[k] + (1 << 63)) % (1 << 64) - (1 << 63)
        status, _ = run(program, ["aabc12 9", "", "c\xffz"])
        assert status in (SW_OK, SW_INTERNAL)


def test_empty_loops_terminate():
    """A valid program whose loops consume nothing: the closure visits each instruction once."""
    def w(op, a=0, b=0):
        return regex.OP[op] | a << regex.A_SHIFT | b << regex.B_SHIFT

    program = (regex.HEADER_WORD, 4, 0, w("SPLIT", 1, 2), w("JMP", 0), w("JMP", 3), w("SPLIT", 0, 3))
    status, got = run(program, ["", "a"])
    assert status == SW_OK and not got.any()


def test_cancel():
    status, _ = run("a*", ["aaa", "b"], cancel=1)
    assert status == SW_CANCELLED


def test_compiles_for_wasm32(tmp_path):
    r = clib.compile_wasm("sw_regex.c", tmp_path / "sw_regex.o")
    assert r.returncode == 0, r.stderr


def test_opcode_header_is_up_to_date():
    assert regex.HEADER.read_text() == regex.c_header(), "run: python -m toolkit.regex"
