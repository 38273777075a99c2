"""Elementwise ops on both targets against onnx.reference, each from one module run with
several bindings of its symbolic dims (broadcasting decided at run time included)."""
import numpy as np
import pytest
from onnx import helper

from util import build, check_model, const, lower_model, make_model, rand, vinfo

BINDINGS = [(1, 5), (3, 5), (7, 5), (0, 5)]  # n x 5: 7*5 is not a multiple of any SIMD width


def feeds_for(names_dtypes, shapes_of, rng, lo=-3, hi=3):
    return [{name: rand(rng, shapes_of(n), dt, lo, hi) for name, dt in names_dtypes} for n, _ in BINDINGS]


def binary_model(op, dtype, out_dtype, a_shape=("n", 5), b_shape=(1, 5), **attrs):
    return make_model([helper.make_node(op, ["a", "b"], ["y"], **attrs)],
                      [vinfo("a", dtype, list(a_shape)), vinfo("b", dtype, list(b_shape))],
                      [vinfo("y", out_dtype, None)])


ARITH = ["Add", "Sub", "Mul", "Div", "Max", "Min"]


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
@pytest.mark.parametrize("op", ARITH)
def test_arith(op, dtype, target):
    rng = np.random.default_rng(1)
    m = binary_model(op, dtype, dtype)
    feeds = []
    for n, _ in BINDINGS:
        b = rand(rng, (1, 5), dtype, -5, 6)
        if op == "Div" and np.dtype(dtype).kind == "i":
            b[b == 0] = 3  # integer division by zero is undefined in ONNX
        feeds.append({"a": rand(rng, (n, 5), dtype, -20, 20), "b": b})
    check_model(m, target, feeds)


COMPARE = [(op, dt) for op in ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"]
           for dt in [np.float32, np.int32, np.int64]] + [("Equal", np.bool_)]


@pytest.mark.parametrize("op,dtype", COMPARE)
def test_compare(op, dtype, target):
    rng = np.random.default_rng(2)
    m = binary_model(op, dtype, np.bool_, ("n", 5), ("n", 1))
    check_model(m, target, [{"a": rand(rng, (n, 5), dtype, -2, 3), "b": rand(rng, (n, 1), dtype, -2, 3)}
                            for n, _ in BINDINGS])


@pytest.mark.parametrize("op", ["And", "Or"])
def test_logic(op, target):
    rng = np.random.default_rng(3)
    m = binary_model(op, np.bool_, np.bool_, ("n", 5), (5,))
    check_model(m, target, [{"a": rand(rng, (n, 5), np.bool_), "b": rand(rng, (5,), np.bool_)} for n, _ in BINDINGS])


def test_not(target):
    rng = np.random.default_rng(4)
    m = make_model([helper.make_node("Not", ["a"], ["y"])], [vinfo("a", np.bool_, ["n", 5])], [vinfo("y", np.bool_, None)])
    check_model(m, target, [{"a": rand(rng, (n, 5), np.bool_)} for n, _ in BINDINGS])


UNARY_FLOAT = {"Sqrt": (0, 9), "Reciprocal": (0.1, 4), "Exp": (-20, 20), "Log": (0.01, 50), "Sigmoid": (-30, 30),
               "Tanh": (-6, 6), "Erf": (-4, 4), "Neg": (-5, 5), "Abs": (-5, 5), "Relu": (-5, 5),
               "HardSigmoid": (-5, 5), "HardSwish": (-5, 5), "Softsign": (-5, 5), "Softplus": (-20, 20)}


@pytest.mark.parametrize("op", sorted(UNARY_FLOAT))
def test_unary_float(op, target):
    rng = np.random.default_rng(5)
    lo, hi = UNARY_FLOAT[op]
    m = make_model([helper.make_node(op, ["a"], ["y"])], [vinfo("a", np.float32, ["n", 5])], [vinfo("y", np.float32, None)])
    check_model(m, target, [{"a": rand(rng, (n, 5), np.float32, lo, hi)} for n, _ in BINDINGS], rtol=2e-6)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("op", ["Neg", "Abs", "Relu"])
