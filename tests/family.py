"""One module per op family: the cases a test file checks with :func:`util.check_model`,
compiled together once per target and process.

Compiling is what a test of one op costs (import, LLVM O3, the linker and a load: about 0.3 s
a module, where running it costs microseconds), so the cases of a file are merged into one
ONNX model, each case's graph beside the others under a prefix of its own (value names, node
names and symbolic dims alike, so no two cases share a dim and the importer ties nothing
across them). A case is still its own pytest test, named as before, compared with the
reference of its own unmerged model.

How a file's cases are known before the first of them runs: as its first test starts, the
test functions of its file are *recorded*: each that calls
``check_model`` (itself or through a helper of the suite) is called with its parameters
(tests whose arguments are all parameters, ``target`` included) while
``check_model`` only notes its model, feeds and options and hands back a stand-in; using the
stand-in, or ``build`` (a test that compiles by itself), ends the recording, and so does any
exception, keeping the calls noted so far. A test whose recording fails with pytest's "DID NOT
RAISE" records nothing: it wraps a call that must fail. Then, when the test runs for real, a
``check_model`` call whose model and feeds are byte for byte the recorded ones reads its
outputs from its family's module; any other call compiles a module of its own, as before.
A test file's random generators at module level (``RNG = np.random.default_rng(7)``), which
every test draws from in turn, are put back as each test starts where they were when it was
recorded, so that it draws the same models and feeds.

A family is the recorded cases of one file with the same target, opsets and compile options,
at most :data:`MAX_CASES` of them. Its module runs once per feed set (each case fed its k-th
set, its last again when it has fewer). If the family fails to compile or to run, it warns and
each of its cases compiles alone, so a failure is always reported by the case that has it,
exactly as without families. ``SYMWASM_TEST_FAMILIES=0`` turns families off.
"""
from __future__ import annotations

import dataclasses
import inspect
import os
import types
import warnings
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import onnx
import pytest
from onnx import helper

MAX_CASES = 120  # a family's cases: one failing case makes all of them compile alone
ENABLED = os.environ.get("SYMWASM_TEST_FAMILIES", "1") != "0"


class _Stop(BaseException):
    """Ends a recording (a BaseException, so ``pytest.raises(Exception)`` lets it through)."""


@dataclasses.dataclass
class Case:
    model: onnx.ModelProto
    target: str
    feeds: Sequence[Mapping[str, np.ndarray]]
    compile_kw: Mapping[str, Any]
    tag: str = ""  # the prefix of its names in its family's model

    @property
    def key(self) -> tuple:
        return (self.target, tuple((o.domain, o.version) for o in self.model.opset_import),
                self.model.ir_version, repr(sorted(self.compile_kw.items())))


def _same_feeds(a: Sequence[Mapping[str, np.ndarray]], b: Sequence[Mapping[str, np.ndarray]]) -> bool:
    if len(a) != len(b):
        return False
    for fa, fb in zip(a, b):
        if fa.keys() != fb.keys():
            return False
        for name in fa:
            x, y = np.asarray(fa[name]), np.asarray(fb[name])
            if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
                return False
    return True


def _prefix_dims(graph: onnx.GraphProto, prefix: str) -> None:
    """Every symbolic dim of ``graph`` (and of its subgraphs) renamed ``prefix + name``."""
    for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
            for d in vi.type.tensor_type.shape.dim:
                if d.HasField("dim_param"):
                    d.dim_param = prefix + d.dim_param
    for node in graph.node:
        for a in node.attribute:
            if a.HasField("g"):
                _prefix_dims(a.g, prefix)
            for g in a.graphs:
                _prefix_dims(g, prefix)


def _prefix_names(graph: onnx.GraphProto, prefix: str) -> None:
    """Every value and node name of ``graph`` and its subgraphs renamed ``prefix + name``,
    a subgraph's reads of the enclosing graph's values too (onnx's compose.add_prefix_graph
    leaves those, so a branch reading an outer initializer lost it)."""
    def named(n: str) -> str:
        return prefix + n if n else n
    for node in graph.node:
        node.name = named(node.name)
        node.input[:] = [named(i) for i in node.input]
        node.output[:] = [named(o) for o in node.output]
        for a in node.attribute:
            if a.HasField("g"):
                _prefix_names(a.g, prefix)
            for g in a.graphs:
                _prefix_names(g, prefix)
    for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
        vi.name = named(vi.name)
    for t in graph.initializer:
        t.name = named(t.name)
    for sp in graph.sparse_initializer:
        sp.values.name = named(sp.values.name)
        sp.indices.name = named(sp.indices.name)


