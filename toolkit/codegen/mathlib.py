"""Branch-free float32 math functions emitted as LLVM IR.

Kernels run on wasm32 (no libm, no imports) and native targets, so these never call
libm or the ``llvm.exp``/``llvm.log``/... intrinsics, which would lower to libcalls.
Everything is straight-line IR (``select`` instead of branches) built from IEEE basic
operations, bitcasts and integer ops, so LLVM's loop vectorizer can widen it and every
target computes bit-identical results (no fma contraction is ever requested).

Do not put fast-math flags on these instructions: the rounding tricks and the NaN/inf
handling rely on strict IEEE semantics.

Each function accepts a ``float`` value or a ``<N x float>`` value and returns the same
type. Polynomial coefficients are near-minimax fits (Lawson's reweighted least squares
against float64 references, rounded to float32) unless stated otherwise.
"""

from __future__ import annotations

import math

from llvmlite import ir

__all__ = ["exp", "log", "tanh", "sigmoid", "erf", "pow"]

_F64 = ir.DoubleType()

_INF = math.inf
_NAN = math.nan
_LOG2E = 1.0 / math.log(2.0)
# ln 2 split so that n * _LN2_HI is exact for the |n| <= 150 seen here (9-bit mantissa).
_LN2_HI = 0.693359375
_LN2_LO = math.log(2.0) - _LN2_HI
# Adding 1.5 * 2**23 rounds any |v| < 2**22 to an integer (the ulp there is 1), and the
# integer then sits in the low mantissa bits, readable by integer subtraction.
_ROUND_F32 = 12582912.0
_ROUND_F32_BITS = 0x4B400000
_ROUND_F64 = 6755399441055744.0  # 1.5 * 2**52, the same trick in double precision
_ROUND_F64_BITS = 0x4338000000000000
_SQRT_HALF_BITS = 0x3F3504F3  # float32 bits of sqrt(1/2)
_MIN_NORMAL = 2.0**-126

# exp(r) = 1 + r + r^2 * P(r) for |r| <= ln(2)/2.
_EXP_P = (0.49999994, 0.16666521, 0.04166839, 0.008368717, 0.0013814599)
# log(1 + f) = f - f^2/2 + f^3 * P(f) for 1 + f in [sqrt(1/2), sqrt(2)).
_LOG_P = (0.3333333, -0.25000823, 0.20001228, -0.16623336, 0.1420172, -0.13160366,
          0.12761961, -0.07634482)
# tanh(x) = x + x^3 * P(x^2) for |x| < _TANH_SMALL.
_TANH_SMALL = 0.75
_TANH_P = (-0.33333316, 0.13332693, -0.0538927, 0.021451933, -0.0076570767, 0.0017368187)
# erf(x) = x + x * P(x^2) for |x| < _ERF_SMALL ...
_ERF_SMALL = 0.6
_ERF_P = (0.12837912, -0.37612373, 0.1127961, -0.026596155, 0.004449911)
# ... and erf(x) = 1 - exp(-Q(x)) with Q(x) ~ -log(erfc(x)) on [_ERF_SMALL, 4];
# erfc(4) < 2**-25, so erf saturates to 1.0f beyond 4.
_ERF_Q = (-2.6332482e-05, 1.1286641, 0.63539255, 0.10561568, -0.02309445, 0.0032749434,
          -2.2099384e-04)
_ERF_CLAMP = 4.0
# log(1 + f) = 2 * atanh(s) = 2s * sum(s^2k / (2k + 1)), s = f / (2 + f), |s| <= 0.172:
# eight terms leave a truncation error below 1e-15, far below float32 resolution.
_ATANH_SERIES = tuple(1.0 / (2 * k + 1) for k in range(8))
# 2^r = sum((r ln2)^k / k!) for |r| <= 1/2: eleven terms leave an error below 1e-13.
_EXP2_SERIES = tuple(math.log(2.0) ** k / math.factorial(k) for k in range(11))
# Beyond |y * log2|x|| = 256 the float32 result of pow is already 0 or inf; clamping
# keeps 2^n a normal double.
_POW_LOG2_CLAMP = 256.0


def _check_f32(x: ir.Value) -> None:
    elem = x.type.element if isinstance(x.type, ir.VectorType) else x.type
    if not isinstance(elem, ir.FloatType):
        raise TypeError(f"expected float or <N x float>, got {x.type}")


def _shaped(like: ir.Type, elem: ir.Type) -> ir.Type:
    """``elem``, or a vector of ``elem`` with as many lanes as ``like``."""
    return ir.VectorType(elem, like.count) if isinstance(like, ir.VectorType) else elem


