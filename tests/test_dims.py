"""The dim algebra: canonical, interned expressions and their simplifications."""
import pytest

from toolkit.ir import dims as D


@pytest.fixture
def nm():
    s = D.SymbolScope()
    return s.get("n"), s.get("m")


def test_canonical_and_interned(nm):
    n, m = nm
    assert n * 10 is 10 * n
    assert n + m is m + n
    assert (n + 1) * (m + 2) is n * m + 2 * n + m + 2
    assert (n * m) * n is n * (m * n)
    assert str(10 * n) == "10*n"


def test_constants_are_ints(nm):
    n, _ = nm
    assert n - n == 0 and isinstance(n - n, int)
    assert (n + 3) - n == 3
    assert D.product([2, 3, 4]) == 24


def test_floordiv_mod(nm):
    n, m = nm
    assert D.floordiv(10 * n + 3, 5) is 2 * n
    assert D.floordiv(n, 1) is n
    assert D.mod(10 * n + 3, 5) == 3
    assert str(D.floordiv(n, 4)) == "(n // 4)"
    assert D.ceildiv(8 * n, 4) is 2 * n
    with pytest.raises(ValueError):
        D.floordiv(n, 0)


def test_div_exact(nm):
    n, m = nm
    assert D.div_exact(n * m * 256, m * 256) is n
    assert D.div_exact(6 * n, 3) is 2 * n
    assert str(D.div_exact(n, m)) == "(n / m)"


def test_min_max_with_bounds(nm):
    n, m = nm
    assert D.maximum(0, n) is n  # dims are never negative
    assert D.minimum(0, n) == 0
    assert D.maximum(n, n + 1) is n + 1
    assert D.minimum(n, m) is D.minimum(m, n)
    assert D.maximum(D.maximum(n, m), 3) is D.maximum(n, D.maximum(m, 3))


def test_bcast(nm):
    n, m = nm
    assert D.bcast(n, 1) is n and D.bcast(1, n) is n
    assert D.bcast(n, n) is n
    assert D.bcast(n, 10) == 10  # n must be 1 or 10: checked at run time
    assert D.bcast(n, m) is D.bcast(m, n)
    with pytest.raises(D.BroadcastError):
        D.bcast(3, 4)


def test_ranges():
    s = D.SymbolScope()
    seq = s.get("seq", lo=1, hi=512)
    assert D.bounds(2 * seq + 1) == (3, 1025)
    assert D.minimum(seq, 1000) is seq
    assert D.maximum(seq, 1) is seq


def test_evaluate_and_substitute(nm):
    n, m = nm
    e = D.floordiv(n * m + 7, 4) + D.maximum(n, m)
    env = {n.atom(): 5, m.atom(): 3}
    assert D.evaluate(e, env) == (5 * 3 + 7) // 4 + 5
    assert D.substitute(n * m, lambda s: 2 if s.name == "n" else None) is 2 * m
    assert D.free_symbols(e) == {n.atom(), m.atom()}


def test_fresh_symbols_are_named():
    s = D.SymbolScope()
    a, b = s.fresh("nonzero"), s.fresh("nonzero")
    assert str(a) == "nonzero_0" and str(b) == "nonzero_1"
    assert a.atom().kind == "data"