def merge(cases: Sequence[Case]) -> onnx.ModelProto:
    """One model holding every case's graph under its tag."""
    first = cases[0].model
    merged = helper.make_graph([], "family", [], [])
    for case in cases:
        g = onnx.GraphProto()
        g.CopyFrom(case.model.graph)
        for i, node in enumerate(g.node):
            if not node.name:  # so an error names the case: c3_Add_0
                node.name = f"{node.op_type}_{i}"
        _prefix_names(g, case.tag)
        _prefix_dims(g, case.tag)
        for part in ("node", "input", "output", "initializer", "sparse_initializer", "value_info"):
            getattr(merged, part).extend(getattr(g, part))
    model = helper.make_model(merged, opset_imports=list(first.opset_import))
    model.ir_version = first.ir_version
    return model


# compile options that name dims or nodes: in a family each case's names carry its tag
NAMED_KW = ("binds", "ranges", "routes")


def merged_kw(cases: Sequence[Case]) -> dict[str, Any]:
    """The family's compile options (its cases share theirs): the options of
    :data:`NAMED_KW` hold each case's names under its tag."""
    kw = dict(cases[0].compile_kw)
    for key in NAMED_KW:
        if kw.get(key):
            kw[key] = {c.tag + name: v for c in cases for name, v in kw[key].items()}
    return kw


class Family:
    """Cases compiled into one module; their outputs, computed on first use."""

    def __init__(self, cases: Sequence[Case]):
        self.cases = list(cases)
        for i, c in enumerate(self.cases):
            c.tag = f"c{i}_"  # prefix-free, and a name ONNX function bodies can parse
        self.outputs: dict[int, list[dict[str, np.ndarray]]] | None = None
        self.failed = False

    def run(self, build: Callable) -> None:
        if self.outputs is not None or self.failed:
            return
        try:
            first = self.cases[0]
            module = build(merge(self.cases), first.target, **merged_kw(self.cases))
            got: dict[int, list[dict[str, np.ndarray]]] = {id(c): [] for c in self.cases}
            taken = {i.name for i in module.inputs}  # a graph input no node reads is not the module's
            for k in range(max(len(c.feeds) for c in self.cases)):
                feeds = {c.tag + name: v for c in self.cases for name, v in c.feeds[min(k, len(c.feeds) - 1)].items()
                         if c.tag + name in taken}
                out = module.run(feeds)
                for c in self.cases:
                    if k < len(c.feeds):
                        got[id(c)].append({o.name: out[c.tag + o.name] for o in c.model.graph.output})
            self.outputs = got
        except Exception as e:  # each case compiles alone and reports what it has
            self.failed = True
            warnings.warn(f"a family of {len(self.cases)} cases on {first.target} failed ({type(e).__name__}: "
                          f"{str(e)[:300]}); its cases compile one module each")


def families(cases: Sequence[Case]) -> list[Family]:
    """``cases`` as families: those of one target, opsets and compile options together, at
    most :data:`MAX_CASES` to a family."""
    groups: dict[tuple, list[Case]] = {}
    for c in cases:
        groups.setdefault(c.key, []).append(c)
    return [Family(members[start:start + MAX_CASES])
            for members in groups.values() for start in range(0, len(members), MAX_CASES)]


class _Recorder:
    def __init__(self):
        self.cases: list[Case] = []


_recording: _Recorder | None = None
_done: set[str] = set()  # the test files recorded in this process
_by_item: dict[str, list[tuple[Case, Family]]] = {}  # nodeid -> its recorded calls, in order
_calls: dict[str, int] = {}  # nodeid -> check_model calls made so far in its real run
_rng_at: dict[str, list[tuple[np.random.Generator, dict]]] = {}  # nodeid -> its file's generators as recorded
current: Any = None  # the pytest item running (set by conftest)
items: list = []  # the session's items (set by conftest)


def recording() -> _Recorder | None:
    return _recording


def record(model: onnx.ModelProto, target: str, feeds: Sequence[Mapping[str, np.ndarray]],
           compile_kw: Mapping[str, Any]) -> Any:
    """``check_model`` while recording: note the case, hand back a stand-in."""
    _recording.cases.append(Case(model, target, [dict(f) for f in feeds], dict(compile_kw)))
    return _StandIn()


class _StandIn:
    """What ``check_model`` returns while recording: using it ends the recording."""

    def __getattr__(self, name):
        raise _Stop


_TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


def _is_check_model(obj) -> bool:
    """Whether ``obj`` is tests/util.py's check_model (not a test file's own of that name,
    as tests/test_exporters.py has: recording its tests would compile their whole models)."""
    return isinstance(obj, types.FunctionType) and obj.__name__ == "check_model" and obj.__module__ == "util"


