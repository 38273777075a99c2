"""Branch-free math functions emitted as LLVM IR, for float32 and float64.

Kernels run on wasm32 (no libm, no imports) and native targets, so these never call
libm or the ``llvm.exp``/``llvm.log``/``llvm.sin``/... intrinsics, which would lower to
libcalls. Everything is straight-line IR (``select`` instead of branches) built from IEEE
basic operations, bitcasts and integer ops, so LLVM's loop vectorizer can widen it and
every target computes bit-identical results (no fma contraction is ever requested).

Do not put fast-math flags on these instructions: the rounding tricks and the NaN/inf
handling rely on strict IEEE semantics.

Each public function accepts a ``float``/``double`` value or a vector of them and
returns the same type. exp, expm1, log, tanh, sigmoid, erf and pow have float32 versions tuned
for speed (near-minimax polynomials: Lawson's reweighted least squares against float64
references, rounded to float32); their float64 versions, and every other function, are
written once in double precision (Taylor series on reduced ranges, with enough terms that
truncation is below 2**-56) and a float32 argument is computed in double and rounded
once, which makes those float32 results nearly correctly rounded.
"""

from __future__ import annotations

import math
import struct
from decimal import Context, Decimal, localcontext

from llvmlite import ir

from .kernel import intrinsic

