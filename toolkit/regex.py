"""RegexFullMatch: an RE2-syntax pattern compiled to a program for the Pike VM of
wasm_runtime/clib/sw_regex.c. This docstring is the one definition of the program format;
the opcode numbers live in the tables below, which also generate sw_regex_ops.h:

    python -m toolkit.regex           # rewrite wasm_runtime/clib/sw_regex_ops.h
    python -m toolkit.regex --check   # exit 1 if it is out of date
    python -m toolkit.regex --dump PATTERN

Program (int64 words, at most MAX_WORDS in all):

    word 0        HEADER_WORD: MAGIC << 16 | FORMAT_VERSION (the VM accepts only its own)
    word 1        ninstr, the instruction count (>= 1)
    word 2        nclass, the words of the class table (>= 0)
    ninstr words  the instructions, one word each, numbered 0.. (execution starts at 0)
    nclass words  the class table: per class, its range count k, then k range words

An instruction word is ``op | a << 8 | b << 32``: op in bits 0-7, operand a in bits 8-31,
operand b in bits 32-55, bits 56-63 zero. The opcodes (OPCODES):

    MATCH           the whole input was matched, if the input is at its end
    CHAR a          the unit is code point a; go on at the next instruction
    ANY             any unit (the ``.`` of ``(?s)``)
    ANY_NOT_NL      any unit but a newline (``.``)
    CLASS a         the unit is in the class at word a of the class table
    JMP a           go on at instruction a
    SPLIT a, b      go on at both a and b
    ASSERT a        the position satisfies assertion a (ASSERTIONS), consuming nothing

A range word is ``lo | hi << 32`` (lo <= hi, inclusive); a class's ranges are sorted and
disjoint (the VM binary-searches them), so each lo is above the previous hi.

Units: the input's UTF-8 is decoded into code points; a byte that does not start a valid
UTF-8 sequence (a stray continuation byte, a truncated or overlong sequence, an encoded
surrogate, a code point above U+10FFFF) is one unit of its own, INVALID_UNIT (0x110000),
which no literal matches but ``.``, ``(?s).`` and every negated class (``[^a]``, ``\\D``,
``\\PL``) do: negation complements over 0..INVALID_UNIT. It is not a word character for ``\\b``.

Syntax (RE2's, https://github.com/google/re2/wiki/Syntax, parsed here the way RE2 parses it):
literals and escapes (``\\n \\t \\r \\f \\v \\a``, ``\\123`` octal, ``\\x7F``, ``\\x{10FFFF}``, an
escaped ASCII punctuation character, ``\\Q...\\E``); ``.``; classes ``[a-z]``, ``[^...]`` with
``\\d \\s \\w`` (ASCII, as RE2: ``\\s`` is ``[\\t\\n\\f\\r ]``), ``[:alpha:]`` and the other ASCII
classes, ``\\pL``/``\\p{Lu}``/``\\PL``/``\\p{^L}`` (Unicode general categories from Python's
unicodedata, and ``\\p{Any}``); ``^ $ \\A \\z \\b \\B``; groups ``( )``, ``(?: )``, ``(?P<n> )``,
``(?<n> )``; ``|``; ``* + ? {n} {n,} {n,m}`` and their lazy forms (the same for a full
match); flags ``i m s U`` in ``(?flags)`` and ``(?flags:re)``. Case folding (``(?i)``) uses
orbits of code points that str.lower/str.casefold map onto each other as single code points,
which is Unicode's simple case folding (RE2's) to within this Python's Unicode version. A
``{`` that does not start a valid count is a literal (``a{,2}`` is four characters), as RE2.
Refused, with a RegexError naming why: what RE2 lacks (backreferences, lookaround, atomic
groups, possessive quantifiers, ``\\Z``, conditionals, recursion), ``\\C`` (a single byte:
this VM matches code points), Unicode scripts (``\\p{Greek}``: Python has no script data),
and programs over MAX_WORDS words.
"""
from __future__ import annotations

import functools
import re
import sys
import unicodedata
from bisect import bisect_left, bisect_right
from collections import defaultdict
from pathlib import Path
from typing import NamedTuple

