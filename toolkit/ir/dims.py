"""The dim algebra: integers and symbolic expressions over named symbols.

A dim is either a Python ``int`` or an :class:`Expr`. Expressions are kept in one
canonical form, a polynomial with integer coefficients over *atoms* (symbols and the
non-polynomial nodes ``floordiv``, ``mod``, ``min``, ``max``, ``bcast`` and ``div``).
Every expression and atom is interned, so two equal expressions are the same object:
``n * 10 is 10 * n``. An expression that simplifies to a constant is returned as an
``int``, never as an ``Expr``.

Symbols carry a closed range (``lo``, ``hi``; ``hi`` None for unbounded) used to simplify
``min``/``max`` and to emit run-time checks. Dims are never negative, so symbols default
to ``lo=0``.
"""
from __future__ import annotations

import itertools
import weakref
from typing import Callable, Iterable, Mapping, Union

Dim = Union[int, "Expr"]

# weak: an expression no longer referenced anywhere leaves the table, so compiling many
# models in one process does not accumulate every expression ever built
_INTERN: "weakref.WeakValueDictionary[tuple, Node]" = weakref.WeakValueDictionary()


class Node:
    """Base of interned atoms and polynomials. Compare with ``is``; equal means same."""

    # the text and hash are computed once: nodes are immutable, and a nested expression's
    # text is its sort key, asked for at every arithmetic step
    __slots__ = ("key", "_hash", "_text", "__weakref__")
    key: tuple

    def __new__(cls, key: tuple):
        obj = _INTERN.get(key)
        if obj is None:
            obj = object.__new__(cls)
            obj.key = key
            obj._hash = hash(key)
            obj._text = None
            _INTERN[key] = obj
        return obj

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        text = self._text
        if text is None:
            text = self._text = self._render()
        return text

    def _render(self) -> str:
        raise NotImplementedError

    def __eq__(self, other) -> bool:
        return self is other

    def __repr__(self) -> str:
        return str(self)


# ----------------------------------------------------------------------------- atoms


class Atom(Node):
    """A term that the polynomial form cannot take apart."""

    __slots__ = ()

    @property
    def sort_key(self) -> str:
        return str(self)


class Sym(Atom):
    """A named symbol. ``kind`` is ``input`` (from an input's dims), ``data`` (computed from
    tensor values at run time: NonZero counts, runtime reshape targets)."""

    __slots__ = ()

    def __new__(cls, name: str, kind: str = "input", lo: int = 0, hi: int | None = None):
        return super().__new__(cls, ("sym", name, kind, lo, hi))

    name = property(lambda self: self.key[1])
    kind = property(lambda self: self.key[2])
    lo = property(lambda self: self.key[3])
    hi = property(lambda self: self.key[4])

    def _render(self) -> str:
        return self.name


class _Op(Atom):
    """An atom applying ``op`` to argument dims."""

    __slots__ = ()

    def __new__(cls, op: str, args: tuple):
        return super().__new__(cls, (op, args))

    op = property(lambda self: self.key[0])
    args = property(lambda self: self.key[1])

    def _render(self) -> str:
        a = self.args
        if self.op == "floordiv":
            return f"({a[0]} // {a[1]})"
        if self.op == "mod":
            return f"({a[0]} % {a[1]})"
        if self.op == "div":
            return f"({a[0]} / {a[1]})"
        if self.op == "ifzero":
            return f"({a[0]} or {a[1]})"
        return f"{self.op}({', '.join(str(x) for x in a)})"


# ----------------------------------------------------------------------------- polynomials

Monomial = tuple  # sorted tuple of atoms, repeats for powers; () is the constant term