def _int_type(ty: ir.Type) -> ir.Type:
    """The same-width integer type (lane-wise) of a float or double type."""
    elem = ty.element if isinstance(ty, ir.VectorType) else ty
    return _shaped(ty, ir.IntType(64 if isinstance(elem, ir.DoubleType) else 32))


def _c(ty: ir.Type, value: float | int) -> ir.Constant:
    """A constant of ``ty``, splatted across lanes for vector types."""
    return ir.Constant(ty, value)


def _bits(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return b.bitcast(x, _int_type(x.type))


def _intrinsic(b: ir.IRBuilder, name: str, *args: ir.Value) -> ir.Value:
    ty = args[0].type
    if isinstance(ty, ir.VectorType):
        suffix = f"v{ty.count}{ty.element.intrinsic_name}"
    else:
        suffix = ty.intrinsic_name
    full = f"{name}.{suffix}"
    fn = b.module.globals.get(full)
    if fn is None:
        fn = ir.Function(b.module, ir.FunctionType(ty, [ty] * len(args)), full)
    return b.call(fn, args)


def _fabs(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return _intrinsic(b, "llvm.fabs", x)


def _copysign(b: ir.IRBuilder, mag: ir.Value, sign: ir.Value) -> ir.Value:
    return _intrinsic(b, "llvm.copysign", mag, sign)


def _clamp(b: ir.IRBuilder, x: ir.Value, lo: float, hi: float) -> ir.Value:
    """Clamp to [lo, hi] with ordered compares, so NaN passes through unchanged."""
    x = b.select(b.fcmp_ordered("<", x, _c(x.type, lo)), _c(x.type, lo), x)
    return b.select(b.fcmp_ordered(">", x, _c(x.type, hi)), _c(x.type, hi), x)


def _horner(b: ir.IRBuilder, x: ir.Value, coeffs: tuple[float, ...]) -> ir.Value:
    """sum(coeffs[k] * x**k), lowest degree first."""
    acc = _c(x.type, coeffs[-1])
    for c in reversed(coeffs[:-1]):
        acc = b.fadd(b.fmul(acc, x), _c(x.type, c))
    return acc


def _split_log(b: ir.IRBuilder, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(f, e) with x = 2**e * (1 + f), 1 + f in [sqrt(1/2), sqrt(2)), for finite x > 0.

    ``f`` is exact (float32); ``e`` is an i32 value. Centering the mantissa on 1
    keeps |f| <= 0.42 and makes log(x) ~ f accurate in relative terms near x = 1.
    """
    ity = _int_type(x.type)
    # Subnormals have no implicit leading bit: scale them into the normal range first.
    tiny = b.fcmp_ordered("<", x, _c(x.type, _MIN_NORMAL))
    x = b.select(tiny, b.fmul(x, _c(x.type, 2.0**23)), x)
    # Offsetting by sqrt(1/2) makes the exponent field step at sqrt(1/2) instead of 1.
    ix = b.sub(_bits(b, x), _c(ity, _SQRT_HALF_BITS))
    e = b.sub(b.ashr(ix, _c(ity, 23)), b.select(tiny, _c(ity, 23), _c(ity, 0)))
    m = b.add(b.and_(ix, _c(ity, 0x007FFFFF)), _c(ity, _SQRT_HALF_BITS))
    f = b.fsub(b.bitcast(m, x.type), _c(x.type, 1.0))
    return f, e


def _integer_parity(b: ir.IRBuilder, y: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(is_integer, is_odd_integer) masks for float32 y; +-inf count as even integers."""
    ty = y.type
    ity = _int_type(ty)
    ay = _fabs(b, y)
    small = b.fcmp_ordered("<", ay, _c(ty, 2.0**23))
    # Below 2**23, adding 2**23 rounds to an integer whose parity is the lowest mantissa
    # bit; from 2**23 on every float is an integer and in [2**23, 2**24) its own lowest
    # mantissa bit is the parity; from 2**24 on every float is even.
    rounded = b.fadd(ay, _c(ty, 2.0**23))
    is_int = b.select(
        small,
        b.fcmp_ordered("==", b.fsub(rounded, _c(ty, 2.0**23)), ay),
        b.fcmp_ordered("==", ay, ay),  # false only for NaN
    )
    low_bit = b.and_(_bits(b, b.select(small, rounded, ay)), _c(ity, 1))
    is_odd = b.and_(
        b.and_(is_int, b.icmp_unsigned("!=", low_bit, _c(ity, 0))),
        b.fcmp_ordered("<", ay, _c(ty, 2.0**24)),
    )
    return is_int, is_odd


def exp(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """e**x; overflows to inf above ~88.72, reaches 0 below ~-103.97 (subnormals kept)."""
    _check_f32(x)
    ty = x.type
    ity = _int_type(ty)
    # Past these bounds the result is already inf / 0; clamping keeps n within int range.
    x = _clamp(b, x, -104.0, 89.0)
    biased = b.fadd(b.fmul(x, _c(ty, _LOG2E)), _c(ty, _ROUND_F32))
    n = b.fsub(biased, _c(ty, _ROUND_F32))
    ni = b.sub(_bits(b, biased), _c(ity, _ROUND_F32_BITS))
    # Cody-Waite reduction: r = x - n ln2 in two steps keeps r accurate to ~1 ulp.
    r = b.fsub(x, b.fmul(n, _c(ty, _LN2_HI)))
    r = b.fsub(r, b.fmul(n, _c(ty, _LN2_LO)))
    p = _horner(b, r, _EXP_P)
    y = b.fadd(b.fadd(b.fmul(b.fmul(r, r), p), r), _c(ty, 1.0))
    # 2**n for n in [-150, 128] is not one normal float: scale by two halves instead, so
    # overflow and gradual underflow happen in a single final rounding.
    n1 = b.ashr(ni, _c(ity, 1))
    n2 = b.sub(ni, n1)
    s1 = b.bitcast(b.shl(b.add(n1, _c(ity, 127)), _c(ity, 23)), ty)
    s2 = b.bitcast(b.shl(b.add(n2, _c(ity, 127)), _c(ity, 23)), ty)
    return b.fmul(b.fmul(y, s1), s2)


def log(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Natural log; log(+-0) = -inf, log(x < 0) = nan, log(inf) = inf, log(nan) = nan."""
    _check_f32(x)
    ty = x.type
    f, e = _split_log(b, x)
    ef = b.sitofp(e, ty)
    z = b.fmul(f, f)
    # Summed smallest terms first; e*ln2 is added in two parts for the same reason as exp.
    y = b.fmul(b.fmul(z, f), _horner(b, f, _LOG_P))
    y = b.fadd(y, b.fmul(ef, _c(ty, _LN2_LO)))
    y = b.fsub(y, b.fmul(z, _c(ty, 0.5)))
    res = b.fadd(b.fadd(f, y), b.fmul(ef, _c(ty, _LN2_HI)))
    res = b.select(b.fcmp_ordered("==", x, _c(ty, _INF)), _c(ty, _INF), res)
    res = b.select(b.fcmp_ordered("==", x, _c(ty, 0.0)), _c(ty, -_INF), res)
    return b.select(b.fcmp_unordered("<", x, _c(ty, 0.0)), _c(ty, _NAN), res)


def tanh(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Hyperbolic tangent, relative-accurate near 0, saturating to +-1."""
    _check_f32(x)
    ty = x.type
    ax = _fabs(b, x)
    z = b.fmul(ax, ax)
    small = b.fadd(b.fmul(b.fmul(z, ax), _horner(b, z, _TANH_P)), ax)
    # 1 - 2/(e^2x + 1) cancels badly near 0, hence the polynomial there; e^2x = inf
    # for large x gives exactly 1.
    e2x = exp(b, b.fadd(ax, ax))
    one = _c(ty, 1.0)
    big = b.fsub(one, b.fdiv(_c(ty, 2.0), b.fadd(e2x, one)))
    res = b.select(b.fcmp_ordered("<", ax, _c(ty, _TANH_SMALL)), small, big)
    return _copysign(b, res, x)


def sigmoid(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """1 / (1 + e**-x), without overflow for large |x|."""
    _check_f32(x)
    ty = x.type
    one = _c(ty, 1.0)
    # e = e^-|x| never overflows; sigmoid(x) = 1/(1+e) for x > 0 and e/(1+e) otherwise,
    # which keeps relative accuracy in the exponentially small tail.
    e = exp(b, b.fneg(_fabs(b, x)))
    num = b.select(b.fcmp_ordered(">", x, _c(ty, 0.0)), one, e)
    return b.fdiv(num, b.fadd(one, e))


def erf(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Error function, absolute error ~1e-7, erf(+-inf) = +-1."""
    _check_f32(x)
    ty = x.type
    ax = _fabs(b, x)
    ax = b.select(b.fcmp_ordered(">", ax, _c(ty, _ERF_CLAMP)), _c(ty, _ERF_CLAMP), ax)
    z = b.fmul(ax, ax)
    # x + x*P rather than x*(1 + P): the leading 2/sqrt(pi) would cost an extra rounding.
    small = b.fadd(ax, b.fmul(ax, _horner(b, z, _ERF_P)))
    big = b.fsub(_c(ty, 1.0), exp(b, b.fneg(_horner(b, ax, _ERF_Q))))
    res = b.select(b.fcmp_ordered("<", ax, _c(ty, _ERF_SMALL)), small, big)
    return _copysign(b, res, x)


def _log2_f64(b: ir.IRBuilder, ax: ir.Value) -> ir.Value:
    """log2(ax) as double(s) for float32 ax >= 0, accurate to ~1e-15 relative."""
    dty = _shaped(ax.type, _F64)
    f, e = _split_log(b, ax)
    fd = b.fpext(f, dty)
    s = b.fdiv(fd, b.fadd(fd, _c(dty, 2.0)))
    series = _horner(b, b.fmul(s, s), _ATANH_SERIES)
    ln = b.fmul(b.fadd(s, s), series)
    res = b.fadd(b.sitofp(e, dty), b.fmul(ln, _c(dty, _LOG2E)))
    # 0 -> -inf; inf and nan are their own log2.
    special = b.fpext(b.select(b.fcmp_ordered("==", ax, _c(ax.type, 0.0)),
                               _c(ax.type, -_INF), ax), dty)
    regular = b.and_(b.fcmp_ordered(">", ax, _c(ax.type, 0.0)),
                     b.fcmp_ordered("<", ax, _c(ax.type, _INF)))
    return b.select(regular, res, special)


def _exp2_f64_to_f32(b: ir.IRBuilder, t: ir.Value, ty: ir.Type) -> ir.Value:
    """2**t for double(s) t, rounded once to float32 (so overflow/underflow are exact)."""
    dty = t.type
    ity = _int_type(dty)
    t = _clamp(b, t, -_POW_LOG2_CLAMP, _POW_LOG2_CLAMP)
    biased = b.fadd(t, _c(dty, _ROUND_F64))
    n = b.fsub(biased, _c(dty, _ROUND_F64))
    r = b.fsub(t, n)  # exact
    p = _horner(b, r, _EXP2_SERIES)
    ni = b.sub(_bits(b, biased), _c(ity, _ROUND_F64_BITS))
    scale = b.bitcast(b.shl(b.add(ni, _c(ity, 1023)), _c(ity, 52)), dty)
    return b.fptrunc(b.fmul(p, scale), ty)


def pow(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """ONNX Pow for float32, following C ``powf`` special cases.

    Negative x needs integral y (the sign follows its parity), else nan; 0**0 = 1,
    0**negative = inf, pow(1, y) = pow(x, 0) = 1 even for nan. The product y*log2|x|
    is formed in double precision, so the result is nearly correctly rounded even
    when |y*log(x)| is large.
    """
    _check_f32(x)
    _check_f32(y)
    if x.type != y.type:
        raise TypeError(f"pow operands differ: {x.type} vs {y.type}")
    ty = x.type
    ax = _fabs(b, x)
    t = b.fmul(b.fpext(y, _shaped(ty, _F64)), _log2_f64(b, ax))
    mag = _exp2_f64_to_f32(b, t, ty)

    is_int, is_odd = _integer_parity(b, y)
    x_negative = b.icmp_signed("<", _bits(b, x), _c(_int_type(ty), 0))  # incl. -0
    res = b.select(b.and_(x_negative, is_odd), b.fneg(mag), mag)
    # Finite negative x with a non-integral y; (-inf)**y is fine and already handled.
    neg_finite = b.and_(b.fcmp_ordered("<", x, _c(ty, 0.0)),
                        b.fcmp_ordered(">", x, _c(ty, -_INF)))
    res = b.select(b.and_(neg_finite, b.not_(is_int)), _c(ty, _NAN), res)
    # The remaining exact-1 cases: y*log2|x| would be 0*inf or nan there.
    one = b.or_(
        b.fcmp_ordered("==", y, _c(ty, 0.0)),
        b.or_(
            b.fcmp_ordered("==", x, _c(ty, 1.0)),
            b.and_(b.fcmp_ordered("==", x, _c(ty, -1.0)),
                   b.fcmp_ordered("==", _fabs(b, y), _c(ty, _INF))),
        ),
    )
    return b.select(one, _c(ty, 1.0), res)