MAGIC = 0x5258  # "RX"
FORMAT_VERSION = 1
HEADER_WORD = MAGIC << 16 | FORMAT_VERSION
HEADER_WORDS = 3
MAX_WORDS = 4096  # the whole program; the VM sizes its thread lists by it
MAX_REPEAT = 1000  # RE2's bound on a counted repetition, and on nested counts multiplied
MAX_NESTING = 64  # groups inside groups: the parser recurses per group
MAX_DEPTH = 128  # levels of the parse tree: the compiler recurses per level
MAX_CODE_POINT = 0x10FFFF
INVALID_UNIT = 0x110000
OPERAND_BITS = 24
A_SHIFT, B_SHIFT = 8, 32

# (name, number, meaning): the VM's opcodes
OPCODES = (
    ("MATCH", 1, "accept if the input is at its end"),
    ("CHAR", 2, "the unit is code point a"),
    ("ANY", 3, "any unit"),
    ("ANY_NOT_NL", 4, "any unit but a newline"),
    ("CLASS", 5, "the unit is in the class at word a of the class table"),
    ("JMP", 6, "go on at instruction a"),
    ("SPLIT", 7, "go on at instructions a and b"),
    ("ASSERT", 8, "the position satisfies assertion a; consumes nothing"),
)
# (name, number, meaning): ASSERT's operand
ASSERTIONS = (
    ("BEGIN_TEXT", 1, "at the start of the input (^ without m, \\A)"),
    ("END_TEXT", 2, "at the end of the input ($ without m, \\z)"),
    ("BEGIN_LINE", 3, "at the start of the input or after a newline (^ with m)"),
    ("END_LINE", 4, "at the end of the input or before a newline ($ with m)"),
    ("WORD_BOUNDARY", 5, "an ASCII word character on one side only (\\b)"),
    ("NOT_WORD_BOUNDARY", 6, "not a word boundary (\\B)"),
)
OP = {name: number for name, number, _ in OPCODES}
AT = {name: number for name, number, _ in ASSERTIONS}

HEADER = Path(__file__).resolve().parents[1] / "wasm_runtime" / "clib" / "sw_regex_ops.h"


class RegexError(ValueError):
    """A pattern that is not valid RE2 syntax, or that this compiler does not support."""


# ---- sets of units: sorted, disjoint, non-adjacent inclusive (lo, hi) ranges --------------

Ranges = tuple[tuple[int, int], ...]
ALL: Ranges = ((0, INVALID_UNIT),)
NOT_NL: Ranges = ((0, 9), (11, INVALID_UNIT))


def _normalize(ranges) -> Ranges:
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return tuple((lo, hi) for lo, hi in out)


def _complement(ranges: Ranges) -> Ranges:
    out, next_lo = [], 0
    for lo, hi in ranges:
        if lo > next_lo:
            out.append((next_lo, lo - 1))
        next_lo = hi + 1
    if next_lo <= INVALID_UNIT:
        out.append((next_lo, INVALID_UNIT))
    return tuple(out)


def _chars(text: str) -> Ranges:
    return _normalize((ord(c), ord(c)) for c in text)