def _reaches_check_model(fn) -> bool:
    """Whether ``fn``'s code, or a function of the test suite it names, calls util's
    check_model: only such tests are recorded (a recording runs the test's code, which may
    compile or write files by itself)."""
    seen: set = set()
    stack = [(fn.__code__, fn.__globals__)]
    while stack:
        code, names = stack.pop()
        if code in seen:
            continue
        seen.add(code)
        if "check_model" in code.co_names and _is_check_model(names.get("check_model")):
            return True
        stack += [(c, names) for c in code.co_consts if isinstance(c, types.CodeType)]
        for name in code.co_names:
            obj = names.get(name)
            if isinstance(obj, types.FunctionType) and obj.__code__.co_filename.startswith(_TESTS_DIR) \
                    and obj.__name__ not in ("build", "lower_model"):
                stack.append((obj.__code__, obj.__globals__))
    return False


def _generators(module: types.ModuleType) -> list[np.random.Generator]:
    """A test file's random generators at module level (``RNG = np.random.default_rng(7)``)."""
    return [v for v in vars(module).values() if isinstance(v, np.random.Generator)]


def _states(gens: Sequence[np.random.Generator]) -> list[tuple[np.random.Generator, dict]]:
    return [(g, g.bit_generator.state) for g in gens]


def _restore(states: Sequence[tuple[np.random.Generator, dict]]) -> None:
    for g, state in states:
        g.bit_generator.state = state


def begin(item) -> None:
    """A test starts (tests/conftest.py): its file's cases are recorded first, if not yet,
    and the file's generators are put back where they were when this test was recorded,
    so that it draws the models and feeds of its recording (which a file's generator,
    drawn from by every test before it, would not give it otherwise)."""
    module = getattr(item, "module", None)
    if not ENABLED or module is None:
        return
    if module.__name__ not in _done:
        _record_file(module)
    if item.nodeid in _rng_at:
        _restore(_rng_at[item.nodeid])


def _record_file(module: types.ModuleType) -> None:
    _done.add(module.__name__)
    start = _states(_generators(module))
    cases_by_item: dict[str, list[Case]] = {}
    try:
        _record_items(module.__name__, cases_by_item)
    finally:  # the file's first test draws from its generators as if nothing had been recorded
        _restore(start)
    call_of = {id(c): (nodeid, i) for nodeid, cases in cases_by_item.items() for i, c in enumerate(cases)}
    for family in families([c for cases in cases_by_item.values() for c in cases]):
        for c in family.cases:
            nodeid, i = call_of[id(c)]
            calls = _by_item.setdefault(nodeid, [])
            calls.extend([None] * (i + 1 - len(calls)))
            calls[i] = (c, family)


def _record_items(module_name: str, cases_by_item: dict[str, list[Case]]) -> None:
    """Each test of the file that reaches check_model called in recording mode: its cases
    into ``cases_by_item``, its file's generators' states as it started into ``_rng_at``."""
    global _recording
    for item in items:
        fn = getattr(item, "obj", None)
        callspec = getattr(item, "callspec", None)
        if fn is None or getattr(item, "module", None) is None or item.module.__name__ != module_name:
            continue
        params = callspec.params if callspec else {}
        try:
            names = list(inspect.signature(fn).parameters)
        except (TypeError, ValueError):
            continue
        if "target" not in names or any(n not in params for n in names) or not _reaches_check_model(fn):
            continue
        _recording = _Recorder()
        gens = _states(_generators(item.module))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fn(**{n: params[n] for n in names})
            clean = True
        except pytest.fail.Exception:  # "DID NOT RAISE": a call that must fail is not a case
            clean = False
        except BaseException:  # the stand-in used, or an assertion on it: the calls so far are cases
            clean = True
        finally:
            rec, _recording = _recording, None
        if clean and rec.cases:
            cases_by_item[item.nodeid] = rec.cases
            _rng_at[item.nodeid] = gens


def outputs_for(model: onnx.ModelProto, target: str, feeds: Sequence[Mapping[str, np.ndarray]],
                compile_kw: Mapping[str, Any], build: Callable) -> list[dict[str, np.ndarray]] | None:
    """The outputs of this ``check_model`` call from its family's module, or None when the
    call was not recorded as it is made now (or its family failed)."""
    if not ENABLED or current is None:
        return None
    nodeid = current.nodeid  # its file was recorded as it started (begin)
    i = _calls.get(nodeid, 0)
    _calls[nodeid] = i + 1
    recorded = _by_item.get(nodeid, [])
    if i >= len(recorded) or recorded[i] is None:
        return None
    case, family = recorded[i]
    if (case.target != target or dict(compile_kw) != case.compile_kw or not _same_feeds(case.feeds, feeds)
            or case.model.SerializeToString() != model.SerializeToString()):
        return None
    family.run(build)
    return None if family.failed else family.outputs[id(case)]


class Later:
    """The module a family's case would have compiled alone, compiled on first use."""

    def __init__(self, make: Callable[[], Any]):
        self._make, self._model = make, None

    def __getattr__(self, name):
        if self._model is None:
            self._model = self._make()
        return getattr(self._model, name)
