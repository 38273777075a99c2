"""A small kernel language: IR values with Python operators, for kernels that read as the
math they compute (the long tail: RoiAlign, NMS, TfIdf, Unique, Det).

:class:`Ex` wraps one scalar llvmlite value of an integer (i1, i8 ... i64) or float (f32,
f64) type together with the builder that emits its operations. Tensors index with it
(``x[n, c, h, w]``, ``out[r, c] = v``: :class:`toolkit.codegen.kernel.Tensor`) and
``kb.range(n)`` / ``kb.iterate(...)`` count with it, so a kernel reads::

    with kb.range(rois.dim(0), "roi") as r:
        x0, y0 = (rois[r, c].to(F64) * scale - offset for c in range(2))
        out[r, c, ph, pw] = where(first, v, maximum(out[r, c, ph, pw], v))

The rules:

- Operands have one type. A Python ``int`` becomes a constant of the other operand's type
  (integer or float), a Python ``float`` a constant of a float operand's type (with an
  integer operand it is a TypeError: convert explicitly). Two values of different types are
  a TypeError too: ``.to(t)`` converts.
- ``+ - *`` and unary ``-``: integers wrap (two's complement), floats are IEEE operations
  without fast-math flags, emitted in the order written (so results are bit-for-bit those of
  the same expression in raw builder calls).
- ``/`` divides floats only. ``//`` and ``%`` are integers only and have Python's floor
  semantics for every sign: ``-7 // 2 == -4``, ``-7 % 2 == 1``, ``7 % -2 == -1``. The divisor
  must not be 0, nor -1 with the dividend the type's minimum (both trap on wasm32, as the raw
  ``sdiv`` does): guard them. For the non-negative operands of index math the results are
  those of ``udiv``/``urem``.
- ``< <= > >= == !=`` give i1 values: signed for integers; for floats ordered (false when
  either is NaN) except ``!=``, which is true when either is NaN (as in Python and numpy).
  ``& | ^ ~`` are bitwise (on i1: and, or, xor, not); ``<< >>`` shift, ``>>`` arithmetic
  (Python's). An Ex has no truth value: ``if x < y`` and ``a < b < c`` raise TypeError.
- Integer constants fold: ``x + 0``, ``x * 1``, ``x * 0``, ``x // 1`` and any operation or
  comparison of two constants give constants, so indexing by static dims and constant
  indices emits no arithmetic. Float operations never fold.
- :func:`where` (``select``), :func:`maximum` / :func:`minimum` (signed for integers;
  ``llvm.maximum``/``llvm.minimum`` for floats: NaN wins, -0.0 < 0.0), :func:`clamp`,
  :func:`below` (``0 <= i < n`` as one unsigned compare).
- ``x.to(t)``: integer to integer sign-extends or truncates (i1 zero-extends: a bool is 0 or
  1); integer to float is signed; float to float extends or rounds; float to integer
  truncates toward zero and saturates (NaN gives 0: ``llvm.fptosi.sat``, never a trap).
  ``x.index()`` is ``x.to(i64)``. ``x.floor()``, ``x.ceil()``, ``x.trunc()`` round floats.

Values are scalars (no vectors). ``.v`` is the llvmlite value, for the builder's own calls.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, Union

from llvmlite import ir

Number = Union[int, float]
I1 = ir.IntType(1)
I64 = ir.IntType(64)
F64 = ir.DoubleType()

_ICMP = {"<": "<", "<=": "<=", ">": ">", ">=": ">=", "==": "==", "!=": "!="}
_PY_CMP = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
           ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}


def _is_float(t: ir.Type) -> bool:
    return isinstance(t, (ir.FloatType, ir.DoubleType))


def _wrap_int(v: int, width: int) -> int:
    """``v`` as a signed ``width``-bit integer (i1: 0 or -1, as icmp_signed reads it)."""
    v &= (1 << width) - 1
    return v - (1 << width) if v >> (width - 1) else v


def const(b: ir.IRBuilder, t: ir.Type, value: Number) -> "Ex":
    """The constant ``value`` of type ``t`` (an integer wraps to its width)."""
    if _is_float(t):
        return Ex(b, ir.Constant(t, float(value)))
    if isinstance(value, float):
        raise TypeError(f"the float {value} as {t}: convert explicitly")
    v = _wrap_int(int(value), t.width)
    return Ex(b, ir.Constant(t, v & 1 if t.width == 1 else v))


def ex(b: ir.IRBuilder, value: "Ex | ir.Value") -> "Ex":
    """``value`` (an llvmlite value, or an Ex) as an Ex emitting through ``b``."""
    return value if isinstance(value, Ex) else Ex(b, value)


def raw(value: "Ex | ir.Value") -> ir.Value:
    """The llvmlite value of ``value`` (itself when it is one already)."""
    return value.v if isinstance(value, Ex) else value


def _intrinsic(b: ir.IRBuilder, name: str, *args: ir.Value) -> ir.Value:
    t = args[0].type
    fnty = ir.FunctionType(t, [a.type for a in args])
    return b.call(b.module.declare_intrinsic(name, [t], fnty), list(args))


def _operator(apply: Callable[["Ex", "Ex"], Any]):
    """An arithmetic operator's forward and reflected methods: ``apply(left, right)`` once
    the other operand is an Ex (a Python number promoted by ``_other``), else NotImplemented."""
    def forward(self, other):
        o = self._other(other)
        return o if o is NotImplemented else apply(self, o)

    def reflected(self, other):
        o = self._other(other)
        return o if o is NotImplemented else apply(o, self)
    return forward, reflected


class Ex:
    """A scalar IR value with Python operators (see the module's rules)."""

    __slots__ = ("b", "v")
    __hash__ = None  # == builds IR

    def __init__(self, b: ir.IRBuilder, v: ir.Value):
        if isinstance(v, Ex):
            v = v.v
        if not (isinstance(v.type, ir.IntType) or _is_float(v.type)):
            raise TypeError(f"Ex holds integers and floats, not {v.type}")
        self.b, self.v = b, v

    # ------------------------------------------------------------------ basics
    @property
    def type(self) -> ir.Type:
        return self.v.type

    @property
    def is_float(self) -> bool:
        return _is_float(self.v.type)

    @property
    def constant(self) -> Number | None:
        """The Python value of a constant (None otherwise)."""
        return self.v.constant if isinstance(self.v, ir.Constant) else None

    def __bool__(self):
        raise TypeError("an IR value has no truth value at compile time: use where() or the builder's branches")

    def __repr__(self) -> str:
        return f"Ex({self.v.type} {self.v.get_reference()})"

    def _other(self, other: "Ex | ir.Value | Number") -> "Ex":
        if isinstance(other, Ex):
            o = other
        elif isinstance(other, ir.Value):
            o = Ex(self.b, other)
        elif isinstance(other, (int, float)):
            return const(self.b, self.type, other)
        else:
            return NotImplemented
        if o.type != self.type:
            raise TypeError(f"operands of types {self.type} and {o.type}: convert one with .to()")
        return o

    def _ints(self, op: str) -> None:
        if self.is_float:
            raise TypeError(f"{op} takes integers, not {self.type}")

    def _fold(self, o: "Ex", fn) -> "Ex | None":
        """``fn`` of two integer constants, as a constant of this type."""
        a, c = self.constant, o.constant
        if a is None or c is None or self.is_float:
            return None
        return const(self.b, self.type, fn(_wrap_int(int(a), self.type.width), _wrap_int(int(c), self.type.width)))

    def _new(self, v: ir.Value) -> "Ex":
        return Ex(self.b, v)

    def _int_op(self, o: "Ex", fold, emit) -> "Ex":
        """``fold`` of two constants, else the instruction ``emit`` makes."""
        folded = self._fold(o, fold)
        return folded if folded is not None else self._new(emit(self.v, o.v))

    # ------------------------------------------------------------------ arithmetic
    def _add(self, o: "Ex") -> "Ex":
        if self.is_float:
            return self._new(self.b.fadd(self.v, o.v))
        if self.constant == 0:
            return o
        if o.constant == 0:
            return self
        return self._int_op(o, lambda a, c: a + c, self.b.add)

    def _sub(self, o: "Ex") -> "Ex":
        if self.is_float:
            return self._new(self.b.fsub(self.v, o.v))
        if o.constant == 0:
            return self
        return self._int_op(o, lambda a, c: a - c, self.b.sub)

    def _mul(self, o: "Ex") -> "Ex":
        if self.is_float:
            return self._new(self.b.fmul(self.v, o.v))
        for p, q in ((self, o), (o, self)):
            if p.constant == 1:
                return q
            if p.constant == 0:
                return p
        return self._int_op(o, lambda a, c: a * c, self.b.mul)

    def _truediv(self, o: "Ex") -> "Ex":
        if not self.is_float:
            raise TypeError("/ divides floats: use // for integers")
        return self._new(self.b.fdiv(self.v, o.v))

    def _divmod(self, o: "Ex") -> tuple["Ex", "Ex"]:
        """Python's floor quotient and remainder (the remainder takes the divisor's sign)."""
        self._ints("// and %")
        if o.constant == 1:
            return self, const(self.b, self.type, 0)
        if self.constant is not None and o.constant is not None and _wrap_int(int(o.constant), self.type.width):
            a = _wrap_int(int(self.constant), self.type.width)
            c = _wrap_int(int(o.constant), self.type.width)
            return const(self.b, self.type, a // c), const(self.b, self.type, a % c)
        b = self.b
        q, r = b.sdiv(self.v, o.v), b.srem(self.v, o.v)
        zero = ir.Constant(self.type, 0)
        # truncation rounded toward zero: one step down when the remainder is not 0 and its
        # sign differs from the divisor's
        fix = b.and_(b.icmp_signed("!=", r, zero), b.icmp_signed("<", b.xor(r, o.v), zero))
        return (self._new(b.sub(q, b.zext(fix, self.type))),
                self._new(b.add(r, b.select(fix, o.v, zero))))

    __add__, __radd__ = _operator(lambda a, c: a._add(c))
    __sub__, __rsub__ = _operator(lambda a, c: a._sub(c))
    __mul__, __rmul__ = _operator(lambda a, c: a._mul(c))
    __truediv__, __rtruediv__ = _operator(lambda a, c: a._truediv(c))
    __floordiv__, __rfloordiv__ = _operator(lambda a, c: a._divmod(c)[0])
    __mod__, __rmod__ = _operator(lambda a, c: a._divmod(c)[1])
    __divmod__ = _operator(lambda a, c: a._divmod(c))[0]

    def __neg__(self):
        if self.is_float:
            return self._new(self.b.fneg(self.v))
        return const(self.b, self.type, 0)._sub(self)

    def __abs__(self):
        if self.is_float:
            return self._new(_intrinsic(self.b, "llvm.fabs", self.v))
        return where(self < 0, -self, self)

    # ------------------------------------------------------------------ bits
    def _bits(self, other, name: str, fold, reverse: bool = False):
        o = self._other(other)
        if o is NotImplemented:
            return o
        p, q = (o, self) if reverse else (self, o)
        p._ints(name)
        return p._int_op(q, fold, getattr(p.b, name))

    def __and__(self, other):
        return self._bits(other, "and_", lambda a, c: a & c)

    def __rand__(self, other):
        return self._bits(other, "and_", lambda a, c: a & c, True)

    def __or__(self, other):
        return self._bits(other, "or_", lambda a, c: a | c)

    def __ror__(self, other):
        return self._bits(other, "or_", lambda a, c: a | c, True)

    def __xor__(self, other):
        return self._bits(other, "xor", lambda a, c: a ^ c)

    def __rxor__(self, other):
        return self._bits(other, "xor", lambda a, c: a ^ c, True)

    def __lshift__(self, other):
        return self._bits(other, "shl", lambda a, c: a << c)

    def __rshift__(self, other):
        return self._bits(other, "ashr", lambda a, c: a >> c)

    def __invert__(self):
        self._ints("~")
        if self.constant is not None:
            return const(self.b, self.type, ~_wrap_int(int(self.constant), self.type.width))
        return self._new(self.b.not_(self.v))

    # ------------------------------------------------------------------ comparisons
    def _cmp(self, op: str, other) -> "Ex":
        o = self._other(other)
        if o is NotImplemented:
            return o
        if self.is_float:
            if op == "!=":
                return self._new(self.b.fcmp_unordered("!=", self.v, o.v))
            return self._new(self.b.fcmp_ordered(op, self.v, o.v))
        folded = self._fold(o, _PY_CMP[op])
        if folded is not None:
            return const(self.b, I1, int(folded.constant != 0))
        return self._new(self.b.icmp_signed(_ICMP[op], self.v, o.v))

    def __lt__(self, other):
        return self._cmp("<", other)

    def __le__(self, other):
        return self._cmp("<=", other)

    def __gt__(self, other):
        return self._cmp(">", other)

    def __ge__(self, other):
        return self._cmp(">=", other)

    def __eq__(self, other):  # type: ignore[override]
        return self._cmp("==", other)

    def __ne__(self, other):  # type: ignore[override]
        return self._cmp("!=", other)

    # ------------------------------------------------------------------ conversions
    def to(self, t: ir.Type) -> "Ex":
        """This value as type ``t`` (see the module's rules)."""
        b, src = self.b, self.type
        if t == src:
            return self
        if _is_float(t):
            if not self.is_float:
                if self.constant is not None:
                    return const(b, t, float(self._as_int()))
                return self._new(b.uitofp(self.v, t) if src.width == 1 else b.sitofp(self.v, t))
            wider = isinstance(t, ir.DoubleType)
            return self._new(b.fpext(self.v, t) if wider else b.fptrunc(self.v, t))
        if self.is_float:
            name = f"llvm.fptosi.sat.i{t.width}.{'f64' if isinstance(src, ir.DoubleType) else 'f32'}"
            fn = b.module.declare_intrinsic(name, (), ir.FunctionType(t, [src]))
            return self._new(b.call(fn, [self.v]))
        if self.constant is not None:
            return const(b, t, self._as_int())
        if t.width > src.width:
            return self._new(b.zext(self.v, t) if src.width == 1 else b.sext(self.v, t))
        return self._new(b.trunc(self.v, t))

    def _as_int(self) -> int:
        """A constant integer's value as :meth:`to` converts it: signed, a bool 0 or 1."""
        c = int(self.constant)
        return c & 1 if self.type.width == 1 else _wrap_int(c, self.type.width)

    def index(self) -> "Ex":
        """As i64 (see :meth:`to`)."""
        return self.to(I64)

    def _round(self, name: str) -> "Ex":
        if not self.is_float:
            raise TypeError(f"{name} rounds floats, not {self.type}")
        return self._new(_intrinsic(self.b, f"llvm.{name}", self.v))

    def floor(self) -> "Ex":
        return self._round("floor")

    def ceil(self) -> "Ex":
        return self._round("ceil")

    def trunc(self) -> "Ex":
        return self._round("trunc")


# ---------------------------------------------------------------------- helpers


def _pair(a, c) -> tuple[Ex, Ex]:
    """Two operands of one type (a Python number takes the Ex's)."""
    if isinstance(a, Ex):
        pair = a, a._other(c)
    elif isinstance(c, Ex):
        pair = c._other(a), c
    else:
        raise TypeError("one operand must be an Ex: make a constant with const(b, type, value)")
    if any(p is NotImplemented for p in pair):
        raise TypeError(f"operands {a!r} and {c!r}")
    return pair


def where(cond: Ex, a, c) -> Ex:
    """``a`` where ``cond`` (an i1) holds, else ``c`` (``select``); Python numbers take the
    other value's type. A constant condition picks at compile time."""
    if not isinstance(cond, Ex) or cond.type != I1:
        raise TypeError("where's condition is an i1 Ex (a comparison)")
    a, c = _pair(a, c)
    if cond.constant is not None:
        return a if cond.constant else c
    return Ex(cond.b, cond.b.select(cond.v, a.v, c.v))


select = where


def maximum(a, c) -> Ex:
    """The larger: signed for integers (folded for constants), ``llvm.maximum`` for floats
    (NaN if either is NaN; 0.0 above -0.0)."""
    a, c = _pair(a, c)
    if a.is_float:
        return a._new(_intrinsic(a.b, "llvm.maximum", a.v, c.v))
    return a._int_op(c, max, lambda x, y: _intrinsic(a.b, "llvm.smax", x, y))


def minimum(a, c) -> Ex:
    """The smaller, as :func:`maximum`."""
    a, c = _pair(a, c)
    if a.is_float:
        return a._new(_intrinsic(a.b, "llvm.minimum", a.v, c.v))
    return a._int_op(c, min, lambda x, y: _intrinsic(a.b, "llvm.smin", x, y))


def clamp(x: Ex, lo, hi) -> Ex:
    """``minimum(maximum(x, lo), hi)``."""
    return minimum(maximum(x, lo), hi)


def below(i, n) -> Ex:
    """``0 <= i < n`` for integers and ``n >= 0`` (a bounds check), as one unsigned compare:
    a negative ``i`` reads as a huge one."""
    i, n = _pair(i, n)
    if i.is_float:
        raise TypeError("below compares integers")
    return Ex(i.b, i.b.icmp_unsigned("<", i.v, n.v))


__all__ = ["Ex", "ex", "raw", "const", "where", "select", "maximum", "minimum", "clamp", "below"]