@functools.cache
def _fold_orbits() -> tuple[list[int], dict[int, tuple[int, ...]]]:
    """Code points that have other case forms, sorted, and each one's orbit (itself
    included). Every code point with a case mapping is below U+20000."""
    parent: dict[int, int] = {}

    def root(x: int) -> int:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for cp in range(0x20000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        ch = chr(cp)
        for other in (ch.lower(), ch.casefold()):
            if len(other) == 1 and other != ch:
                parent[root(cp)] = root(ord(other))
    groups: dict[int, list[int]] = defaultdict(list)
    for cp in parent:
        groups[root(cp)].append(cp)
    orbit = {cp: tuple(sorted(g)) for g in groups.values() for cp in g}
    return sorted(orbit), orbit


def _fold(ranges: Ranges) -> Ranges:
    keys, orbit = _fold_orbits()
    out = list(ranges)
    for lo, hi in ranges:
        out.extend((o, o) for cp in keys[bisect_left(keys, lo):bisect_right(keys, hi)] for o in orbit[cp])
    return _normalize(out)


@functools.cache
def _general_categories() -> dict[str, Ranges]:
    """RE2's \\p names for Unicode general categories (one- and two-letter; unassigned Cn
    is not one of them), from this Python's unicodedata."""
    runs: dict[str, list[tuple[int, int]]] = defaultdict(list)
    start, prev = 0, unicodedata.category("\0")
    for cp in range(1, MAX_CODE_POINT + 2):
        cat = unicodedata.category(chr(cp)) if cp <= MAX_CODE_POINT else None
        if cat != prev:
            runs[prev].append((start, cp - 1))
            start, prev = cp, cat
    runs.pop("Cn", None)
    groups = {name: _normalize(r) for name, r in runs.items()}
    for major in "CLMNPSZ":
        groups[major] = _normalize(r for name, rs in runs.items() if name[0] == major for r in rs)
    groups["Any"] = ((0, MAX_CODE_POINT),)
    return groups


PERL_CLASSES = {"d": _chars("0123456789"), "s": _chars("\t\n\f\r "),
                "w": _normalize([(48, 57), (65, 90), (97, 122), (95, 95)])}
POSIX_CLASSES = {
    "alnum": ((48, 57), (65, 90), (97, 122)), "alpha": ((65, 90), (97, 122)), "ascii": ((0, 0x7F),),
    "blank": _chars("\t "), "cntrl": ((0, 0x1F), (0x7F, 0x7F)), "digit": ((48, 57),),
    "graph": ((0x21, 0x7E),), "lower": ((97, 122),), "print": ((0x20, 0x7E),),
    "punct": ((0x21, 0x2F), (0x3A, 0x40), (0x5B, 0x60), (0x7B, 0x7E)), "space": ((9, 13), (32, 32)),
    "upper": ((65, 90),), "word": PERL_CLASSES["w"], "xdigit": ((48, 57), (65, 70), (97, 102)),
}
C_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "a": "\a", "f": "\f", "v": "\v"}
NOT_SUPPORTED_ESCAPES = {
    "Z": "'\\Z' is not in RE2's syntax; use '\\z' (or '$') for the end of the text",
    "C": "'\\C' (any single byte) is not supported: matching is on code points",
    "g": "backreferences ('\\g') are not supported (RE2 has none)",
    "k": "named backreferences ('\\k') are not supported (RE2 has none)",
    "G": "'\\G' is not in RE2's syntax", "K": "'\\K' is not in RE2's syntax",
    "b": "'\\b' inside a class (backspace) is not in RE2's syntax; use '\\x08'",
}


# ---- parser: pattern -> tree ------------------------------------------------------------
# Nodes are tuples: ("set", Ranges), ("cat", nodes), ("alt", nodes), ("assert", number) and
# ("rep", node, min, max or None, counted: whether written {n,m}).

FOLD, MULTILINE, DOTALL = 1, 2, 4
FLAG_BITS = {"i": FOLD, "m": MULTILINE, "s": DOTALL, "U": 0}  # U (ungreedy) cannot change a full match


