"""tests/test_conformance_families.py's check on the native target, in a file of its own so
that the two targets run on different workers (`--dist loadfile`)."""
import pytest

from test_conformance_families import cases, every_passing_case  # noqa: F401  (cases: the fixture)


@pytest.mark.parametrize("target", ["native"])
def test_every_passing_case(target, cases, tmp_path, tier):  # noqa: F811
    every_passing_case(target, cases, tmp_path, tier)