__all__ = ["exp", "log", "tanh", "sigmoid", "erf", "pow", "expm1", "log1p", "softplus", "sin", "cos", "tan",
           "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "fmod"]

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


def _is_f64(ty: ir.Type) -> bool:
    return isinstance(ty.element if isinstance(ty, ir.VectorType) else ty, ir.DoubleType)


def _mantissa_bits(ty: ir.Type) -> int:
    return 52 if _is_f64(ty) else 23


def _int_type(ty: ir.Type) -> ir.Type:
    """The same-width integer type (lane-wise) of a float or double type."""
    elem = ty.element if isinstance(ty, ir.VectorType) else ty
    return _shaped(ty, ir.IntType(64 if isinstance(elem, ir.DoubleType) else 32))


def _c(ty: ir.Type, value: float | int) -> ir.Constant:
    """A constant of ``ty``, splatted across lanes for vector types."""
    return ir.Constant(ty, value)


def _bits(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return b.bitcast(x, _int_type(x.type))


_intrinsic = intrinsic  # overloaded on scalars and vectors (kernel.intrinsic)


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
    """(is_integer, is_odd_integer) masks for float y; +-inf count as even integers."""
    ty = y.type
    ity = _int_type(ty)
    m = _mantissa_bits(ty)
    ay = _fabs(b, y)
    small = b.fcmp_ordered("<", ay, _c(ty, 2.0**m))
    # Below 2**m (m mantissa bits), adding 2**m rounds to an integer whose parity is the
    # lowest mantissa bit; from 2**m on every float is an integer and in [2**m, 2**(m+1))
    # its own lowest mantissa bit is the parity; from 2**(m+1) on every float is even.
    rounded = b.fadd(ay, _c(ty, 2.0**m))
    is_int = b.select(
        small,
        b.fcmp_ordered("==", b.fsub(rounded, _c(ty, 2.0**m)), ay),
        b.fcmp_ordered("==", ay, ay),  # false only for NaN
    )
    low_bit = b.and_(_bits(b, b.select(small, rounded, ay)), _c(ity, 1))
    is_odd = b.and_(
        b.and_(is_int, b.icmp_unsigned("!=", low_bit, _c(ity, 0))),
        b.fcmp_ordered("<", ay, _c(ty, 2.0**(m + 1))),
    )
    return is_int, is_odd


def _exp_reduce_f32(b: ir.IRBuilder, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(r, n) with x = n ln2 + r, |r| <= ln2/2, n an int32 (x clamped by the caller)."""
    ty = x.type
    ity = _int_type(ty)
    biased = b.fadd(b.fmul(x, _c(ty, _LOG2E)), _c(ty, _ROUND_F32))
    n = b.fsub(biased, _c(ty, _ROUND_F32))
    ni = b.sub(_bits(b, biased), _c(ity, _ROUND_F32_BITS))
    # Cody-Waite reduction: r = x - n ln2 in two steps keeps r accurate to ~1 ulp.
    r = b.fsub(x, b.fmul(n, _c(ty, _LN2_HI)))
    r = b.fsub(r, b.fmul(n, _c(ty, _LN2_LO)))
    return r, ni


def _expm1_reduced_f32(b: ir.IRBuilder, r: ir.Value) -> ir.Value:
    """e**r - 1 for a reduced |r| <= ln2/2: r + r**2 P(r)."""
    return b.fadd(b.fmul(b.fmul(r, r), _horner(b, r, _EXP_P)), r)


def _pow2_f32(b: ir.IRBuilder, n: ir.Value, ty: ir.Type) -> ir.Value:
    """2**n as a float32 for an int32 n in the normal range [-126, 127]."""
    ity = _int_type(ty)
    return b.bitcast(b.shl(b.add(n, _c(ity, 127)), _c(ity, 23)), ty)


def _scale_f32(b: ir.IRBuilder, y: ir.Value, n: ir.Value) -> ir.Value:
    """y * 2**n for n in [-150, 128], which is not one normal float: scaled by two halves
    instead, so overflow and gradual underflow happen in a single final rounding."""
    n1 = b.ashr(n, _c(n.type, 1))
    return b.fmul(b.fmul(y, _pow2_f32(b, n1, y.type)), _pow2_f32(b, b.sub(n, n1), y.type))


def _exp_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """e**x; overflows to inf above ~88.72, reaches 0 below ~-103.97 (subnormals kept)."""
    _check_f32(x)
    ty = x.type
    # Past these bounds the result is already inf / 0; clamping keeps n within int range.
    r, n = _exp_reduce_f32(b, _clamp(b, x, -104.0, 89.0))
    y = b.fadd(_expm1_reduced_f32(b, r), _c(ty, 1.0))
    return _scale_f32(b, y, n)


def exp_flushed_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """e**x for x <= 0 (or NaN), such as softmax's x - max, with the results below float32's
    normal range (x < -87) flushed to 0. Within [-87, 0], 2**n is a normal float, so one
    multiplication scales (exactly, as _scale_f32's two do) and nothing is subnormal: a
    subnormal result or operand costs x86 a microcode assist per instruction, and a row with
    masked entries (-1e4, float32's lowest, -inf) took 3-4x the time of one without. The
    values flushed are below 1.7e-38, next to the row's maximum's 1."""
    _check_f32(x)
    ty = x.type
    low = b.fcmp_ordered("<", x, _c(ty, -87.0))
    r, n = _exp_reduce_f32(b, b.select(low, _c(ty, -87.0), x))  # NaN is not low: it stays
    y = b.fadd(_expm1_reduced_f32(b, r), _c(ty, 1.0))
    return b.select(low, _c(ty, 0.0), b.fmul(y, _pow2_f32(b, n, ty)))


def _expm1_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """e**x - 1 without exp's cancellation near 0: with x = n ln2 + r (|r| <= ln2/2) and
    em = e**r - 1 = r + r^2 P(r) (exp's polynomial), e**x - 1 = 2^n em + (2^n - 1), where
    2^n - 1 is exact for n <= 24 and the sum cannot cancel (n != 0 only for |x| > ln2/2).
    Past n = 24 (x > 16.6) the -1 is below half an ulp of e**x, which is computed instead
    (two half scalings, as :func:`_exp_f32`, so overflow to inf happens once); below -17.5
    the result rounds to -1; |x| < 2^-25 is its own expm1 (keeps -0 and subnormals)."""
    _check_f32(x)
    ty = x.type
    ity = _int_type(ty)
    r, ni = _exp_reduce_f32(b, _clamp(b, x, -17.5, 89.0))
    em = _expm1_reduced_f32(b, r)
    small_n = b.icmp_signed("<=", ni, _c(ity, 24))
    t = _pow2_f32(b, b.select(small_n, ni, _c(ity, 0)), ty)
    res = b.fadd(b.fmul(em, t), b.fsub(t, _c(ty, 1.0)))
    big = _scale_f32(b, b.fadd(em, _c(ty, 1.0)), ni)
    res = b.select(small_n, res, big)
    res = b.select(b.fcmp_ordered("<", x, _c(ty, -17.5)), _c(ty, -1.0), res)
    return b.select(b.fcmp_ordered("<", _fabs(b, x), _c(ty, 2.0**-25)), x, res)


def _log_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
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


def _tanh_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Hyperbolic tangent, relative-accurate near 0, saturating to +-1."""
    _check_f32(x)
    ty = x.type
    ax = _fabs(b, x)
    z = b.fmul(ax, ax)
    small = b.fadd(b.fmul(b.fmul(z, ax), _horner(b, z, _TANH_P)), ax)
    # 1 - 2/(e^2x + 1) cancels badly near 0, hence the polynomial there; e^2x = inf
    # for large x gives exactly 1.
    e2x = _exp_f32(b, b.fadd(ax, ax))
    one = _c(ty, 1.0)
    big = b.fsub(one, b.fdiv(_c(ty, 2.0), b.fadd(e2x, one)))
    res = b.select(b.fcmp_ordered("<", ax, _c(ty, _TANH_SMALL)), small, big)
    return _copysign(b, res, x)


def _sigmoid_with(b: ir.IRBuilder, x: ir.Value, exp) -> ir.Value:
    """1 / (1 + e**-x), without overflow for large |x|, with ``exp`` of x's precision."""
    ty = x.type
    one = _c(ty, 1.0)
    # e = e^-|x| never overflows; sigmoid(x) = 1/(1+e) for x > 0 and e/(1+e) otherwise,
    # which keeps relative accuracy in the exponentially small tail.
    e = exp(b, b.fneg(_fabs(b, x)))
    num = b.select(b.fcmp_ordered(">", x, _c(ty, 0.0)), one, e)
    return b.fdiv(num, b.fadd(one, e))


def _sigmoid_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    _check_f32(x)
    return _sigmoid_with(b, x, _exp_f32)


def _erf_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Error function, absolute error ~1e-7, erf(+-inf) = +-1."""
    _check_f32(x)
    ty = x.type
    ax = _fabs(b, x)
    ax = b.select(b.fcmp_ordered(">", ax, _c(ty, _ERF_CLAMP)), _c(ty, _ERF_CLAMP), ax)
    z = b.fmul(ax, ax)
    # x + x*P rather than x*(1 + P): the leading 2/sqrt(pi) would cost an extra rounding.
    small = b.fadd(ax, b.fmul(ax, _horner(b, z, _ERF_P)))
    big = b.fsub(_c(ty, 1.0), _exp_f32(b, b.fneg(_horner(b, ax, _ERF_Q))))
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


def _pow_f32(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
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
    return _pow_specials(b, x, y, _exp2_f64_to_f32(b, t, ty))


def _pow_specials(b: ir.IRBuilder, x: ir.Value, y: ir.Value, mag: ir.Value) -> ir.Value:
    """pow from ``mag`` = |x|**y (right for x > 0): the sign, nan and exact-1 cases."""
    ty = x.type
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


# ----------------------------------------------------------------------------- float64
#
# Constants beyond double precision come from decimal arithmetic at import time.

def _dec_pi() -> Decimal:
    """pi by Machin's formula, pi = 16 atan(1/5) - 4 atan(1/239), to the context's precision."""
    def atan_inv(n: int) -> Decimal:
        x, total, k, sign = Decimal(1) / n, Decimal(0), 1, 1
        while x > Decimal(10) ** -58:
            total += sign * x / k
            x /= n * n
            k, sign = k + 2, -sign
        return total
    return 16 * atan_inv(5) - 4 * atan_inv(239)


def _hi_lo(v: Decimal) -> tuple[float, float]:
    """``v`` as an unevaluated sum of two doubles."""
    hi = float(v)
    return hi, float(v - Decimal(hi))


def _chop(v: Decimal, bits: int) -> float:
    """``v`` truncated to ``bits`` significant bits (so small multiples of it are exact)."""
    e = math.frexp(float(v))[1]
    scale = Decimal(2) ** (bits - e)
    return float(Decimal(int(v * scale)) / scale)


def _pio2_parts() -> tuple[float, ...]:
    """pi/2 in four parts of 26 bits (the last holds the rest): k * part is exact for
    k < 2**27, so x - k pi/2 keeps about 130 bits of pi/2 while |x| < 2**27 pi/2."""
    parts, rest = [], _PI_DEC / 2
    for _ in range(3):
        parts.append(_chop(rest, 26))
        rest -= Decimal(parts[-1])
    return (*parts, float(rest))


with localcontext(Context(prec=60)):
    _PI_DEC = _dec_pi()
    _PIO2_HI, _PIO2_LO = _hi_lo(_PI_DEC / 2)
    _PIO4_HI, _PIO4_LO = _hi_lo(_PI_DEC / 4)
    _TWO_OVER_PI = float(2 / _PI_DEC)
    _PIO2_PARTS = _pio2_parts()
    _LN2_DEC = Decimal(2).ln()
    _LN2_HI64 = _chop(_LN2_DEC, 32)  # n * hi is exact for |n| < 2**21
    _LN2_LO64 = float(_LN2_DEC - Decimal(_LN2_HI64))
    _LN2_64 = float(_LN2_DEC)
    _LOG2E_64 = float(1 / _LN2_DEC)
    _INV_SQRT_PI = float(1 / _PI_DEC.sqrt())
    _TWO_OVER_SQRT_PI = float(2 / _PI_DEC.sqrt())
    _TAN_PI_8 = float(Decimal(2).sqrt() - 1)
_SINCOS_RANGE = 2.0**27 * 1.5  # |x| where k pi/2 stops being exact in four parts
_SQRT_HALF_BITS64 = struct.unpack("<q", struct.pack("<d", math.sqrt(0.5)))[0]
_MIN_NORMAL64 = 2.0**-1022

# exp(r) = sum r^n / n! for |r| <= ln2/2: the n = 14 term is below 2**-57.
_EXP64_SERIES = tuple(1.0 / math.factorial(n) for n in range(14))
# log(1+f) = f - f^2/2 + s (f^2/2 + R), s = f / (2 + f), R = sum 2 s^2k / (2k + 1); |s| < 0.172.
_LOG64_R = tuple(2.0 / (2 * k + 1) for k in range(1, 12))
# sin r = r + r^3 S(r^2), cos r = 1 - r^2/2 + r^4 C(r^2), |r| <= pi/4.
_SIN64_S = tuple((-1) ** k / math.factorial(2 * k + 1) for k in range(1, 10))
_COS64_C = tuple((-1) ** k / math.factorial(2 * k) for k in range(2, 11))
# atan u = u + u z A(z), z = u^2 <= tan(pi/8)^2: 22 terms.
_ATAN64_A = tuple((-1) ** k / (2 * k + 1) for k in range(1, 23))
# erf: |x| <= _ERF64_SERIES_MAX from erf x = 2x/sqrt(pi) e^-x^2 sum 2^n x^2n / (2n+1)!!,
# beyond from erfc's continued fraction; erfc(6) < 2**-54 so erf saturates there.
_ERF64_SERIES = tuple(2.0**n / math.prod(range(1, 2 * n + 2, 2)) for n in range(41))
_ERF64_SERIES_MAX = 2.5
_ERF64_CF_DEPTH = 40
_ERF64_CLAMP = 6.0
_DEKKER_SPLIT = 2.0**27 + 1.0
_POW64_SQUARING_MAX = 1024


def _check_f64(x: ir.Value) -> None:
    if not _is_f64(x.type):
        raise TypeError(f"expected double or <N x double>, got {x.type}")


def _round_int64(b: ir.IRBuilder, t: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(round(t) as double, as i64) for |t| < 2**51."""
    biased = b.fadd(t, _c(t.type, _ROUND_F64))
    return b.fsub(biased, _c(t.type, _ROUND_F64)), b.sub(_bits(b, biased), _c(_int_type(t.type), _ROUND_F64_BITS))


def _pow2_64(b: ir.IRBuilder, k: ir.Value, ty: ir.Type) -> ir.Value:
    """2**k as double for i64 k in the normal range."""
    return b.bitcast(b.shl(b.add(k, _c(k.type, 1023)), _c(k.type, 52)), ty)


def _exp_reduce64(b: ir.IRBuilder, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(r, k): x = k ln2 + r, |r| <= ln2/2 (Cody-Waite in two steps)."""
    ty = x.type
    kf, ki = _round_int64(b, b.fmul(x, _c(ty, _LOG2E_64)))
    r = b.fsub(b.fsub(x, b.fmul(kf, _c(ty, _LN2_HI64))), b.fmul(kf, _c(ty, _LN2_LO64)))
    return r, ki


def _exp64(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    ty = x.type
    # Past these bounds the result is already inf / 0; clamping keeps k within int range.
    r, k = _exp_reduce64(b, _clamp(b, x, -746.0, 710.0))
    y = b.fadd(b.fmul(_horner(b, r, _EXP64_SERIES[1:]), r), _c(ty, 1.0))
    # 2**k in two halves, so overflow and gradual underflow happen in one final rounding.
    k1 = b.ashr(k, _c(k.type, 1))
    return b.fmul(b.fmul(y, _pow2_64(b, k1, ty)), _pow2_64(b, b.sub(k, k1), ty))


def _expm1_64(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    ty = x.type
    r, k = _exp_reduce64(b, _clamp(b, x, -40.0, 40.0))
    em = b.fadd(r, b.fmul(b.fmul(r, r), _horner(b, r, _EXP64_SERIES[2:])))
    # e^x - 1 = 2^k em + (2^k - 1); 2^k - 1 is exact for |k| <= 53 and the sum never
    # cancels (k != 0 only for |x| > ln2/2).
    t = _pow2_64(b, k, ty)
    res = b.fadd(b.fmul(em, t), b.fsub(t, _c(ty, 1.0)))
    res = b.select(b.fcmp_ordered(">", x, _c(ty, 40.0)), _exp64(b, x), res)
    return b.select(b.fcmp_ordered("<", x, _c(ty, -40.0)), _c(ty, -1.0), res)


def _log64(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    ty = x.type
    ity = _int_type(ty)
    tiny = b.fcmp_ordered("<", x, _c(ty, _MIN_NORMAL64))
    xs = b.select(tiny, b.fmul(x, _c(ty, 2.0**54)), x)
    ix = b.sub(_bits(b, xs), _c(ity, _SQRT_HALF_BITS64))
    e = b.sub(b.ashr(ix, _c(ity, 52)), b.select(tiny, _c(ity, 54), _c(ity, 0)))
    m = b.add(b.and_(ix, _c(ity, (1 << 52) - 1)), _c(ity, _SQRT_HALF_BITS64))
    f = b.fsub(b.bitcast(m, ty), _c(ty, 1.0))  # exact, in [sqrt(1/2) - 1, sqrt(2) - 1)
    s = b.fdiv(f, b.fadd(f, _c(ty, 2.0)))
    z = b.fmul(s, s)
    hfsq = b.fmul(_c(ty, 0.5), b.fmul(f, f))
    big_r = b.fmul(z, _horner(b, z, _LOG64_R))
    ef = b.sitofp(e, ty)
    # f - (hfsq - s (hfsq + R)) keeps the exact f in front: error below one ulp.
    tail = b.fsub(b.fsub(hfsq, b.fadd(b.fmul(s, b.fadd(hfsq, big_r)), b.fmul(ef, _c(ty, _LN2_LO64)))), f)
    res = b.fsub(b.fmul(ef, _c(ty, _LN2_HI64)), tail)
    res = b.select(b.fcmp_ordered("==", x, _c(ty, _INF)), _c(ty, _INF), res)
    res = b.select(b.fcmp_ordered("==", x, _c(ty, 0.0)), _c(ty, -_INF), res)
    return b.select(b.fcmp_unordered("<", x, _c(ty, 0.0)), _c(ty, _NAN), res)


def _log1p64(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    ty = x.type
    u = b.fadd(x, _c(ty, 1.0))
    # log(1 + x) = log(u) + log(1 + c/u), c the rounding error of u = 1 + x.
    c = b.fsub(x, b.fsub(u, _c(ty, 1.0)))
    finite = b.and_(b.fcmp_ordered("!=", u, _c(ty, 0.0)), b.fcmp_ordered("!=", u, _c(ty, _INF)))
    res = b.fadd(_log64(b, u), b.select(finite, b.fdiv(c, u), _c(ty, 0.0)))
    return res


def _sincos_reduce64(b: ir.IRBuilder, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(r, n): x = k pi/2 + r, |r| <= pi/4, n = k mod 4 (i64)."""
    ty = x.type
    kf, ki = _round_int64(b, b.fmul(x, _c(ty, _TWO_OVER_PI)))
    r = x
    for part in _PIO2_PARTS:
        r = b.fsub(r, b.fmul(kf, _c(ty, part)))
    return r, b.and_(ki, _c(ki.type, 3))


def _sin_cos_kernels64(b: ir.IRBuilder, r: ir.Value) -> tuple[ir.Value, ir.Value]:
    ty = r.type
    z = b.fmul(r, r)
    s = b.fadd(r, b.fmul(b.fmul(z, r), _horner(b, z, _SIN64_S)))
    hz = b.fmul(_c(ty, 0.5), z)
    w = b.fsub(_c(ty, 1.0), hz)
    # 1 - hz rounded, plus what that rounding lost, plus the small terms
    c = b.fadd(w, b.fadd(b.fsub(b.fsub(_c(ty, 1.0), w), hz), b.fmul(b.fmul(z, z), _horner(b, z, _COS64_C))))
    return s, c


def _quadrant(b: ir.IRBuilder, n: ir.Value, values: tuple[ir.Value, ir.Value, ir.Value, ir.Value]) -> ir.Value:
    """values[n] for n in 0..3."""
    ity = n.type
    lo = b.select(b.icmp_unsigned("==", n, _c(ity, 0)), values[0], values[1])
    hi = b.select(b.icmp_unsigned("==", n, _c(ity, 2)), values[2], values[3])
    return b.select(b.icmp_unsigned("<", n, _c(ity, 2)), lo, hi)


def _sincos_args(b: ir.IRBuilder, x: ir.Value):
    ty = x.type
    # Beyond the reduction's exact range (no Payne-Hanek reduction here) the result is
    # nan rather than a wrong angle.
    x = b.select(b.fcmp_ordered(">", _fabs(b, x), _c(ty, _SINCOS_RANGE)), _c(ty, _NAN), x)
    r, n = _sincos_reduce64(b, x)
    s, c = _sin_cos_kernels64(b, r)
    return s, c, n


def _sin64(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    s, c, n = _sincos_args(b, x)
    return _quadrant(b, n, (s, c, b.fneg(s), b.fneg(c)))


def _cos64(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    s, c, n = _sincos_args(b, x)
    return _quadrant(b, n, (c, b.fneg(s), b.fneg(c), s))


def _tan64(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    s, c, n = _sincos_args(b, x)
    odd = b.icmp_unsigned("!=", b.and_(n, _c(n.type, 1)), _c(n.type, 0))
    return b.select(odd, b.fneg(b.fdiv(c, s)), b.fdiv(s, c))


def _atan64(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    ty = x.type
    one = _c(ty, 1.0)
    a = _fabs(b, x)
    inv = b.fcmp_ordered(">", a, one)
    t = b.select(inv, b.fdiv(one, a), a)  # t <= 1: atan a = pi/2 - atan t
    mid = b.fcmp_ordered(">", t, _c(ty, _TAN_PI_8))
    u = b.select(mid, b.fdiv(b.fsub(t, one), b.fadd(t, one)), t)  # atan t = pi/4 + atan u
    z = b.fmul(u, u)
    p = b.fadd(u, b.fmul(b.fmul(u, z), _horner(b, z, _ATAN64_A)))
    p = b.select(mid, b.fadd(_c(ty, _PIO4_HI), b.fadd(_c(ty, _PIO4_LO), p)), p)
    p = b.select(inv, b.fsub(_c(ty, _PIO2_HI), b.fsub(p, _c(ty, _PIO2_LO))), p)
    return _copysign(b, p, x)


def _asin64(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    # asin x = atan(x / sqrt(1 - x^2)); (1 - x)(1 + x) keeps 1 - x exact near |x| = 1, and
    # |x| > 1 gives the square root of a negative number: nan.
    one = _c(x.type, 1.0)
    root = _intrinsic(b, "llvm.sqrt", b.fmul(b.fsub(one, x), b.fadd(one, x)))
    return _atan64(b, b.fdiv(x, root))


def _acos64(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    # acos x = 2 atan(sqrt((1 - x) / (1 + x))): exact differences at both ends of [-1, 1]
    one = _c(x.type, 1.0)
    t = _intrinsic(b, "llvm.sqrt", b.fdiv(b.fsub(one, x), b.fadd(one, x)))
    return b.fmul(_c(x.type, 2.0), _atan64(b, t))


def _sinh64(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    ty = x.type
    a = _fabs(b, x)
    u = _expm1_64(b, a)
    small = b.fmul(_c(ty, 0.5), b.fadd(u, b.fdiv(u, b.fadd(u, _c(ty, 1.0)))))
    # e^a / 2 as e^(a/2) * (e^(a/2) / 2): finite up to the largest finite sinh
    h = _exp64(b, b.fmul(a, _c(ty, 0.5)))
    big = b.fmul(b.fmul(h, _c(ty, 0.5)), h)
    return _copysign(b, b.select(b.fcmp_ordered(">", a, _c(ty, 22.0)), big, small), x)


def _cosh64(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    ty = x.type
    a = _fabs(b, x)
    e = _exp64(b, b.select(b.fcmp_ordered(">", a, _c(ty, 22.0)), _c(ty, 0.0), a))
    small = b.fadd(b.fmul(_c(ty, 0.5), e), b.fdiv(_c(ty, 0.5), e))
    h = _exp64(b, b.fmul(a, _c(ty, 0.5)))
    big = b.fmul(b.fmul(h, _c(ty, 0.5)), h)
    return b.select(b.fcmp_ordered(">", a, _c(ty, 22.0)), big, small)


def _tanh64(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    ty = x.type
    a = _fabs(b, x)
    u = _expm1_64(b, b.fadd(a, a))
    res = b.fdiv(u, b.fadd(u, _c(ty, 2.0)))  # relative-accurate near 0
    res = b.select(b.fcmp_ordered(">", a, _c(ty, 22.0)), _c(ty, 1.0), res)
    return _copysign(b, res, x)


def _asinh64(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    ty = x.type
    one = _c(ty, 1.0)
    a = _fabs(b, x)
    big = b.fcmp_ordered(">", a, _c(ty, 2.0**28))
    am = b.select(big, one, a)  # keeps a^2 finite on the path not taken
    a2 = b.fmul(am, am)
    # log(a + sqrt(a^2 + 1)) = log1p(a + a^2 / (1 + sqrt(1 + a^2)))
    small = _log1p64(b, b.fadd(am, b.fdiv(a2, b.fadd(one, _intrinsic(b, "llvm.sqrt", b.fadd(one, a2))))))
    large = b.fadd(_log64(b, a), _c(ty, _LN2_64))
    return _copysign(b, b.select(big, large, small), x)


def _acosh64(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    ty = x.type
    one, two = _c(ty, 1.0), _c(ty, 2.0)
    big = b.fcmp_ordered(">", x, _c(ty, 2.0**28))
    xm = b.select(big, two, x)
    t = b.fsub(xm, one)
    near1 = _log1p64(b, b.fadd(t, _intrinsic(b, "llvm.sqrt", b.fadd(b.fadd(t, t), b.fmul(t, t)))))
    # log(x + sqrt(x^2 - 1)) = log(2x - 1 / (x + sqrt(x^2 - 1)))
    root = _intrinsic(b, "llvm.sqrt", b.fsub(b.fmul(xm, xm), one))
    mid = _log64(b, b.fsub(b.fmul(two, xm), b.fdiv(one, b.fadd(xm, root))))
    res = b.select(b.fcmp_ordered("<", xm, two), near1, mid)
    res = b.select(big, b.fadd(_log64(b, x), _c(ty, _LN2_64)), res)
    return b.select(b.fcmp_ordered("<", x, one), _c(ty, _NAN), res)


def _atanh64(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    ty = x.type
    a = _fabs(b, x)
    # atanh a = log1p(2a / (1 - a)) / 2: inf at a = 1, nan beyond (log1p of < -1)
    res = b.fmul(_c(ty, 0.5), _log1p64(b, b.fdiv(b.fadd(a, a), b.fsub(_c(ty, 1.0), a))))
    return _copysign(b, res, x)


def _exp_minus_square64(b: ir.IRBuilder, a: ir.Value) -> ir.Value:
    """e^(-a^2) with a^2 kept exactly as hi + lo (Dekker), so large a lose no accuracy."""
    ty = a.type
    c = b.fmul(a, _c(ty, _DEKKER_SPLIT))
    ah = b.fsub(c, b.fsub(c, a))
    al = b.fsub(a, ah)
    hi = b.fmul(a, a)
    lo = b.fadd(b.fadd(b.fsub(b.fmul(ah, ah), hi), b.fmul(b.fadd(ah, ah), al)), b.fmul(al, al))
    return b.fmul(_exp64(b, b.fneg(hi)), b.fsub(_c(ty, 1.0), lo))


def _erf64(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    ty = x.type
    a = _clamp(b, _fabs(b, x), 0.0, _ERF64_CLAMP)
    g = _exp_minus_square64(b, a)
    series = b.fmul(b.fmul(b.fmul(a, _c(ty, _TWO_OVER_SQRT_PI)), g), _horner(b, b.fmul(a, a), _ERF64_SERIES))
    # erfc a = e^-a^2 / sqrt(pi) / (a + (1/2) / (a + 1 / (a + (3/2) / (a + ...)))), from the bottom
    f = a
    for k in range(_ERF64_CF_DEPTH, 0, -1):
        f = b.fadd(a, b.fdiv(_c(ty, k / 2), f))
    cf = b.fsub(_c(ty, 1.0), b.fdiv(b.fmul(g, _c(ty, _INV_SQRT_PI)), f))
    res = b.select(b.fcmp_ordered("<=", a, _c(ty, _ERF64_SERIES_MAX)), series, cf)
    return _copysign(b, res, x)


def _sigmoid64(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return _sigmoid_with(b, x, _exp64)


def _softplus64(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """log(1 + e^x) = max(x, 0) + log1p(e^-|x|): no overflow, relative-accurate for x << 0."""
    ty = x.type
    pos = b.select(b.fcmp_ordered(">", x, _c(ty, 0.0)), x, _c(ty, 0.0))
    res = b.fadd(pos, _log1p64(b, _exp64(b, b.fneg(_fabs(b, x)))))
    return b.select(b.fcmp_unordered("!=", x, x), x, res)


def _pow64(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """pow for doubles. Integral |y| <= _POW64_SQUARING_MAX multiplies by squaring (exact
    whenever the result is representable: 3**3 is 27, not 26.999...); other y use
    e^(y log|x|), whose relative error is about |y log x| ulp."""
    ty = x.type
    ax = _fabs(b, x)
    via_exp = _exp64(b, b.fmul(y, _log64(b, ax)))
    ay = _fabs(b, y)
    is_int, _ = _integer_parity(b, y)
    small = b.and_(is_int, b.fcmp_ordered("<=", ay, _c(ty, _POW64_SQUARING_MAX)))
    ity = _int_type(ty)
    n = b.fptosi(b.select(small, ay, _c(ty, 0.0)), ity)
    acc, base = _c(ty, 1.0), ax
    for k in range(_POW64_SQUARING_MAX.bit_length()):
        bit = b.icmp_unsigned("!=", b.and_(n, _c(ity, 1 << k)), _c(ity, 0))
        acc = b.select(bit, b.fmul(acc, base), acc)
        base = b.fmul(base, base)
    acc = b.select(b.fcmp_ordered("<", y, _c(ty, 0.0)), b.fdiv(_c(ty, 1.0), acc), acc)
    return _pow_specials(b, x, y, b.select(small, acc, via_exp))


# ----------------------------------------------------------------------------- fmod


def _fmod_mantissas(b: ir.IRBuilder, mx: ir.Value, my: ir.Value, d: ir.Value, dbits: int, wide: bool) -> ir.Value:
    """(mx * 2**d) mod my for integers mx, my < 2**53 (i64 values), 0 <= d < 2**dbits, by
    modular exponentiation of 2. ``wide``: products need more than 64 bits (mantissas of
    53 bits); they are reduced with a double-precision quotient estimate."""
    ity = mx.type
    fty = _shaped(ity, _F64)
    myf = b.uitofp(my, fty)

    def mulmod(p, q):
        if not wide:
            return b.urem(b.mul(p, q), my)
        # q_est = p q / my rounded is within 2 of the true quotient; p q - q_est my wraps
        # modulo 2**64 but the true remainder is small, so the wrapped difference is exact.
        est = b.fptosi(b.fdiv(b.fmul(b.uitofp(p, fty), b.uitofp(q, fty)), myf), ity)
        r = b.sub(b.mul(p, q), b.mul(est, my))
        for _ in range(3):
            r = b.select(b.icmp_signed("<", r, _c(ity, 0)), b.add(r, my), r)
        for _ in range(3):
            r = b.select(b.icmp_signed(">=", r, my), b.sub(r, my), r)
        return r

    result = b.urem(_c(ity, 1), my)
    power = b.urem(_c(ity, 2), my)
    for k in range(dbits):
        bit = b.icmp_unsigned("!=", b.and_(d, _c(ity, 1 << k)), _c(ity, 0))
        result = b.select(bit, mulmod(result, power), result)
        if k + 1 < dbits:
            power = mulmod(power, power)
    return mulmod(b.urem(mx, my), result)


def fmod(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """C ``fmod``: x - trunc(x / y) y computed exactly (the result is always representable),
    with the sign of x; nan for y = 0, x = +-inf or nan operands; x for y = +-inf."""
    if not isinstance(x.type.element if isinstance(x.type, ir.VectorType) else x.type, (ir.FloatType, ir.DoubleType)):
        raise TypeError(f"expected float or double, got {x.type}")
    ty = x.type
    wide = _is_f64(ty)
    ity = _int_type(ty)
    i64t = _shaped(ty, ir.IntType(64))
    m = _mantissa_bits(ty)
    bias = 1023 if wide else 127
    ax, ay = _fabs(b, x), _fabs(b, y)

    def parts(v):
        """(integer mantissa, exponent of its lowest bit) of a finite positive float, as i64."""
        bits = _bits(b, v)
        e = b.lshr(bits, _c(ity, m))
        frac = b.and_(bits, _c(ity, (1 << m) - 1))
        normal = b.icmp_unsigned("!=", e, _c(ity, 0))
        mant = b.select(normal, b.or_(frac, _c(ity, 1 << m)), frac)
        e = b.select(normal, e, _c(ity, 1))
        if not wide:
            mant, e = b.zext(mant, i64t), b.zext(e, i64t)
        return mant, b.sub(e, _c(i64t, bias + m))

    mx, ex = parts(ax)
    my, ey = parts(ay)
    my = b.select(b.icmp_unsigned("==", my, _c(i64t, 0)), _c(i64t, 1), my)  # y = 0: nan below
    d = b.sub(ex, ey)
    dpos = b.select(b.icmp_signed("<", d, _c(i64t, 0)), _c(i64t, 0), d)
    r = _fmod_mantissas(b, mx, my, dpos, 12 if wide else 9, wide)
    # r * 2**ey: r < my, so the product is representable; scale in two steps so that
    # neither factor leaves the normal range.
    rf = b.uitofp(r, ty)
    ey1 = b.ashr(ey, _c(i64t, 1))
    scale = (lambda k: _pow2_64(b, k, ty)) if wide else (
        lambda k: b.bitcast(b.shl(b.add(b.trunc(k, ity), _c(ity, 127)), _c(ity, 23)), ty))
    res = b.fmul(b.fmul(rf, scale(ey1)), scale(b.sub(ey, ey1)))
    res = b.select(b.fcmp_ordered("<", ax, ay), ax, res)
    res = _copysign(b, res, x)
    bad = b.or_(b.fcmp_unordered("==", ay, _c(ty, 0.0)), b.fcmp_unordered("==", ax, _c(ty, _INF)))
    return b.select(bad, _c(ty, _NAN), res)


# ----------------------------------------------------------------------------- public


def _float_only(x: ir.Value) -> None:
    elem = x.type.element if isinstance(x.type, ir.VectorType) else x.type
    if not isinstance(elem, (ir.FloatType, ir.DoubleType)):
        raise TypeError(f"expected float, double or a vector of them, got {x.type}")


def _dispatch(f32_fn, f64_fn, name: str):
    """A public function: float32 arguments to ``f32_fn`` (None: computed in double and
    rounded once), float64 arguments to ``f64_fn``."""
    def fn(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        _float_only(x)
        if _is_f64(x.type):
            return f64_fn(b, x)
        if f32_fn is not None:
            return f32_fn(b, x)
        return b.fptrunc(f64_fn(b, b.fpext(x, _shaped(x.type, _F64))), x.type)
    fn.__name__ = name
    fn.__doc__ = (f64_fn.__doc__ or f32_fn.__doc__ or "").strip() or None
    return fn


exp = _dispatch(_exp_f32, _exp64, "exp")
log = _dispatch(_log_f32, _log64, "log")
tanh = _dispatch(_tanh_f32, _tanh64, "tanh")
sigmoid = _dispatch(_sigmoid_f32, _sigmoid64, "sigmoid")
erf = _dispatch(_erf_f32, _erf64, "erf")
expm1 = _dispatch(_expm1_f32, _expm1_64, "expm1")
log1p = _dispatch(None, _log1p64, "log1p")
softplus = _dispatch(None, _softplus64, "softplus")
sin = _dispatch(None, _sin64, "sin")
cos = _dispatch(None, _cos64, "cos")
tan = _dispatch(None, _tan64, "tan")
asin = _dispatch(None, _asin64, "asin")
acos = _dispatch(None, _acos64, "acos")
atan = _dispatch(None, _atan64, "atan")
sinh = _dispatch(None, _sinh64, "sinh")
cosh = _dispatch(None, _cosh64, "cosh")
asinh = _dispatch(None, _asinh64, "asinh")
acosh = _dispatch(None, _acosh64, "acosh")
atanh = _dispatch(None, _atanh64, "atanh")


def pow(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """ONNX Pow, following C ``pow`` special cases: negative x needs integral y (the sign
    follows its parity), else nan; 0**0 = 1, 0**negative = inf, pow(1, y) = pow(x, 0) = 1
    even for nan. float32 is nearly correctly rounded (y log2|x| is formed in double)."""
    _float_only(x)
    _float_only(y)
    if x.type != y.type:
        raise TypeError(f"pow operands differ: {x.type} vs {y.type}")
    return _pow64(b, x, y) if _is_f64(x.type) else _pow_f32(b, x, y)