class _Parser:
    def __init__(self, pattern: str):
        self.p = pattern
        self.i = 0
        self.flags = 0
        self.depth = 0

    def fail(self, reason: str):
        raise RegexError(reason)

    def parse(self):
        node, _ = self.alternation()
        if self.i < len(self.p):  # only a ')' stops an alternation early
            self.fail(f"unexpected ')' at offset {self.i}")
        return node

    # Each parse method returns nodes with their depth in the tree, which bounds the
    # compiler's recursion.
    def composite(self, kind: str, items: list, depths: list[int]):
        if len(items) == 1:
            return items[0], depths[0]
        depth = max(depths, default=0) + 1
        if depth > MAX_DEPTH:
            self.fail(f"the pattern nests more than {MAX_DEPTH} levels deep")
        return (kind, tuple(items)), depth

    def alternation(self):
        branches, depths = [], []
        while True:
            node, depth = self.concat()
            branches.append(node)
            depths.append(depth)
            if not self.p.startswith("|", self.i):
                return self.composite("alt", branches, depths)
            self.i += 1

    def concat(self):
        items: list = []
        depths: list[int] = []
        last_repeat = ""  # the repetition operator just read: RE2 refuses another after it
        while self.i < len(self.p) and self.p[self.i] not in "|)":
            repeat = self.repetition()
            if repeat is None:
                for node, depth in self.atoms():
                    items.append(node)
                    depths.append(depth)
                last_repeat = ""
                continue
            lo, hi, text, counted = repeat
            if last_repeat:
                lazy = len(last_repeat) > 1 and last_repeat.endswith("?")
                if text.startswith("+") and not lazy:
                    self.fail(f"possessive quantifier '{last_repeat}+' is not supported (RE2 has none)")
                self.fail(f"bad repetition operator '{last_repeat}{text}': RE2 does not stack repetitions")
            if counted and (lo > MAX_REPEAT or (hi or 0) > MAX_REPEAT):
                self.fail(f"repetition count '{text}' is above RE2's limit of {MAX_REPEAT}")
            if hi is not None and hi < lo:
                self.fail(f"bad repetition count '{text}': the maximum is below the minimum")
            if not items:
                self.fail(f"missing argument to repetition operator '{text}'")
            items[-1] = ("rep", items[-1], lo, hi, counted)
            depths[-1] += 1
            if depths[-1] > MAX_DEPTH:
                self.fail(f"the pattern nests more than {MAX_DEPTH} levels deep")
            if counted and (lo >= 2 or (hi or 0) >= 2) and _copies_left(items[-1], MAX_REPEAT) == 0:
                self.fail(f"nested repetition counts ending in '{text}' multiply to more than "
                          f"{MAX_REPEAT} copies (RE2's limit)")
            last_repeat = text
        return self.composite("cat", items, depths)

    def repetition(self):
        """(min, max or None, its text, counted) if a repetition operator starts here."""
        p, start = self.p, self.i
        c = p[start]
        if c in "*+?":
            lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
            end, counted = start + 1, False
        elif c == "{":
            count = self.count(start + 1)
            if count is None:
                return None  # RE2 reads a '{' that starts no valid count as a literal
            lo, hi, end = count
            counted = True
        else:
            return None
        if p.startswith("?", end):  # lazy: prefer fewer, which cannot change a full match
            end += 1
        self.i = end
        return lo, hi, p[start:end], counted

    def count(self, i: int):
        """{n}, {n,} or {n,m} from i (just after '{'): (n, m or None, end) or None."""
        def integer(i):
            j = i
            while j < len(self.p) and self.p[j] in "0123456789":
                j += 1
            digits = self.p[i:j]
            # RE2 refuses leading zeros and more than nine digits: the '{' is then a literal
            if not digits or (len(digits) > 1 and digits[0] == "0") or len(digits) > 9:
                return None, i
            return int(digits), j

        lo, i = integer(i)
        if lo is None:
            return None
        hi = lo
        if self.p.startswith(",", i):
            hi, i = integer(i + 1)
        return (lo, hi, i + 1) if self.p.startswith("}", i) else None

    def atoms(self) -> list:
        """(node, depth) of the next item; none for a flag group or an empty \\Q\\E."""
        c = self.p[self.i]
        if c == "(":
            return self.group()
        if c == "[":
            return [(("set", self.char_class()), 1)]
        if c == "\\":
            return [(node, 1) for node in self.escape_atoms()]
        self.i += 1
        if c == ".":
            return [(("set", ALL if self.flags & DOTALL else NOT_NL), 1)]
        if c == "^":
            return [(("assert", AT["BEGIN_LINE" if self.flags & MULTILINE else "BEGIN_TEXT"]), 1)]
        if c == "$":
            return [(("assert", AT["END_LINE" if self.flags & MULTILINE else "END_TEXT"]), 1)]
        return [(self.literal(ord(c)), 1)]

    def literal(self, cp: int):
        ranges = ((cp, cp),)
        return ("set", _fold(ranges) if self.flags & FOLD else ranges)

    def group(self) -> list:
        p, start = self.p, self.i
        self.i += 1
        if not p.startswith("?", self.i):
            return [self.group_body(start)]
        rest = p[self.i + 1:]
        for prefix, what in (("=", "lookahead assertions"), ("!", "negative lookahead assertions"),
                             ("<=", "lookbehind assertions"), ("<!", "negative lookbehind assertions"),
                             (">", "atomic groups"), ("#", "comments"), ("(", "conditionals"),
                             ("|", "branch reset groups"), ("'", "named groups written (?'name')"),
                             ("P=", "named backreferences"), ("P>", "recursive calls"), ("&", "recursive calls"),
                             ("R)", "recursive calls")):
            if rest.startswith(prefix):
                self.fail(f"{what} ('(?{prefix}') are not supported (RE2 has none)")
        call = re.match(r"[+-]?[0-9]+", rest)
        if call:
            self.fail(f"recursive calls ('(?{call[0]})') are not supported (RE2 has none)")
        if rest.startswith(("P<", "<")):
            open_ = self.i + (3 if rest[0] == "P" else 2)
            close = p.find(">", open_)
            if close < 0:
                self.fail(f"missing '>' after the group name in '{p[start:open_ + 20]}'")
            name = p[open_:close]
            if not name or not all(unicodedata.category(ch) in ("Lu", "Ll", "Lt", "Lm", "Lo", "Nl", "Mn", "Mc",
                                                                "Nd", "Pc") for ch in name):
                self.fail(f"invalid group name '{name}': it must be word characters (letters, digits, '_')")
            self.i = close + 1
            return [self.group_body(start)]
        return self.flag_group(start)

    def flag_group(self, start: int) -> list:
        """(?flags) sets flags to the end of the enclosing group; (?flags:re) only in re."""
        p = self.p
        i, flags, negated, saw = self.i + 1, self.flags, False, False
        while True:
            if i >= len(p):
                self.fail(f"missing ')' in flag group '{p[start:]}'")
            c = p[i]
            i += 1
            if c in FLAG_BITS:
                flags = flags & ~FLAG_BITS[c] if negated else flags | FLAG_BITS[c]
                saw = True
            elif c == "-" and not negated:
                negated, saw = True, False
            elif c in ":)":
                break
            else:
                self.fail(f"unsupported flag '{c}' in '{p[start:i]}': RE2 has i, m, s and U")
        if negated and not saw:
            self.fail(f"a '-' with no flag after it in '{p[start:i]}'")
        self.i = i
        if c == ")":
            self.flags = flags
            return []
        outer, self.flags = self.flags, flags
        return [self.group_body(start, restore=outer)]

    def group_body(self, start: int, restore: int | None = None):
        """The alternation up to the ')' that closes the group opened at ``start``; flags set
        inside end with it."""
        saved = self.flags if restore is None else restore
        self.depth += 1
        if self.depth > MAX_NESTING:
            self.fail(f"groups nested deeper than {MAX_NESTING}")
        node_depth = self.alternation()
        if not self.p.startswith(")", self.i):
            self.fail(f"missing ')' for the group opened at offset {start}")
        self.i += 1
        self.depth -= 1
        self.flags = saved
        return node_depth

    def escape_atoms(self) -> list:
        p, i = self.p, self.i
        if i + 1 >= len(p):
            self.fail("trailing backslash at the end of the pattern")
        c = p[i + 1]
        if c in "bBAz":
            self.i += 2
            return [("assert", AT[{"b": "WORD_BOUNDARY", "B": "NOT_WORD_BOUNDARY", "A": "BEGIN_TEXT",
                                   "z": "END_TEXT"}[c]])]
        if c == "Q":  # literal text up to \E or the end
            end = p.find("\\E", i + 2)
            end = len(p) if end < 0 else end
            self.i = min(end + 2, len(p))
            return [self.literal(ord(ch)) for ch in p[i + 2:end]]
        group = self.named_class()
        if group is not None:
            return [("set", group)]
        return [self.literal(self.escape())]

    def named_class(self) -> Ranges | None:
        """\\d \\s \\w (and negations) or \\p{..}/\\P{..} at self.i, folded if (?i)."""
        p, i = self.p, self.i
        c = p[i + 1] if i + 1 < len(p) else ""
        if c.lower() in PERL_CLASSES:
            self.i += 2
            return self.group_ranges(PERL_CLASSES[c.lower()], c.isupper())
        if c not in ("p", "P"):
            return None
        if i + 2 >= len(p):
            self.fail(f"'\\{c}' needs a Unicode class name")
        if p[i + 2] == "{":
            close = p.find("}", i + 3)
            if close < 0:
                self.fail(f"missing '}}' in '{p[i:]}'")
            name, self.i = p[i + 3:close], close + 1
        else:
            name, self.i = p[i + 2], i + 3
        text = p[i:self.i]
        negated = c == "P"
        if name.startswith("^"):
            negated, name = not negated, name[1:]
        groups = _general_categories()
        if name not in groups:
            self.fail(f"unsupported Unicode class '{text}': general categories (\\pL, \\p{{Lu}}, ...) and "
                      f"\\p{{Any}} are supported, scripts such as \\p{{Greek}} are not")
        return self.group_ranges(groups[name], negated)

    def group_ranges(self, ranges: Ranges, negated: bool) -> Ranges:
        """A named class, as RE2 adds one: folded first under (?i), then negated."""
        if self.flags & FOLD:
            ranges = _fold(ranges)
        return _complement(ranges) if negated else ranges

    def escape(self) -> int:
        """The code point of the escape at self.i (a backslash), as RE2's ParseEscape."""
        p, i = self.p, self.i
        if i + 1 >= len(p):
            self.fail("trailing backslash at the end of the pattern")
        c = p[i + 1]
        self.i = i + 2
        if c < "\x80" and not c.isalnum():
            return ord(c)
        if c in C_ESCAPES:
            return ord(C_ESCAPES[c])
        octal = "01234567"
        if c in octal and (c == "0" or p[i + 2:i + 3] in tuple(octal)):
            j = i + 2
            while j < min(i + 4, len(p)) and p[j] in octal:
                j += 1
            self.i = j
            return int(p[i + 1:j], 8)
        if c in "0123456789":
            self.fail(f"backreference '\\{c}' is not supported (RE2 has none)")
        if c == "x":
            if p.startswith("{", i + 2):
                close = p.find("}", i + 3)
                digits = p[i + 3:close] if close >= 0 else ""
                if close < 0 or not digits or not all(d in "0123456789abcdefABCDEF" for d in digits) \
                        or int(digits, 16) > MAX_CODE_POINT:
                    self.fail(f"invalid escape '{p[i:i + 12]}': '\\x{{...}}' takes hex digits up to 10FFFF")
                self.i = close + 1
                return int(digits, 16)
            digits = p[i + 2:i + 4]
            if len(digits) < 2 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                self.fail(f"invalid escape '{p[i:i + 4]}': '\\x' takes two hex digits or '{{...}}'")
            self.i = i + 4
            return int(digits, 16)
        if c in NOT_SUPPORTED_ESCAPES:
            self.fail(NOT_SUPPORTED_ESCAPES[c])
        self.fail(f"invalid escape sequence '\\{c}'")

    def char_class(self) -> Ranges:
        """[...] at self.i, as RE2's ParseCharClass."""
        p, start = self.p, self.i
        self.i += 1
        negated = p.startswith("^", self.i)
        if negated:
            self.i += 1
        ranges: list[tuple[int, int]] = []
        first = True  # a ']' right after '[' or '[^' is a literal
        while self.i < len(p) and (p[self.i] != "]" or first):
            first = False
            i = self.i
            if p.startswith("[:", i) and i + 2 < len(p):
                close = p.find(":]", i + 2)
                if close >= 0:
                    name = p[i + 2:close]
                    posix_negated = name.startswith("^")
                    if posix_negated:
                        name = name[1:]
                    if name not in POSIX_CLASSES:
                        self.fail(f"unknown class '{p[i:close + 2]}'")
                    self.i = close + 2
                    ranges.extend(self.group_ranges(POSIX_CLASSES[name], posix_negated))
                    continue
            if p[i] == "\\":
                group = self.named_class()
                if group is not None:
                    ranges.extend(group)
                    continue
            lo = self.class_char(start)
            hi = lo
            if self.i + 1 < len(p) and p[self.i] == "-" and p[self.i + 1] != "]":
                self.i += 1
                hi = self.class_char(start)
                if hi < lo:
                    self.fail(f"invalid class range '{p[i:self.i]}'")
            ranges.extend(_fold(((lo, hi),)) if self.flags & FOLD else ((lo, hi),))
        if self.i >= len(p):
            self.fail(f"missing ']' for the class opened at offset {start}")
        self.i += 1
        ranges = _normalize(ranges)
        return _complement(ranges) if negated else ranges

    def class_char(self, start: int) -> int:
        if self.i >= len(self.p):
            self.fail(f"missing ']' for the class opened at offset {start}")
        if self.p[self.i] == "\\":
            return self.escape()
        self.i += 1
        return ord(self.p[self.i - 1])


