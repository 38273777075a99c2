import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# models load on one thread unless a test asks for more (tests/test_threads.py): the suite runs
# one test per core already, and a pool's waiting threads spin a while before they sleep
os.environ.setdefault("SYMWASM_THREADS", "1")

TARGETS = ("wasm32", "native")


@pytest.fixture(params=TARGETS)
def target(request) -> str:
    """Every op test runs on both targets."""
    return request.param


TIERS = ("fast", "check", "full")

# test files of whole models that share nothing (no op families): under xdist their tests go to
# whichever worker is free, one by one (pytest_xdist_make_scheduler)
SPREAD = {"test_exporters.py", "test_zoo.py", "test_light_models.py", "test_real_regressions.py"}


@pytest.hookimpl(optionalhook=True)  # xdist's hook: unknown where xdist is not loaded (-p no:xdist)
def pytest_xdist_make_scheduler(config, log):
    """The Makefile's ``-n 2 --dist loadfile``, but for :data:`SPREAD`: each other file runs
    whole on one worker, which builds its op families once (tests/family.py), while the tests
    of whole models are spread over the workers. (xdist's ``loadgroup`` would do it with marks,
    but under pytest 9 its group never reaches the node ids, so every test went its own way and
    both workers built every family.)"""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FilesAndSpread(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return nodeid if path.rsplit("/", 1)[-1] in SPREAD else path

    return FilesAndSpread(config, log)


def pytest_addoption(parser):
    parser.addoption("--tier", choices=TIERS, default="full",
                     help="fast: `make test`'s tier, one parametrization of each test function per target "
                          "and nothing marked `check`; check: `make check`'s (CI), the fast tier and every "
                          "test marked `check`; full (the default; `make check-all`): every test and parametrization")
    parser.addoption("--check-facts", choices=TARGETS, default=None, metavar="TARGET",
                     help="the tests marked `facts` (real graphs) that name this target, or none, compile with "
                          "their facts checked at run time (SYMWASM_CHECK_FACTS=1): `make check` checks them on "
                          "wasm32 in its one pass, while native compiles them plainly")


def pytest_collection_modifyitems(session, config, items):
    """The tiers. The fast one (``--tier fast``) is the breadth of the suite, not its depth:
    every test function runs on each target it names (wasm32, native) with its first
    parametrization; of a kernel test's CPU levels and wasm32 variants (util.kernel_targets)
    the first of each target runs, all of them only where a file is marked ``every_level``
    (tests/test_plans.py: every kernel route at every level); the conformance families check
    a sample of each op's cases. ``check`` adds the tests marked ``check`` (whole models,
    installs, threads, cancellation, browsers, fuzz slices), each parametrization of them.
    ``full`` is every test and parametrization, and every conformance case."""
    import family
    tier = config.getoption("--tier")
    if tier != "full":
        keep, drop, seen = [], [], set()
        for item in items:
            target = _target_of(item, whole=bool(item.get_closest_marker("every_level")))
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


def _target_of(item, whole: bool = False) -> str | None:
    """The base target a test is parametrized with (wasm32, native), or None; ``whole``: the
    parameter as given (``native@x86-64-v3``, ``wasm32-relaxed``)."""
    from util import split_target
    params = getattr(item, "callspec", None)
    target = params.params.get("target") if params else None
    if target is None or whole:
        return target
    return split_target(str(target))[0]


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
def _checked_facts(request, monkeypatch):
    """``--check-facts TARGET``: a test marked ``facts`` that names that target (or none)
    compiles with its facts checked."""
    on = request.config.getoption("--check-facts")
    if on and request.node.get_closest_marker("facts") and _target_of(request.node) in (on, None):
        monkeypatch.setenv("SYMWASM_CHECK_FACTS", "1")


@pytest.fixture(autouse=True)
def _plain_program(request, monkeypatch):
    """A test marked ``plain_program`` asserts on what a plain compile makes: under
    ``SYMWASM_CHECK_FACTS=1`` it compiles without the fact checks (the rest of the suite
    checks the facts of the same ops)."""
    if request.node.get_closest_marker("plain_program"):
        monkeypatch.delenv("SYMWASM_CHECK_FACTS", raising=False)
