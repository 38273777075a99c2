"""The three tiers select what tests/conftest.py says: fast is every test function once per
target (wasm32, native), with every CPU level only in files marked ``every_level``; check adds
the tests marked ``check``; full is everything. Read from pytest's own collection of three
files: a kernel test at every level (test_conv_gemm.py), the file marked every_level
(test_plans.py) and one marked check (test_instances.py). Then how xdist's workers share the
files, and which tests check their facts under ``--check-facts``, from pytest runs in which
no test runs."""
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

pytestmark = pytest.mark.check  # make check and the full tier: pytest run in pytest, 20 s of the fast tier's
ROOT = Path(__file__).resolve().parents[1]
FILES = ["tests/test_conv_gemm.py", "tests/test_plans.py", "tests/test_instances.py"]


def _collected(tier: str) -> list[str]:
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                        "-p", "no:xdist", "--tier", tier, *FILES], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return [line for line in r.stdout.splitlines() if "::" in line]


@pytest.fixture(scope="module")
def tiers() -> dict[str, list[str]]:
    return {t: _collected(t) for t in ("fast", "check", "full")}


def _function(nodeid: str) -> str:
    return nodeid.split("[")[0]


def _target(nodeid: str) -> str:
    """The target a test id names first: ``[native@x86-64-v2-3x3_pad1]`` -> native."""
    return re.split(r"[-@\]]", nodeid.partition("[")[2])[0]


def test_each_tier_holds_the_one_before(tiers):
    assert set(tiers["fast"]) < set(tiers["check"]) < set(tiers["full"])


def test_check_adds_exactly_the_tests_marked_check(tiers):
    added = set(tiers["check"]) - set(tiers["fast"])
    assert added and all(n.startswith("tests/test_instances.py") for n in added)
    assert not any(n.startswith("tests/test_instances.py") for n in tiers["fast"])
    assert {n for n in tiers["full"] if n.startswith("tests/test_instances.py")} == added


def test_fast_runs_every_function_once_per_target(tiers):
    per_function: dict[str, list[str]] = defaultdict(list)
    for n in tiers["fast"]:
        per_function[_function(n)].append(n)
    full_functions = {_function(n) for n in tiers["full"] if not n.startswith("tests/test_instances.py")}
    assert set(per_function) == full_functions, "every test function is in the fast tier"
    # test_conv_gemm's kernel tests: the first level of each target, wasm32 and native
    paths = per_function["tests/test_conv_gemm.py::test_conv_paths"]
    assert len(paths) == 2 and {_target(n) for n in paths} == {"wasm32", "native"}, paths


def test_every_level_runs_in_the_fast_tier_where_marked(tiers):
    fast = [n for n in tiers["fast"] if n.startswith("tests/test_plans.py::test_every_conv_route_asked_for_by_name")]
    full = [n for n in tiers["full"] if n.startswith("tests/test_plans.py::test_every_conv_route_asked_for_by_name")]
    assert fast == full and len(full) >= 3, "every CPU level and wasm32 variant runs"
    gemm_fast = [n for n in tiers["fast"] if n.startswith("tests/test_conv_gemm.py::test_conv_paths")]
    gemm_full = [n for n in tiers["full"] if n.startswith("tests/test_conv_gemm.py::test_conv_paths")]
    assert len(gemm_fast) < len(gemm_full)


LIST_PLUGIN = """
import os
import pytest

WHEN, VAR = os.environ["LISTED_WHEN"], os.environ["LISTED_VAR"]


def _list(item):  # the test and the variable as it sees it, then nothing runs
    with open(os.environ["LISTED_OUT"], "a") as f:
        f.write(f"{os.environ.get(VAR, '-')} {item.nodeid}\\n")
    pytest.skip("listed")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):  # before any fixture
    if WHEN == "setup":
        _list(item)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):  # after the fixtures
    _list(item)
"""


def _listed(tmp_path: Path, when: str, var: str, *args: str) -> dict[str, str]:
    """Each test of a check-tier pytest run of ``args`` -> the environment variable ``var`` as
    the test saw it before its fixtures (``when="setup"``) or after them (``"call"``); no test
    runs (tests/conftest.py's hooks and fixtures do)."""
    (tmp_path / "list_plugin.py").write_text(LIST_PLUGIN)
    out = tmp_path / "listed.txt"
    out.unlink(missing_ok=True)  # this run's lines only
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "LISTED_OUT": str(out), "LISTED_WHEN": when, "LISTED_VAR": var}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "list_plugin", "--tier",
                        "check", *args], cwd=ROOT, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return {n: v for v, n in (line.split(" ", 1) for line in out.read_text().splitlines())}


def test_files_run_whole_on_one_worker_but_whole_models_spread(tmp_path):
    """Under the Makefile's ``-n 2 --dist loadfile``, a file's tests run on one worker, which
    builds the file's op families once; those of a file of whole models (conftest.SPREAD) go
    to the two workers one by one."""
    two_workers = ("-n", "2", "--dist", "loadfile")
    plans = _listed(tmp_path, "setup", "PYTEST_XDIST_WORKER", *two_workers, "tests/test_plans.py")
    assert len(plans) > 10 and len(set(plans.values())) == 1, plans
    spread = _listed(tmp_path, "setup", "PYTEST_XDIST_WORKER", *two_workers, "tests/test_real_regressions.py")
    assert len(spread) > 2 and set(spread.values()) == {"gw0", "gw1"}, spread


def test_check_facts_on_one_target(tmp_path):
    """``--check-facts wasm32`` (make check): the real graphs' wasm32 tests and those naming no
    target compile with their facts checked, the native ones plainly."""
    seen = _listed(tmp_path, "call", "SYMWASM_CHECK_FACTS", "-p", "no:xdist", "--check-facts", "wasm32",
                   "tests/test_zoo.py")
    wasm = {n: v for n, v in seen.items() if "[wasm32" in n}
    native = {n: v for n, v in seen.items() if "[native" in n}
    neither = {n: v for n, v in seen.items() if n not in wasm and n not in native}
    assert wasm and set(wasm.values()) == {"1"}, wasm
    assert native and set(native.values()) == {"-"}, native
    assert neither and set(neither.values()) == {"1"}, neither