def test_unary_int(op, dtype, target):
    rng = np.random.default_rng(6)
    m = make_model([helper.make_node(op, ["a"], ["y"])], [vinfo("a", dtype, ["n", 5])], [vinfo("y", dtype, None)])
    check_model(m, target, [{"a": rand(rng, (n, 5), dtype, -9, 9)} for n, _ in BINDINGS])


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_hard_sigmoid_attributes(dtype, target):
    rng = np.random.default_rng(12)
    m = make_model([helper.make_node("HardSigmoid", ["a"], ["y"], alpha=0.3, beta=0.4)], [vinfo("a", dtype, ["n", 5])],
                   [vinfo("y", dtype, None)])
    check_model(m, target, [{"a": rand(rng, (n, 5), dtype, -5, 5)} for n, _ in BINDINGS], rtol=1e-3 if dtype == np.float16 else 2e-6)


def test_leaky_relu(target):
    rng = np.random.default_rng(7)
    m = make_model([helper.make_node("LeakyRelu", ["a"], ["y"], alpha=0.2)], [vinfo("a", np.float32, ["n", 5])],
                   [vinfo("y", np.float32, None)])
    check_model(m, target, [{"a": rand(rng, (n, 5))} for n, _ in BINDINGS])


@pytest.mark.parametrize("ydtype", [np.float32, np.int64])
def test_pow_float_base(ydtype, target):
    rng = np.random.default_rng(8)
    m = make_model([helper.make_node("Pow", ["a", "b"], ["y"])],
                   [vinfo("a", np.float32, ["n", 5]), vinfo("b", ydtype, [5])], [vinfo("y", np.float32, None)])
    feeds = []
    for n, _ in BINDINGS:
        b = rand(rng, (5,), ydtype, -3, 4)
        feeds.append({"a": rand(rng, (n, 5), np.float32, 0.1, 4), "b": b})
    check_model(m, target, feeds, rtol=1e-5)


def _pow_by_constant(k: int, xdt, ydt, yshape, big, target):
    """Pow of an [n, 5] base by a constant k of shape ``yshape``, checked to compile to
    multiplications only (no pow kernel left), and feeds at each binding whose first row is
    -0, +-inf, NaN and ``big``."""
    rng = np.random.default_rng(16 + k)
    m = make_model([helper.make_node("Pow", ["a", "k"], ["y"])], [vinfo("a", xdt, ["n", 5])],
                   [vinfo("y", xdt, None)], [const("k", np.full(yshape, k, ydt))])
    _, _, module = lower_model(m, target)
    names = [f.name for f in module.functions]
    assert not any("pow" in n for n in names) and any("mul" in n for n in names), names
    special = np.array([-0.0, np.inf, -np.inf, np.nan, big], xdt)
    feeds = [{"a": np.concatenate([special[None], rand(rng, (n - 1, 5), xdt, -4, 4)]) if n else rand(rng, (0, 5), xdt)}
             for n, _ in BINDINGS]
    return m, feeds


@pytest.mark.parametrize("xdt,ydt,yshape", [(np.float32, np.float32, []), (np.float32, np.int64, [1]),
                                             (np.float16, np.float16, [1, 1]), (np.float64, np.float32, [])])
def test_pow_const_two_is_a_square(xdt, ydt, yshape, target):
    """Pow by a constant 2 compiles to x * x (no pow kernel is left), which equals the
    reference's correctly rounded square, with -0, infinities, NaN and overflow."""
    big = {np.float32: 3e38, np.float16: 300.0, np.float64: 1e200}[xdt]  # its square overflows
    m, feeds = _pow_by_constant(2, xdt, ydt, yshape, big, target)
    check_model(m, target, feeds, rtol=0, atol=0)


@pytest.mark.parametrize("xdt,ydt,yshape", [(np.float32, np.float32, []), (np.float32, np.int64, [1]),
                                             (np.float16, np.float16, [1, 1]), (np.float64, np.float64, [])])