def _copies_left(node, budget: int) -> int:
    """RE2's check on nested counted repetitions: what is left of ``budget`` copies after
    dividing by each count on the deepest path ({n,m} counts m, {n,} counts n)."""
    if node[0] == "rep":
        _, sub, lo, hi, counted = node
        if counted and (hi if hi is not None else lo) > 0:
            budget //= hi if hi is not None else lo
        return min(budget, _copies_left(sub, budget))
    if node[0] in ("cat", "alt"):
        return min([budget] + [_copies_left(n, budget) for n in node[1]])
    return budget


# ---- compiler: tree -> program ------------------------------------------------------------

class _Emitter:
    def __init__(self):
        self.code: list[list[int]] = []  # [op, a, b] while targets are patched
        self.classes: list[int] = []
        self.class_at: dict[Ranges, int] = {}

    def check_size(self) -> None:
        if HEADER_WORDS + len(self.code) + len(self.classes) > MAX_WORDS:
            raise RegexError(f"the pattern compiles to more than the {MAX_WORDS} program words a RegexFullMatch "
                             f"may have (a large class or count repeated; RE2 would accept it)")

    def emit(self, op: str, a: int = 0, b: int = 0) -> int:
        self.code.append([OP[op], a, b])
        self.check_size()
        return len(self.code) - 1

    def here(self) -> int:
        return len(self.code)

    def unit_set(self, ranges: Ranges) -> None:
        if ranges == ALL:
            self.emit("ANY")
        elif ranges == NOT_NL:
            self.emit("ANY_NOT_NL")
        elif len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
            self.emit("CHAR", ranges[0][0])
        else:
            if ranges not in self.class_at:
                self.class_at[ranges] = len(self.classes)
                self.classes += [len(ranges)] + [lo | hi << 32 for lo, hi in ranges]
            self.emit("CLASS", self.class_at[ranges])

    def node(self, node) -> None:
        kind = node[0]
        if kind == "set":
            self.unit_set(node[1])
        elif kind == "assert":
            self.emit("ASSERT", node[1])
        elif kind == "cat":
            for sub in node[1]:
                self.node(sub)
        elif kind == "alt":
            ends = []
            for sub in node[1][:-1]:
                split = self.emit("SPLIT", self.here() + 1)
                self.node(sub)
                ends.append(self.emit("JMP"))
                self.code[split][2] = self.here()
            self.node(node[1][-1])
            for j in ends:
                self.code[j][1] = self.here()
        else:
            self.repeat(*node[1:4])

    def repeat(self, sub, lo: int, hi: int | None) -> None:
        if hi is None and lo == 0:  # L: SPLIT L+1, end; sub; JMP L; end:
            split = self.emit("SPLIT", self.here() + 1)
            self.node(sub)
            self.emit("JMP", split)
            self.code[split][2] = self.here()
            return
        for _ in range(lo - 1 if hi is None else lo):
            self.node(sub)
        if hi is None:  # the last required copy loops: L: sub; SPLIT L, next
            loop = self.here()
            self.node(sub)
            self.emit("SPLIT", loop, self.here() + 1)
            return
        skips = []  # each optional copy may be skipped to the end: x{1,3} is x(x(x)?)?
        for _ in range(hi - lo):
            skips.append(self.emit("SPLIT", self.here() + 1))
            self.node(sub)
        for s in skips:
            self.code[s][2] = self.here()

    def program(self) -> tuple[int, ...]:
        words = [op | a << A_SHIFT | b << B_SHIFT for op, a, b in self.code]
        return (HEADER_WORD, len(words), len(self.classes), *words, *self.classes)


