import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGETS = ("wasm32", "native")


@pytest.fixture(params=TARGETS)
def target(request) -> str:
    """Every op test runs on both targets."""
    return request.param


TIERS = ("fast", "check", "full")


def pytest_addoption(parser):
    parser.addoption("--tier", choices=TIERS, default="full",
                     help="fast: `make test`'s tier, one parametrization of each test function per target "
                          "and nothing marked `check`; check: `make check`'s (CI), the fast tier and every "
                          "test marked `check`; full (the default; `make check-all`): every test and parametrization")


def pytest_collection_modifyitems(session, config, items):
    """The tiers. The fast one (``--tier fast``) is the breadth of the suite, not its depth:
    every test function runs on each target it names (wasm32, native) with its first
    parametrization; of a kernel test's CPU levels and wasm32 variants (util.kernel_targets)
    the first of each target runs, all of them only where a file is marked ``every_level``
    (tests/test_plans.py: every kernel route at every level); the conformance families check
    a sample of each op's cases. ``check`` adds the tests marked ``check`` (whole models,
    installs, threads, cancellation, browsers, fuzz slices), each parametrization of them.
    ``full`` is every test and parametrization, and every conformance case.

    Under ``--dist loadgroup`` (the Makefile's) a file's tests run on one worker, which builds
    its op families once (tests/family.py), unless the file is marked ``spread``: its tests are
    whole models that share nothing, and they go to whichever worker is free, one by one."""
    import family
    from util import split_target
    tier = config.getoption("--tier")
    if tier != "full":
        keep, drop, seen = [], [], set()
        for item in items:
            params = getattr(item, "callspec", None)
            target = params.params.get("target") if params else None
            if target is not None and not item.get_closest_marker("every_level"):
                target = split_target(str(target))[0]
            key = (item.path, getattr(item, "originalname", item.name), target)
            if item.get_closest_marker("check"):
                wanted = tier == "check"
            else:
                wanted = key not in seen
                seen.add(key)
            (keep if wanted else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
    family.items = items
    for item in items:
        if not item.get_closest_marker("spread"):
            item.add_marker(pytest.mark.xdist_group(item.path.name))


@pytest.fixture
def tier(request) -> str:
    """The tier running: ``fast`` (`make test`), ``check`` (`make check`, CI) or ``full``
    (`make check-all`)."""
    return request.config.getoption("--tier")


@pytest.fixture(autouse=True)
def _family_item(request):
    """The running test, for tests/family.py (which file's cases to record, which call is which)."""
    import family
    family.current = request.node
    family.begin(request.node)
    yield
    family.current = None


@pytest.fixture(autouse=True)
def _plain_program(request, monkeypatch):
    """A test marked ``plain_program`` asserts on what a plain compile makes: under
    ``SYMWASM_CHECK_FACTS=1`` it compiles without the fact checks (the rest of the suite
    checks the facts of the same ops)."""
    if request.node.get_closest_marker("plain_program"):
        monkeypatch.delenv("SYMWASM_CHECK_FACTS", raising=False)