class Expr(Node):
    """A polynomial ``sum(coef * prod(atoms))`` that is not a constant."""

    __slots__ = ()

    @property
    def terms(self) -> tuple[tuple[Monomial, int], ...]:
        return self.key[1]

    # arithmetic, with ints on either side
    def __add__(self, o: Dim) -> Dim:
        return add(self, o)

    __radd__ = __add__

    def __sub__(self, o: Dim) -> Dim:
        return add(self, mul(o, -1))

    def __rsub__(self, o: Dim) -> Dim:
        return add(o, mul(self, -1))

    def __mul__(self, o: Dim) -> Dim:
        return mul(self, o)

    __rmul__ = __mul__

    def __neg__(self) -> Dim:
        return mul(self, -1)

    def __floordiv__(self, o: int) -> Dim:
        return floordiv(self, o)

    def __mod__(self, o: int) -> Dim:
        return mod(self, o)

    def _render(self) -> str:
        parts = []
        for mono, coef in self.terms:
            body = "*".join(_atom_str(a) for a in mono)
            if not mono:
                parts.append(str(coef))
            elif coef == 1:
                parts.append(body)
            elif coef == -1:
                parts.append("-" + body)
            else:
                parts.append(f"{coef}*{body}")
        s = " + ".join(parts)
        return s.replace("+ -", "- ")

    def atom(self) -> Atom | None:
        """The single atom this expression is, if it is exactly one atom."""
        t = self.terms
        if len(t) == 1 and t[0][1] == 1 and len(t[0][0]) == 1:
            return t[0][0][0]
        return None


def _atom_str(a: Atom) -> str:
    return str(a)


def _mono_key(m: Monomial) -> tuple:
    return (len(m), tuple(a.sort_key for a in m))


def _from_terms(terms: dict[Monomial, int]) -> Dim:
    items = sorted(((m, c) for m, c in terms.items() if c != 0), key=lambda mc: _mono_key(mc[0]))
    if not items:
        return 0
    if len(items) == 1 and items[0][0] == ():
        return items[0][1]
    return Expr(("poly", tuple(items)))


def _terms(d: Dim) -> dict[Monomial, int]:
    if isinstance(d, int):
        return {(): d} if d else {}
    if isinstance(d, Atom):
        return {(d,): 1}
    if isinstance(d, Expr):
        return dict(d.terms)
    raise TypeError(f"not a dim: {d!r}")


def atom_op(d: Dim) -> tuple[str, tuple] | None:
    """``(op, args)`` when ``d`` is exactly one operation atom (``floordiv``, ``mod``,
    ``min``, ``max``, ``bcast`` or ``div``), else None."""
    a = d.atom() if isinstance(d, Expr) else None
    return (a.op, a.args) if isinstance(a, _Op) else None


def atom_expr(a: Atom) -> Expr:
    """The expression consisting of the single atom ``a``."""
    return Expr(("poly", (((a,), 1),)))


def sym(name: str, kind: str = "input", lo: int = 0, hi: int | None = None) -> Expr:
    """A symbol as an expression (what shapes hold)."""
    return atom_expr(Sym(name, kind, lo, hi))


def as_dim(d) -> Dim:
    if isinstance(d, Atom):
        return atom_expr(d)
    if isinstance(d, (int, Expr)):
        return int(d) if isinstance(d, int) else d
    if hasattr(d, "__index__"):
        return int(d)
    raise TypeError(f"not a dim: {d!r}")