def compile_pattern(pattern: str) -> tuple[int, ...]:
    """The program (module docstring) that full-matches ``pattern``, RE2 syntax; RegexError
    with the reason when the pattern is invalid or not supported."""
    if any(0xD800 <= ord(c) <= 0xDFFF for c in pattern):
        raise RegexError("the pattern holds a lone surrogate, so it is not valid UTF-8")
    tree = _Parser(pattern).parse()
    e = _Emitter()
    e.node(tree)
    e.emit("MATCH")
    return e.program()


class Instruction(NamedTuple):
    pc: int
    op: str
    a: int
    b: int
    ranges: Ranges  # CLASS: the class's ranges


def decode(program: tuple[int, ...]) -> list[Instruction]:
    """A well-formed program's instructions (for tests and --dump)."""
    names = {number: name for name, number, _ in OPCODES}
    ninstr = program[1]
    table = program[HEADER_WORDS + ninstr:]
    mask = (1 << OPERAND_BITS) - 1
    out = []
    for pc, w in enumerate(program[HEADER_WORDS:HEADER_WORDS + ninstr]):
        op, a, b = names[w & 0xFF], w >> A_SHIFT & mask, w >> B_SHIFT & mask
        ranges = tuple((r & 0xFFFFFFFF, r >> 32) for r in table[a + 1:a + 1 + table[a]]) if op == "CLASS" else ()
        out.append(Instruction(pc, op, a, b, ranges))
    return out