def test_pow_const_three_is_a_cube(xdt, ydt, yshape, target):
    """Pow by a constant 3 compiles to x * x * x (no pow kernel is left): within two
    roundings of numpy's power in float64, with -0, infinities, NaN and overflow exact."""
    big = {np.float32: 1e13, np.float16: 50.0, np.float64: 1e103}[xdt]  # its cube overflows
    m, feeds = _pow_by_constant(3, xdt, ydt, yshape, -big, target)
    model = build(m, target)
    eps = np.finfo(xdt).eps
    for f in feeds:
        got = model.run(f)["y"]
        with np.errstate(over="ignore"):
            want = np.power(f["a"].astype(np.float64), 3).astype(xdt)
        np.testing.assert_allclose(got, want, rtol=2 * eps, atol=0, equal_nan=True)
        known = ~np.isnan(want)  # -0 stays -0, -inf -inf (a NaN's sign is its own)
        assert (np.signbit(got[known]) == np.signbit(want[known])).all()


def test_pow_const_two_of_a_scalar_base_broadcasts(target):
    """A rank-0 base and an exponent of shape [1] give shape [1]: that Pow stays a Pow."""
    m = make_model([helper.make_node("Pow", ["a", "two"], ["y"])], [vinfo("a", np.float32, [])],
                   [vinfo("y", np.float32, None)], [const("two", np.full([1], 2.0, np.float32))])
    _, _, module = lower_model(m, target)
    assert any("pow" in f.name for f in module.functions), [f.name for f in module.functions]
    check_model(m, target, [{"a": np.array(1.5, np.float32)}], rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_pow_int(dtype, target):
    rng = np.random.default_rng(9)
    m = binary_model("Pow", dtype, dtype, ("n", 5), (5,))
    check_model(m, target, [{"a": rand(rng, (n, 5), dtype, -4, 5), "b": rand(rng, (5,), dtype, 0, 6)}
                            for n, _ in BINDINGS])


def test_variadic_max_min(target):
    rng = np.random.default_rng(10)
    nodes = [helper.make_node("Max", ["a", "b", "c"], ["mx"]), helper.make_node("Min", ["a", "b", "c"], ["mn"])]
    m = make_model(nodes, [vinfo("a", np.float32, ["n", 5]), vinfo("b", np.float32, [5]), vinfo("c", np.float32, ["n", 1])],
                   [vinfo("mx", np.float32, None), vinfo("mn", np.float32, None)])
    check_model(m, target, [{"a": rand(rng, (n, 5)), "b": rand(rng, (5,)), "c": rand(rng, (n, 1))} for n, _ in BINDINGS])


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_where(dtype, target):
    rng = np.random.default_rng(11)
    m = make_model([helper.make_node("Where", ["c", "a", "b"], ["y"])],
                   [vinfo("c", np.bool_, ["n", 1]), vinfo("a", dtype, ["n", 5]), vinfo("b", dtype, [5])],
                   [vinfo("y", dtype, None)])
    check_model(m, target, [{"c": rand(rng, (n, 1), np.bool_), "a": rand(rng, (n, 5), dtype), "b": rand(rng, (5,), dtype)}
                            for n, _ in BINDINGS])


CAST_TYPES = [np.float32, np.int32, np.int64, np.bool_]


@pytest.mark.parametrize("src", CAST_TYPES)
@pytest.mark.parametrize("dst", CAST_TYPES)
def test_cast(src, dst, target):
    rng = np.random.default_rng(12)
    m = make_model([helper.make_node("Cast", ["a"], ["y"], to=helper.np_dtype_to_tensor_dtype(np.dtype(dst)))],
                   [vinfo("a", src, ["n", 5])], [vinfo("y", dst, None)])
    check_model(m, target, [{"a": rand(rng, (n, 5), src, -100, 100)} for n, _ in BINDINGS])


@pytest.mark.parametrize("bounds", ["both", "min", "max", "none"])
def test_clip(bounds, target):
    rng = np.random.default_rng(13)
    inputs = ["a", "lo" if bounds in ("both", "min") else "", "hi" if bounds in ("both", "max") else ""]
    while inputs and not inputs[-1]:
        inputs.pop()
    inits = [const("lo", np.array(-1.0, np.float32)), const("hi", np.array(1.5, np.float32))]
    m = make_model([helper.make_node("Clip", inputs, ["y"])], [vinfo("a", np.float32, ["n", 5])],
                   [vinfo("y", np.float32, None)], [i for i in inits if i.name in inputs])
    check_model(m, target, [{"a": rand(rng, (n, 5))} for n, _ in BINDINGS])


def test_clip_runtime_bounds_int(target):
    rng = np.random.default_rng(14)
    m = make_model([helper.make_node("Clip", ["a", "lo", "hi"], ["y"])],
                   [vinfo("a", np.int64, ["n", 5]), vinfo("lo", np.int64, []), vinfo("hi", np.int64, [])],
                   [vinfo("y", np.int64, None)])
    check_model(m, target, [{"a": rand(rng, (n, 5), np.int64, -9, 9), "lo": np.array(-2), "hi": np.array(n)}
                            for n, _ in BINDINGS])


def test_identity(target):
    rng = np.random.default_rng(15)
    m = make_model([helper.make_node("Identity", ["a"], ["t"]), helper.make_node("Add", ["t", "a"], ["y"])],
                   [vinfo("a", np.float32, ["n", 5])], [vinfo("y", np.float32, None), vinfo("t", np.float32, None)])
    check_model(m, target, [{"a": rand(rng, (n, 5))} for n, _ in BINDINGS])


def test_broadcast_two_symbols(target):
    """[n, 1] + [1, m] and [n, m] + [m]: the output's dims are symbolic broadcasts."""
    rng = np.random.default_rng(16)
    m = make_model([helper.make_node("Add", ["a", "b"], ["y"]), helper.make_node("Mul", ["y", "c"], ["z"])],
                   [vinfo("a", np.float32, ["n", 1]), vinfo("b", np.float32, [1, "m"]), vinfo("c", np.float32, ["m"])],
                   [vinfo("z", np.float32, None)])
    check_model(m, target, [{"a": rand(rng, (n, 1)), "b": rand(rng, (1, k)), "c": rand(rng, (k,))}
                            for n, k in [(2, 3), (4, 1), (1, 6)]])


def test_broadcast_undecided_symbols(target):
    """a: [p], b: [q] — whether p or q is 1 is only known at run time."""
    rng = np.random.default_rng(17)
    m = make_model([helper.make_node("Sub", ["a", "b"], ["y"])],
                   [vinfo("a", np.float32, ["p"]), vinfo("b", np.float32, ["q"])], [vinfo("y", np.float32, None)])
    check_model(m, target, [{"a": rand(rng, (p,)), "b": rand(rng, (q,))} for p, q in [(4, 4), (1, 6), (6, 1), (1, 1)]])


@pytest.mark.parametrize("attr,value", [("value", np.array([[1.5, -2.0]], np.float32)),
                                        ("value", np.array([3, 4], np.int64)),
                                        ("value_float", 2.5), ("value_ints", [1, 2])])
def test_constant(attr, value, target):
    """Constant feeds a kernel (so it is materialized in the module) next to a symbolic input."""
    import onnx
    arr = np.asarray(value, np.float32 if attr.startswith("value_float") else None)
    kw = {attr: onnx.numpy_helper.from_array(value, "v") if attr == "value" else value}
    dt = arr.dtype.type if attr == "value" else (np.float32 if "float" in attr else np.int64)
    m = make_model([helper.make_node("Constant", [], ["c"], **kw), helper.make_node("Add", ["x", "c"], ["y"])],
                   [vinfo("x", dt, ["n", arr.shape[-1] if arr.ndim else 1])], [vinfo("y", dt, None)])
    rng = np.random.default_rng(18)
    check_model(m, target, [{"x": rand(rng, (n, arr.shape[-1] if arr.ndim else 1), dt)} for n in (1, 4)])