def add(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    t = _terms(as_dim(a))
    for m, c in _terms(as_dim(b)).items():
        t[m] = t.get(m, 0) + c
    return _from_terms(t)


def mul(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    out: dict[Monomial, int] = {}
    for ma, ca in _terms(as_dim(a)).items():
        for mb, cb in _terms(as_dim(b)).items():
            m = tuple(sorted(ma + mb, key=lambda x: x.sort_key))
            out[m] = out.get(m, 0) + ca * cb
    return _from_terms(out)


def product(ds: Iterable[Dim]) -> Dim:
    r: Dim = 1
    for d in ds:
        r = mul(r, d)
    return r


def _op(op: str, *args: Dim) -> Expr:
    return atom_expr(_Op(op, tuple(as_dim(a) for a in args)))


def floordiv(a: Dim, c: int) -> Dim:
    """``a // c`` for a positive constant ``c``."""
    if not isinstance(c, int) or c <= 0:
        raise ValueError(f"floordiv by {c!r}: only positive constants")
    if isinstance(a, int):
        return a // c
    if c == 1:
        return a
    t = _terms(a)
    rest = t.pop((), 0)
    if all(v % c == 0 for v in t.values()):
        return add(_from_terms({m: v // c for m, v in t.items()}), rest // c)
    lo, hi = bounds(a)
    if hi is not None and lo // c == hi // c:
        return lo // c
    return _op("floordiv", a, c)


def ceildiv(a: Dim, c: int) -> Dim:
    return floordiv(add(a, c - 1), c)


def mod(a: Dim, c: int) -> Dim:
    """``a % c`` for a positive constant ``c`` (non-negative result)."""
    if not isinstance(c, int) or c <= 0:
        raise ValueError(f"mod by {c!r}: only positive constants")
    if isinstance(a, int):
        return a % c
    t = _terms(a)
    rest = t.pop((), 0)
    if all(v % c == 0 for v in t.values()):
        return rest % c
    lo, hi = bounds(a)
    if lo >= 0 and hi is not None and hi < c:
        return a
    return _op("mod", a, c)


def div_exact(a: Dim, b: Dim) -> Dim:
    """``a / b`` where the caller knows (or checks at run time) that ``b`` divides ``a``."""
    if isinstance(b, int):
        if b == 0:
            raise ZeroDivisionError("division of a dim by 0")
        if isinstance(a, int):
            return a // b
        t = _terms(a)
        if all(v % b == 0 for v in t.values()):
            return _from_terms({m: v // b for m, v in t.items()})
        return _op("div", a, b)
    tb = _terms(b)
    if len(tb) == 1:
        (mb, cb), = tb.items()
        out = {}
        for m, v in _terms(as_dim(a)).items():
            rest = list(m)
            try:
                for x in mb:
                    rest.remove(x)
            except ValueError:
                break
            if v % cb:
                break
            out[tuple(rest)] = v // cb
        else:
            return _from_terms(out)
    if a is b:
        return 1
    return _op("div", a, b)


def _flatten(op: str, args: Iterable[Dim]) -> list[Dim]:
    out: list[Dim] = []
    for a in args:
        a = as_dim(a)
        at = a.atom() if isinstance(a, Expr) else None
        if isinstance(at, _Op) and at.op == op:
            out.extend(at.args)
        else:
            out.append(a)
    return out


def _minmax(op: str, args: Iterable[Dim]) -> Dim:
    pick = min if op == "min" else max
    items = _flatten(op, args)
    consts = [a for a in items if isinstance(a, int)]
    syms: list[Dim] = []
    for a in items:
        if not isinstance(a, int) and a not in syms:
            syms.append(a)
    if consts:
        syms.append(pick(consts))
    # drop an argument that another provably dominates
    keep: list[Dim] = []
    for i, a in enumerate(syms):
        dominated = False
        for j, b in enumerate(syms):
            if i == j:
                continue
            if op == "min" and provably_le(b, a) and (not provably_le(a, b) or j < i):
                dominated = True
            if op == "max" and provably_le(a, b) and (not provably_le(b, a) or j < i):
                dominated = True
            if dominated:
                break
        if not dominated:
            keep.append(a)
    if len(keep) == 1:
        return keep[0]
    keep.sort(key=lambda d: (isinstance(d, int), str(d)))
    return _op(op, *keep)


def minimum(*args: Dim) -> Dim:
    return _minmax("min", args)


def maximum(*args: Dim) -> Dim:
    return _minmax("max", args)


def ifzero(v: Dim, d: Dim) -> Dim:
    """``v``, or ``d`` where ``v`` is 0: ONNX Reshape's rule for a 0 in the target shape
    (it copies the input's dim). Printed ``(v or d)``."""
    v, d = as_dim(v), as_dim(d)
    if isinstance(v, int):
        return v if v != 0 else d
    if v is d or d == 0 or bounds(v)[0] >= 1 or _vanishes_with(d, v):
        return v
    return _op("ifzero", v, d)


def _vanishes_with(d: Dim, v: Dim) -> bool:
    """True when ``v`` is one monomial and every term of ``d`` has it as a factor, so that
    ``v == 0`` forces ``d == 0`` (``ifzero(batch, batch*seq)`` is ``batch``)."""
    tv = _terms(as_dim(v))
    if len(tv) != 1:
        return False
    (mv, _), = tv.items()
    if not mv:
        return False
    for m in _terms(as_dim(d)):
        rest = list(m)
        for a in mv:
            if a not in rest:
                return False
            rest.remove(a)
    return True


class BroadcastError(ValueError):
    """Two dims that can never broadcast together."""


def bcast(a: Dim, b: Dim) -> Dim:
    """The numpy broadcast of two dims. When it cannot be decided at compile time the
    result is a ``bcast`` atom whose run-time value the VM computes (and checks)."""
    a, b = as_dim(a), as_dim(b)
    if a is b or a == b:
        return a
    if a == 1:
        return b
    if b == 1:
        return a
    if isinstance(a, int) and isinstance(b, int):
        raise BroadcastError(f"dims {a} and {b} do not broadcast")
    # a constant other than 1 wins: the other side must be 1 or equal (checked at run time)
    if isinstance(a, int):
        return a
    if isinstance(b, int):
        return b
    # bcast is associative and idempotent: bcast(a, bcast(a, e)) is bcast(a, e), with the
    # same run-time failures, so nested broadcasts of the same dims do not grow
    args: list[Dim] = []
    for x in _flatten("bcast", (a, b)):
        if x not in args:
            args.append(x)
    if len(args) == 1:
        return args[0]
    for x in args:
        if bounds(x)[0] >= 2:
            return x
    return _op("bcast", *sorted(args, key=str))


# ----------------------------------------------------------------------------- analysis


# a lower bound below any value a dim expression takes in practice: "unbounded"
UNBOUNDED_BELOW = -(2 ** 62)


def bounds(d: Dim) -> tuple[int, int | None]:
    """A conservative closed interval ``[lo, hi]`` (``hi`` None for unbounded)."""
    if isinstance(d, int):
        return d, d
    got = _BOUNDS.get(d)
    if got is None:
        got = _BOUNDS[d] = _bounds(d)
    return got


# node -> bounds; weak, like the intern table (a node's bounds never change)
_BOUNDS: "weakref.WeakKeyDictionary[Node, tuple[int, int | None]]" = weakref.WeakKeyDictionary()


def _bounds(d: Node) -> tuple[int, int | None]:
    if isinstance(d, Sym):
        return d.lo, d.hi
    if isinstance(d, _Op):
        a = d.args
        if d.op == "floordiv":
            lo, hi = bounds(a[0])
            return lo // a[1], None if hi is None else hi // a[1]
        if d.op == "mod":
            return 0, a[1] - 1
        if d.op in ("min", "max", "bcast"):
            bs = [bounds(x) for x in a]
            los = [b[0] for b in bs]
            his = [b[1] for b in bs]
            if d.op == "min":
                finite = [h for h in his if h is not None]
                return min(los), (min(finite) if finite else None)
            hi = None if any(h is None for h in his) else max(his)
            return max(los) if d.op == "max" else min(los), hi
        if d.op == "div":
            lo, hi = bounds(a[0])
            return min(lo, 0), hi
        if d.op == "ifzero":
            (lo_v, hi_v), (lo_d, hi_d) = bounds(a[0]), bounds(a[1])
            # v where it is not 0 (so at least 1 if it is never negative), else d
            return min(lo_v if lo_v != 0 else 1, lo_d), (None if hi_v is None or hi_d is None else max(hi_v, hi_d))
    lo_t, hi_t = 0, 0
    lo_known = hi_known = True
    for mono, coef in d.terms:
        lo_m, hi_m = 1, 1
        m_hi_known = True
        for atom in mono:
            alo, ahi = bounds(atom)
            if alo < 0:
                return UNBOUNDED_BELOW, None
            lo_m *= alo
            if ahi is None:
                m_hi_known = False
            else:
                hi_m *= ahi
        if coef >= 0:
            lo_t += coef * lo_m
            if m_hi_known:
                hi_t += coef * hi_m
            else:
                hi_known = False
        else:
            hi_t += coef * lo_m
            if m_hi_known:
                lo_t += coef * hi_m
            else:
                lo_known = False
    return (lo_t if lo_known else UNBOUNDED_BELOW), (hi_t if hi_known else None)


def provably_le(a: Dim, b: Dim) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a <= b
    lo, _ = bounds(add(b, mul(a, -1)))
    return lo >= 0


def atoms(d: Dim) -> set[Atom]:
    """Every atom of ``d``: its symbols and its op atoms (``bcast(a, b)``), nested ones too."""
    out: set[Atom] = set()
    seen: set[int] = set()  # expressions share subexpressions: visit each node once

    def walk(x):
        if isinstance(x, int) or id(x) in seen:
            return
        seen.add(id(x))
        if isinstance(x, Atom):
            out.add(x)
        if isinstance(x, _Op):
            for c in x.args:
                walk(c)
        elif isinstance(x, Expr):
            for mono, _ in x.terms:
                for a in mono:
                    walk(a)

    walk(d)
    return out


def free_symbols(d: Dim) -> set[Sym]:
    return {a for a in atoms(d) if isinstance(a, Sym)}


def substitute(d: Dim, fn: Callable[[Sym], Dim | None], memo: dict | None = None) -> Dim:
    """Rebuild ``d`` with each symbol ``s`` replaced by ``fn(s)`` (kept when None). ``memo``
    (node -> result) shares the work between calls with the same ``fn``; a subexpression
    that occurs many times is rebuilt once."""
    if isinstance(d, int):
        return d
    if memo is None:
        memo = {}
    done = memo.get(d)
    if done is not None:
        return done
    if isinstance(d, Sym):
        r = fn(d)
        out = atom_expr(d) if r is None else as_dim(r)
    elif isinstance(d, _Op):
        out = _rebuild(d.op, [substitute(a, fn, memo) for a in d.args])
    else:
        total: Dim = 0
        for mono, coef in d.terms:
            term: Dim = coef
            for a in mono:
                term = mul(term, substitute(a, fn, memo))
            total = add(total, term)
        out = total
    memo[d] = out
    return out


def _rebuild(op: str, args: list[Dim]) -> Dim:
    if op == "floordiv":
        return floordiv(args[0], args[1])
    if op == "mod":
        return mod(args[0], args[1])
    if op == "div":
        return div_exact(args[0], args[1])
    if op == "min":
        return minimum(*args)
    if op == "max":
        return maximum(*args)
    if op == "bcast":
        r = args[0]
        for x in args[1:]:
            r = bcast(r, x)
        return r
    if op == "ifzero":
        return ifzero(args[0], args[1])
    raise ValueError(op)


def evaluate(d: Dim, env: Mapping[Sym, int]) -> int:
    """The value of ``d`` with every symbol given in ``env``."""
    def f(s: Sym) -> int:
        if s not in env:
            raise KeyError(f"symbol {s} has no value")
        return env[s]

    r = substitute(d, f)
    assert isinstance(r, int), r
    return r


def fmt_shape(shape: Iterable[Dim]) -> str:
    items = [str(d) for d in shape]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


class SymbolScope:
    """The symbols of one model: input symbols by name and fresh named symbols."""

    def __init__(self) -> None:
        self.symbols: dict[str, Sym] = {}
        self._counters: dict[str, itertools.count] = {}

    def get(self, name: str, kind: str = "input", lo: int = 0, hi: int | None = None) -> Expr:
        s = self.symbols.get(name)
        if s is None:
            s = Sym(name, kind, lo, hi)
            self.symbols[name] = s
        return atom_expr(s)

    def fresh(self, prefix: str, kind: str = "data", lo: int = 0, hi: int | None = None) -> Expr:
        """A new symbol named ``prefix_<k>`` never used before in this scope."""
        counter = self._counters.setdefault(prefix, itertools.count())
        while True:
            name = f"{prefix}_{next(counter)}"
            if name not in self.symbols:
                return self.get(name, kind, lo, hi)