def c_header() -> str:
    lines = [
        "/* generated by toolkit/regex.py (python -m toolkit.regex), do not edit */",
        "/* The RegexFullMatch program format is described in toolkit/regex.py. */",
        "#ifndef SW_REGEX_OPS_H", "#define SW_REGEX_OPS_H", "",
        f"#define SW_RX_HEADER_WORD {HEADER_WORD:#x} /* magic {MAGIC:#x} << 16 | format version {FORMAT_VERSION} */",
        f"#define SW_RX_HEADER_WORDS {HEADER_WORDS} /* header word, instruction count, class table words */",
        f"#define SW_RX_MAX_WORDS {MAX_WORDS} /* the whole program */",
        f"#define SW_RX_MAX_CODE_POINT {MAX_CODE_POINT:#x}",
        f"#define SW_RX_INVALID_UNIT {INVALID_UNIT:#x} /* a byte that starts no valid UTF-8 sequence */",
        f"#define SW_RX_A_SHIFT {A_SHIFT}", f"#define SW_RX_B_SHIFT {B_SHIFT}",
        f"#define SW_RX_OPERAND_MASK {(1 << OPERAND_BITS) - 1:#x}",
        f"#define SW_RX_RESERVED_SHIFT {B_SHIFT + OPERAND_BITS} /* bits from here up are zero */", "",
        "/* opcodes: bits 0-7 of an instruction word */",
        *(f"#define SW_RX_OP_{name} {number} /* {doc} */" for name, number, doc in OPCODES), "",
        "/* ASSERT's operand */",
        *(f"#define SW_RX_AT_{name} {number} /* {doc} */" for name, number, doc in ASSERTIONS), "",
        "#endif", "",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--dump"] and len(argv) == 2:
        program = compile_pattern(argv[1])
        print(f"{len(program)} words")
        for ins in decode(program):
            print(f"{ins.pc:5d}  {ins.op:<10} {ins.a:7d} {ins.b:7d}  {ins.ranges or ''}")
        return 0
    text = c_header()
    if argv == ["--check"]:
        if not HEADER.exists() or HEADER.read_text() != text:
            print(f"{HEADER} is out of date: run python -m toolkit.regex", file=sys.stderr)
            return 1
        return 0
    if argv:
        print("usage: python -m toolkit.regex [--check | --dump PATTERN]", file=sys.stderr)
        return 2
    HEADER.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
