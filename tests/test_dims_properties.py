"""Property tests for the dim algebra: whatever canonical form an expression takes, it
evaluates like the plain integer arithmetic it was built from, and equal polynomials built
in different orders are the same object."""
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.ir import dims as D

SCOPE = D.SymbolScope()
SYMS = [SCOPE.get(n) for n in ("n", "m", "k")]

# an expression tree: ("sym", i) | ("int", v) | (op, left, right) | (op, child, const)
leaf = st.one_of(st.tuples(st.just("sym"), st.integers(0, 2)), st.tuples(st.just("int"), st.integers(-6, 12)))


def extend(children):
    return st.one_of(
        st.tuples(st.sampled_from(["add", "sub", "mul", "min", "max", "ifzero"]), children, children),
        st.tuples(st.sampled_from(["floordiv", "mod"]), children, st.integers(1, 7)),
    )


trees = st.recursive(leaf, extend, max_leaves=10)


def build(t):
    kind = t[0]
    if kind == "sym":
        return SYMS[t[1]]
    if kind == "int":
        return t[1]
    a = build(t[1])
    if kind in ("floordiv", "mod"):
        return (D.floordiv if kind == "floordiv" else D.mod)(a, t[2])
    b = build(t[2])
    return {"add": D.add, "sub": lambda x, y: D.add(x, D.mul(y, -1)), "mul": D.mul,
            "min": D.minimum, "max": D.maximum, "ifzero": D.ifzero}[kind](a, b)


def direct(t, env):
    kind = t[0]
    if kind == "sym":
        return env[t[1]]
    if kind == "int":
        return t[1]
    a = direct(t[1], env)
    if kind == "floordiv":
        return a // t[2]
    if kind == "mod":
        return a % t[2]
    b = direct(t[2], env)
    return {"add": a + b, "sub": a - b, "mul": a * b, "min": min(a, b), "max": max(a, b),
            "ifzero": a if a != 0 else b}[kind]


@settings(max_examples=300, deadline=None)
@given(trees, st.lists(st.integers(0, 20), min_size=3, max_size=3))
def test_canonical_form_evaluates_like_integers(tree, values):
    expr = build(tree)
    env = {s.atom(): v for s, v in zip(SYMS, values)}
    assert D.evaluate(expr, env) == direct(tree, values)


@settings(max_examples=200, deadline=None)
@given(trees, st.lists(st.integers(0, 20), min_size=3, max_size=3))
def test_bounds_contain_every_value(tree, values):
    expr = build(tree)
    lo, hi = D.bounds(expr)
    v = D.evaluate(expr, {s.atom(): x for s, x in zip(SYMS, values)})
    assert lo <= v and (hi is None or v <= hi)


@settings(max_examples=200, deadline=None)
@given(trees, trees, trees)
def test_ring_laws_give_identical_objects(a, b, c):
    x, y, z = build(a), build(b), build(c)
    assert D.add(x, y) is D.add(y, x) or D.add(x, y) == D.add(y, x)
    assert D.mul(x, y) is D.mul(y, x) or D.mul(x, y) == D.mul(y, x)
    assert D.mul(D.add(x, y), z) == D.add(D.mul(x, z), D.mul(y, z))
