"""toolkit.codegen.expr, the kernel language: tiny kernels built through KernelBuilder,
JIT-compiled natively (MCJIT) and called with sw_tensor descriptors, against numpy."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from llvmlite import binding as llvm
from llvmlite import ir

from toolkit import abi
from toolkit.codegen.expr import Ex, below, clamp, const, maximum, minimum, where
from toolkit.codegen.kernel import F32, F64, I32, I64, KernelBuilder
from toolkit.ir.dtypes import dtype_of_numpy

llvm.initialize_all_targets()
llvm.initialize_all_asmprinters()


class Desc(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int32), ("rank", ctypes.c_int32),
                ("shape", ctypes.c_int64 * abi.MAX_RANK)]


def run(build, arrays: list[np.ndarray], shapes: list[tuple]) -> None:
    """Build ``build(kb, tensors)`` as a kernel over ``arrays`` (declared with ``shapes``:
    ints static, strings symbolic), JIT it and call it; outputs are written in place."""
    module = ir.Module(name="expr_test")
    kb = KernelBuilder(module, "k")
    tensors = [kb.tensor(k, dtype_of_numpy(a.dtype), shape) for k, (a, shape) in enumerate(zip(arrays, shapes))]
    build(kb, *tensors)
    kb.finish()
    kb.fn.linkage = "external"
    mod = llvm.parse_assembly(str(module))
    mod.verify()
    tm = llvm.Target.from_default_triple().create_target_machine(jit=True)
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                          ctypes.c_int32, ctypes.c_int32)(engine.get_function_address("k"))
    descs = [Desc(a.ctypes.data, 0, a.ndim, (ctypes.c_int64 * abi.MAX_RANK)(*a.shape)) for a in arrays]
    table = (ctypes.c_void_p * len(descs))(*[ctypes.addressof(d) for d in descs])
    scalars, detail, cancel = (ctypes.c_int64 * 4)(), (ctypes.c_int64 * 3)(), ctypes.c_int32(0)
    assert fn(ctypes.addressof(table), ctypes.addressof(scalars), ctypes.addressof(detail),
              ctypes.addressof(cancel), 0, 1) == 0
    engine.close()


def ir_of(build, dtype: str = "int64", shape=("n",)) -> str:
    module = ir.Module(name="expr_ir")
    kb = KernelBuilder(module, "k")
    build(kb, kb.tensor(0, dtype_of_numpy(np.dtype(dtype)), shape))
    kb.finish()
    return str(kb.fn)


@pytest.mark.parametrize("static", [True, False], ids=["static", "symbolic"])
def test_multi_dim_indexing(static):
    """out[i, j, k] = x[k, i, j] * 10 + i: a transpose read and written by row-major strides
    of dims that are constants (static) or loaded from the descriptors (symbolic)."""
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(4, 2, 3)
    out = np.zeros((2, 3, 4), np.float32)
    shapes = [(4, 2, 3), (2, 3, 4)] if static else [("k", "i", "j"), ("i", "j", "k")]

    def build(kb, xt, ot):
        di, dj, dk = ot.dims
        with kb.range(di, "i") as i, kb.range(dj, "j") as j, kb.range(dk, "k") as k:
            ot[i, j, k] = xt[k, i, j] * 10 + i.to(F32)

    run(build, [x, out], shapes)
    np.testing.assert_array_equal(out, x.transpose(1, 2, 0) * 10 + np.arange(2, dtype=np.float32)[:, None, None])


def test_static_dims_and_constant_indices_fold():
    """Indexing by static dims and constant indices emits no arithmetic: t[1, 2] of a (3, 5)
    tensor is element 7, a constant offset."""
    def build(kb, t):
        t[1, 2] = t[0, 4] + 1

    text = ir_of(build, shape=(3, 5))
    assert "mul" not in text and " add " not in text.replace("add i64 %", "")
    assert "i64 7" in text and "i64 4" in text


def test_symbolic_offset_is_horner():
    """t[i, j] of a (m, n) tensor: one multiply by the loaded n and one add, nothing else."""
    def build(kb, t):
        m, n = t.dims
        with kb.range(m, "i") as i, kb.range(n, "j") as j:
            t[i, j] = t[i, j] + 1

    text = ir_of(build, shape=("m", "n"))
    assert text.count(" mul ") == 2  # the load's offset and the store's


def test_integer_operators_and_promotion():
    """+ - * // % with Python ints promoted to the other operand's type (i64 and i32),
    floor semantics for every sign, unary minus, shifts, bitwise ops."""
    a = np.array([-7, 7, -7, 7, 0, -1, 13, -13, 2**40, -(2**40)], np.int64)
    d = np.array([2, 2, -2, -2, 3, 5, 4, 4, 7, 7], np.int64)
    ops = ["a + 3", "5 - a", "a * -4", "a // d", "a % d", "-a", "(a << 2) >> 1", "a & 6", "a | 1", "a ^ d",
           "100 // d", "100 % d"]
    out64 = np.zeros((len(ops), a.size), np.int64)
    out32 = np.zeros((len(ops), a.size), np.int32)

    def build(kb, at, dt_, o64, o32):
        with kb.range(at.dims[0], "e") as e:
            for k, text in enumerate(ops):
                v64 = eval(text, {}, {"a": at[e], "d": dt_[e]})
                v32 = eval(text, {}, {"a": at[e].to(I32), "d": dt_[e].to(I32)})
                assert v64.type == I64 and v32.type == I32
                o64[k, e] = v64
                o32[k, e] = v32

    run(build, [a, d, out64, out32], [("n",), ("n",), (len(ops), "n"), (len(ops), "n")])
    for k, text in enumerate(ops):
        want = eval(text, {}, {"a": a, "d": d})
        np.testing.assert_array_equal(out64[k], want, err_msg=text)
        want32 = eval(text, {}, {"a": a.astype(np.int32), "d": d.astype(np.int32)})
        np.testing.assert_array_equal(out32[k], want32, err_msg=f"{text} (i32)")


def test_below_is_a_bounds_check():
    """below(i, n) is 0 <= i < n: negatives (huge as unsigned) are out, in i64 and i32."""
    a = np.array([-(2**40), -5, -1, 0, 1, 3, 4, 5, 2**40], np.int64)
    n = np.array([4, 4, 4, 4, 4, 4, 4, 0, 2**41], np.int64)
    out = np.zeros((2, a.size), np.int64)

    def build(kb, at, nt, o):
        with kb.range(at.dims[0], "e") as e:
            o[0, e] = below(at[e], nt[e]).to(I64)
            o[1, e] = below(at[e].to(I32), 4).to(I64)

    run(build, [a, n, out], [("n",), ("n",), (2, "n")])
    np.testing.assert_array_equal(out[0], (a >= 0) & (a < n))
    a32 = a.astype(np.int32)
    np.testing.assert_array_equal(out[1], (a32 >= 0) & (a32 < 4))


def test_floor_division_matches_python_on_a_grid():
    """// and % equal Python's for every sign of dividend and divisor (the reason the
    language spends a fix-up over sdiv/srem), and divmod agrees with both."""
    grid = [(p, q) for p in range(-9, 10) for q in range(-4, 5) if q]
    a = np.array([p for p, _ in grid], np.int64)
    d = np.array([q for _, q in grid], np.int64)
    out = np.zeros((3, a.size), np.int64)

    def build(kb, at, dt_, ot):
        with kb.range(at.dims[0], "e") as e:
            q, r = divmod(at[e], dt_[e])
            ot[0, e], ot[1, e], ot[2, e] = at[e] // dt_[e], at[e] % dt_[e], q * dt_[e] + r

    run(build, [a, d, out], [("n",), ("n",), (3, "n")])
    np.testing.assert_array_equal(out[0], [p // q for p, q in grid])
    np.testing.assert_array_equal(out[1], [p % q for p, q in grid])
    np.testing.assert_array_equal(out[2], a)


def test_constants_fold_like_python():
    """Constant operands fold at build time with the same floor semantics and width wrap."""
    b = ir.IRBuilder()
    seven, two = const(b, I64, -7), const(b, I64, 2)
    assert (seven // two).constant == -4 and (seven % two).constant == 1
    assert (seven // -2).constant == 3 and (7 % const(b, I64, -2)).constant == -1
    assert (const(b, I32, 2**31 - 1) + 1).constant == -(2**31)
    assert (seven < two).constant == 1 and (seven == -7).constant == 1
    assert minimum(seven, two).constant == -7 and maximum(seven, 2).constant == 2
    assert (-seven).constant == 7 and seven.to(F64).constant == -7.0
    assert where(seven < 0, seven, two) is seven


def test_float_operators_comparisons_and_helpers():
    """Float arithmetic with promoted Python numbers, ordered comparisons (!= unordered),
    where/maximum/minimum/clamp (NaN-propagating for floats), floor/ceil/trunc."""
    x = np.array([-2.5, -0.5, 0.0, 0.5, 1.5, 3.75, np.nan], np.float64)
    y = np.array([1.0, -0.5, 2.0, np.nan, 1.5, -3.0, 0.0], np.float64)
    out = np.zeros((13, x.size), np.float64)

    def build(kb, xt, yt, ot):
        with kb.range(xt.dims[0], "e") as e:
            a, c = xt[e], yt[e]
            rows = [2 * a + 1, 1 - a / 4, -a, where(a < c, a, c), maximum(a, c), minimum(a, c),
                    clamp(a, -1.0, 2), (a <= c).to(F64), (a != c).to(F64), (a == c).to(F64),
                    a.floor(), a.ceil(), a.trunc()]
            for k, v in enumerate(rows):
                ot[k, e] = v

    run(build, [x, y, out], [("n",), ("n",), (13, "n")])
    with np.errstate(invalid="ignore"):
        want = [2 * x + 1, 1 - x / 4, -x, np.where(x < y, x, y), np.maximum(x, y), np.minimum(x, y),
                np.minimum(np.maximum(x, -1.0), 2.0), x <= y, x != y, x == y, np.floor(x), np.ceil(x), np.trunc(x)]
    for k, w in enumerate(want):
        np.testing.assert_array_equal(out[k], np.asarray(w, np.float64), err_msg=f"row {k}")


def test_conversions():
    """to(): float -> int truncates toward zero and saturates (NaN gives 0), int -> float is
    signed, f64 -> f32 rounds, i1 -> int is 0 or 1 (not -1), i64 -> i32 truncates."""
    x = np.array([-2.7, 2.7, np.nan, 1e30, -1e30, 0.1], np.float64)
    ints = np.zeros((3, x.size), np.int64)
    floats = np.zeros(x.size, np.float32)
    small = np.zeros(x.size, np.int32)

    def build(kb, xt, it, ft, st):
        with kb.range(xt.dims[0], "e") as e:
            v = xt[e]
            it[0, e] = v.index()
            it[1, e] = (v > 0).to(I64)
            it[2, e] = (v.index() * -1).to(F64).index()
            ft[e] = v.to(F32)
            st[e] = (v.index() + 2**32).to(I32)

    run(build, [x, ints, floats, small], [("n",), (3, "n"), ("n",), ("n",)])
    big = np.iinfo(np.int64)
    want = np.array([-2, 2, 0, big.max, big.min, 0], np.int64)
    np.testing.assert_array_equal(ints[0], want)
    np.testing.assert_array_equal(ints[1], (x > 0).astype(np.int64))
    # -max is -2**63 as a double; -min wraps to min
    np.testing.assert_array_equal(ints[2], [2, -2, 0, big.min, big.min, 0])
    np.testing.assert_array_equal(floats, x.astype(np.float32))
    np.testing.assert_array_equal(small, (want + 2**32).astype(np.int32))


def test_flat_access_and_iterate():
    """t.flat[i] reads and writes the row-major elements; kb.iterate carries Exs (a running
    sum and a running max)."""
    x = np.array([[3, -1, 4], [1, -5, 9]], np.int64)
    out = np.zeros(2, np.int64)

    def build(kb, xt, ot):
        total, best = kb.iterate(0, xt.numel(), [const(kb.b, I64, 0), const(kb.b, I64, -(2**63))],
                                 lambda i, acc: [acc[0] + xt.flat[i], maximum(acc[1], xt.flat[i])])
        ot.flat[0], ot[1] = total, best

    run(build, [x, out], [(2, "n"), (2,)])
    np.testing.assert_array_equal(out, [x.sum(), x.max()])


def test_refusals():
    """Mixed types, a float constant for an integer, / on integers, // on floats, a truth
    value and the wrong number of indices are TypeErrors (IndexError) at build time."""
    b = ir.IRBuilder(ir.Function(ir.Module(), ir.FunctionType(ir.VoidType(), []), "f").append_basic_block())
    i, f = Ex(b, b.add(ir.Constant(I64, 1), ir.Constant(I64, 2))), const(b, F64, 1.0)
    for bad in (lambda: i + f, lambda: i + 0.5, lambda: i / 2, lambda: f // 2, lambda: f % 2,
                lambda: bool(i < 3), lambda: 1 < i < 3, lambda: i.to(I32) + i, lambda: where(i < 3, 1, 2),
                lambda: maximum(i, "2"), lambda: where(i, i, i), lambda: below(f, 2.0)):
        with pytest.raises(TypeError):
            bad()

    def build(kb, t):
        t[0] = 1

    with pytest.raises(IndexError):
        ir_of(build, shape=(2, 2))
