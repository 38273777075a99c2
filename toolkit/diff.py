"""``symwasm diff``: a model run through symwasm and through a reference (onnxruntime when it
is importable, onnx.reference otherwise) on the same inputs, and every output compared:
shape, dtype, largest absolute and relative error, and a verdict by tolerance.

With ``nodes``, a copy of the model lists every node's tensor outputs as graph outputs, on
both sides, so each intermediate value is compared too; walking the nodes in graph order
then names the first node whose result diverges while its inputs agree: the node to look at.

The reference is never a dependency of symwasm: onnxruntime is imported only here, when a
diff asks for it.
"""
from __future__ import annotations

import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

import numpy as np
import onnx
from onnx import helper, numpy_helper

# (rtol, atol) by the float's width: float32's (and float64's, whose kernels compute in
# float64 but whose references may round differently) are a few ulps of a short sum; the
# narrow floats are stored in 16 or 8 bits and lose that much more in every rounding
DEFAULT_TOLERANCE = {8: (1e-4, 1e-5), 4: (1e-4, 1e-5), 2: (1e-2, 1e-3), 1: (1.25e-1, 1e-2)}
REFERENCES = ("auto", "ort", "onnx")
STRINGS = ("alpha", "beta", "gamma", "", "delta epsilon")  # random text inputs draw from these


class DiffError(Exception):
    """What keeps a diff from running (bad usage, inputs that do not fit the model, a model
    symwasm or the reference cannot take): one line for the user; the CLI exits with 2."""


@dataclass
class InputSpec:
    """A model input as declared: numpy dtype and dims (an int, a symbol's name, or None
    for a dim with neither)."""

    name: str
    dtype: np.dtype
    shape: tuple


@dataclass
class Summary:
    """What a value holds, in short: shape, dtype, and its range and mean when numeric."""

    shape: tuple
    dtype: str
    min: float | None = None
    max: float | None = None
    mean: float | None = None

    @classmethod
    def of(cls, arr: np.ndarray) -> "Summary":
        s = cls(tuple(arr.shape), _dtype_name(arr))
        if arr.size and arr.dtype.kind not in "OUS":
            x = arr.astype(np.float64)
            x = x[~np.isnan(x)] if not np.isnan(x).all() else x  # the range of the numbers, NaN if none
            s.min, s.max, s.mean = float(x.min()), float(x.max()), float(x.mean())
        return s

    def text(self) -> str:
        out = f"{self.dtype}{_shape_text(self.shape)}"
        if self.min is not None:
            out += f" min {self.min:.4g} max {self.max:.4g} mean {self.mean:.4g}"
        return out


@dataclass
class Comparison:
    """One value on both sides. ``max_rel`` is over the reference's nonzero elements;
    ``why`` says what diverges (empty when ``ok``)."""

    name: str
    got_shape: tuple
    got_dtype: str
    want_shape: tuple
    want_dtype: str
    rtol: float
    atol: float
    max_abs: float | None = None
    max_rel: float | None = None
    ok: bool = True
    why: str = ""

    def to_json(self) -> dict:
        d = dict(self.__dict__)
        d["got_shape"], d["want_shape"] = list(self.got_shape), list(self.want_shape)
        return d


@dataclass
class Divergence:
    """The first node whose result diverges while its inputs agree."""

    node: str
    op: str
    index: int  # its position in the graph's node list
    value: Comparison
    inputs: dict[str, Summary]  # as symwasm saw them (they agree with the reference's)
    unchecked: list[str]  # inputs that could not be compared (not exposed)

    def to_json(self) -> dict:
        return {"node": self.node, "op": self.op, "index": self.index, "output": self.value.to_json(),
                "inputs": {k: s.__dict__ | {"shape": list(s.shape)} for k, s in self.inputs.items()},
                "unchecked_inputs": self.unchecked}


@dataclass
class NodeReport:
    """``diff --nodes``: how many node outputs were compared, which could not be exposed
    (and why), how many nodes diverge, and the first that does with agreeing inputs."""

    compared: int
    skipped: dict[str, str]  # value -> why
    diverging_nodes: int
    first: Divergence | None

    def to_json(self) -> dict:
        return {"compared": self.compared, "skipped": self.skipped, "diverging_nodes": self.diverging_nodes,
                "first_divergence": self.first.to_json() if self.first else None}


@dataclass
class DiffResult:
    model: str
    target: str
    reference: str  # "onnxruntime 1.32.0", "onnx.reference (onnx 1.19.0)"
    inputs: dict[str, Summary]
    inputs_from: str  # the .npz, "given" (arrays passed in), or "random, seed 0"
    binds: dict[str, int]
    outputs: list[Comparison]
    nodes: NodeReport | None = None
    run_error: str = ""  # symwasm's run failed where the reference's did not
    tolerance: str = ""  # how the tolerances were chosen, for the report

    @property
    def ok(self) -> bool:
        return not self.run_error and all(c.ok for c in self.outputs) and \
            (self.nodes is None or self.nodes.diverging_nodes == 0)

    def to_json(self) -> dict:
        """The result as JSON values; an infinite or NaN error or statistic is the string
        "inf", "-inf" or "nan" (JSON has no such numbers)."""
        return _json_numbers({"model": self.model, "target": self.target, "reference": self.reference,
                "binds": self.binds, "inputs_from": self.inputs_from,
                "inputs": {k: s.__dict__ | {"shape": list(s.shape)} for k, s in self.inputs.items()},
                "tolerance": self.tolerance, "ok": self.ok, "run_error": self.run_error or None,
                "outputs": [c.to_json() for c in self.outputs],
                "nodes": self.nodes.to_json() if self.nodes else None})

    def lines(self) -> list[str]:
        """The report as text: a header, a table of the outputs, the verdict, and with
        ``nodes`` the first diverging node."""
        binds = "".join(f", {k}={v}" for k, v in self.binds.items())
        out = [f"{self.model}: symwasm ({self.target}{binds}) against {self.reference}"]
        out.append(f"  inputs ({self.inputs_from}): "
                   + ", ".join(f"{k} {s.dtype}{_shape_text(s.shape)}" for k, s in self.inputs.items()))
        if self.run_error:
            out.append(f"DIVERGES: symwasm's run failed where the reference's did not: {self.run_error}")
            return out
        out += _table(self.outputs)
        bad = [c for c in self.outputs if not c.ok]
        out.append(f"{'outputs DIVERGE' if bad else 'outputs match'}: {len(self.outputs) - len(bad)} of "
                   f"{len(self.outputs)} within {self.tolerance}")
        if self.nodes is not None:
            out += self._node_lines()
        return out

    def _node_lines(self) -> list[str]:
        n = self.nodes
        skipped = ""
        if n.skipped:
            reasons: dict[str, list[str]] = {}
            for name, why in n.skipped.items():
                reasons.setdefault(why, []).append(name)
            skipped = f"; {len(n.skipped)} skipped (" + "; ".join(
                f"{why}: {', '.join(names[:4])}{', ...' if len(names) > 4 else ''}"
                for why, names in reasons.items()) + ")"
        out = [f"intermediate values: {n.compared} compared{skipped}"]
        if n.first is None:
            out.append("no node diverges")
            return out
        f = n.first
        c = f.value
        many = n.diverging_nodes != 1
        out.append(f"{n.diverging_nodes} node{'s diverge' if many else ' diverges'}; the first whose inputs "
                   f"agree is node {f.index} '{f.node}' ({f.op}), output '{c.name}':")
        out.append(f"  symwasm:   {c.got_dtype}{_shape_text(c.got_shape)}")
        out.append(f"  reference: {c.want_dtype}{_shape_text(c.want_shape)}")
        out.append(f"  {c.why}; max abs error {_num(c.max_abs)}, max rel error {_num(c.max_rel)} "
                   f"(rtol {c.rtol:g}, atol {c.atol:g})")
        for name, s in f.inputs.items():
            out.append(f"  input {name}: {s.text()}")
        if f.unchecked:
            out.append(f"  not compared (not exposed): {', '.join(f.unchecked)}")
        return out


def _json_numbers(x):
    if isinstance(x, float) and not np.isfinite(x):
        return str(x)
    if isinstance(x, dict):
        return {k: _json_numbers(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_json_numbers(v) for v in x]
    return x


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def _shape_text(shape) -> str:
    return f"({', '.join(map(str, shape))})" if len(shape) != 1 else f"({shape[0]},)"


def _dtype_name(arr: np.ndarray) -> str:
    return "string" if arr.dtype.kind in "OUS" else arr.dtype.name


def _table(rows: list[Comparison]) -> list[str]:
    cells = [("output", "shape", "dtype", "max abs", "max rel", "verdict")]
    for c in rows:
        shape = _shape_text(c.got_shape) if c.got_shape == c.want_shape else \
            f"{_shape_text(c.got_shape)} vs {_shape_text(c.want_shape)}"
        dtype = c.got_dtype if c.got_dtype == c.want_dtype else f"{c.got_dtype} vs {c.want_dtype}"
        cells.append((c.name, shape, dtype, _num(c.max_abs), _num(c.max_rel), "ok" if c.ok else f"DIVERGES: {c.why}"))
    widths = [max(len(r[i]) for r in cells) for i in range(5)]
    return ["  " + "  ".join(v.ljust(w) for v, w in zip(r, widths)) + "  " + r[5] for r in cells]


def load(model) -> onnx.ModelProto:
    """A model from a path, bytes or ModelProto."""
    if isinstance(model, onnx.ModelProto):
        return model
    try:
        return onnx.load_from_string(model) if isinstance(model, bytes) else onnx.load(str(model))
    except (OSError, onnx.onnx_cpp2py_export.checker.ValidationError) as e:
        raise DiffError(f"cannot read {model}: {e}") from None
    except Exception as e:  # noqa: BLE001 - protobuf's DecodeError and friends: not an ONNX file
        raise DiffError(f"cannot read {model} as an ONNX model ({type(e).__name__}: {e})") from None


def input_specs(model: onnx.ModelProto) -> list[InputSpec]:
    """The model's inputs (not the initializers older models also list as inputs)."""
    inits = {i.name for i in model.graph.initializer}
    out = []
    for i in model.graph.input:
        if i.name in inits:
            continue
        tt = i.type.tensor_type
        if not i.type.HasField("tensor_type"):
            raise DiffError(f"input '{i.name}' is not a tensor; symwasm takes only tensors as inputs")
        dt = np.dtype(object) if tt.elem_type == onnx.TensorProto.STRING \
            else np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type))
        shape = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim)
        out.append(InputSpec(i.name, dt, shape))
    return out


def read_inputs(path: str | Path, specs: list[InputSpec]) -> dict[str, np.ndarray]:
    """Inputs from a .npz whose names are the model's input names; each must have the
    declared dtype, rank and fixed dims."""
    try:
        f = np.load(path, allow_pickle=False)
        if not isinstance(f, np.lib.npyio.NpzFile):
            raise DiffError(f"--inputs {path}: not a .npz archive (np.savez writes one, an array per input name)")
        with f:
            feeds = {k: f[k] for k in f.files}
    except (OSError, ValueError, EOFError) as e:
        raise DiffError(f"--inputs {path}: cannot read it: {e}") from None
    names = [s.name for s in specs]
    missing = [n for n in names if n not in feeds]
    unknown = [n for n in feeds if n not in names]
    if missing or unknown:
        parts = [f"lacks input{'s' * (len(missing) > 1)} {', '.join(repr(n) for n in missing)}"] if missing else []
        parts += [f"holds {', '.join(repr(n) for n in unknown)}, which the model does not take"] if unknown else []
        raise DiffError(f"--inputs {path} {' and '.join(parts)} (the model's inputs: {', '.join(names)}; "
                        f"the file's arrays: {', '.join(feeds) or 'none'})")
    for s in specs:
        arr = feeds[s.name]
        if arr.dtype.kind in "US" and s.dtype.kind == "O":
            feeds[s.name] = arr = arr.astype(object)
        if arr.dtype != s.dtype:
            want = "string" if s.dtype.kind == "O" else s.dtype
            raise DiffError(f"--inputs {path}: input '{s.name}' is {_dtype_name(arr)}, the model declares {want}")
        if arr.ndim != len(s.shape):
            raise DiffError(f"--inputs {path}: input '{s.name}' has rank {arr.ndim} (shape {arr.shape}), the model "
                            f"declares rank {len(s.shape)} {_declared(s.shape)}")
        for axis, (d, n) in enumerate(zip(s.shape, arr.shape)):
            if isinstance(d, int) and d != n:
                raise DiffError(f"--inputs {path}: input '{s.name}' dim {axis} is {n}, the model declares {d} "
                                f"{_declared(s.shape)}")
    return feeds


def _declared(shape: tuple) -> str:
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + ")"


def index_bounds(model: onnx.ModelProto) -> dict[str, int]:
    """Inputs a Gather reads as indices into a weight: name -> the rows of the smallest
    such weight, so random ids and token types stay in range."""
    weights = {i.name: tuple(i.dims) for i in model.graph.initializer}
    out: dict[str, int] = {}
    for n in model.graph.node:
        if n.op_type == "Gather" and len(n.input) > 1 and n.input[0] in weights:
            shape = weights[n.input[0]]
            axis = next((a.i for a in n.attribute if a.name == "axis"), 0)
            if shape and -len(shape) <= axis < len(shape):
                out[n.input[1]] = min(out.get(n.input[1], shape[axis]), shape[axis])
    return out


def random_inputs(specs: list[InputSpec], binds: Mapping[str, int], seed: int,
                  bounds: Mapping[str, int] | None = None) -> dict[str, np.ndarray]:
    """Inputs of the declared shapes, every symbolic dim from ``binds``, values by dtype:
    floats standard normal, integers in [0, 10) (valid indices for small dims; below
    ``bounds[name]`` if that is less), bools even, strings from a few words."""
    unbound: dict[str, list[str]] = {}
    unnamed = []
    for s in specs:
        for axis, d in enumerate(s.shape):
            if d is None:
                unnamed.append(f"'{s.name}' dim {axis}")
            elif isinstance(d, str) and d not in binds:
                unbound.setdefault(d, []).append(f"'{s.name}' dim {axis}")
    if unbound:
        which = "; ".join(f"{sym} (input {', '.join(where)})" for sym, where in unbound.items())
        raise DiffError(f"unbound symbol{'s' * (len(unbound) > 1)}: {which}: give each a value, e.g. --bind "
                        + ",".join(f"{sym}=4" for sym in unbound) + ", or give the inputs with --inputs FILE.npz")
    if unnamed:
        raise DiffError(f"input {', '.join(unnamed)} {'have' if len(unnamed) > 1 else 'has'} neither a size nor a "
                        f"name, so --bind cannot size {'them' if len(unnamed) > 1 else 'it'}: give the inputs "
                        f"with --inputs FILE.npz")
    rng = np.random.default_rng(seed)
    feeds = {}
    for s in specs:
        shape = tuple(d if isinstance(d, int) else binds[d] for d in s.shape)
        if s.dtype == np.bool_:
            feeds[s.name] = rng.random(shape) < 0.5
        elif s.dtype.kind in "iu":
            high = min(10, (bounds or {}).get(s.name, 10))
            feeds[s.name] = rng.integers(0, max(high, 1), size=shape).astype(s.dtype)
        elif s.dtype.kind == "O":
            feeds[s.name] = np.array(rng.choice(STRINGS, size=shape), dtype=object).reshape(shape)
        else:  # float32, float64 and the narrow floats numpy has through ml_dtypes
            feeds[s.name] = rng.standard_normal(shape).astype(np.float32).astype(s.dtype)
    return feeds


def reference_name(which: str) -> str:
    """``ort`` or ``onnx`` for ``which`` (``auto``: onnxruntime if importable)."""
    if which not in REFERENCES:
        raise DiffError(f"--reference is one of {', '.join(REFERENCES)}, not '{which}'")
    if which == "onnx":
        return "onnx"
    try:
        import onnxruntime  # noqa: F401 - only whether it imports
    except ImportError:
        if which == "ort":
            raise DiffError("--reference ort: onnxruntime is not installed (pip install onnxruntime), "
                            "or use --reference onnx") from None
        return "onnx"
    return "ort"


def run_reference(which: str, model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> tuple[str, dict]:
    """(the reference's name and version, its outputs by name). onnxruntime runs with its
    graph optimizations off, so each node is its own kernel, as the model says."""
    names = [o.name for o in model.graph.output]
    try:
        if which == "ort":
            import onnxruntime as ort

            opts = ort.SessionOptions()
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            opts.log_severity_level = 4  # its failure is our one error line, not a log line too
            sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
            run_opts = ort.RunOptions()
            run_opts.log_severity_level = 4
            values = sess.run(names, dict(feeds), run_opts)
            label = f"onnxruntime {ort.__version__}"
        else:
            from onnx.reference import ReferenceEvaluator

            values = ReferenceEvaluator(model).run(names, dict(feeds))
            label = f"onnx.reference (onnx {onnx.__version__})"
    except Exception as e:  # noqa: BLE001 - either reference's failure, whatever its type, is one line
        who = "onnxruntime" if which == "ort" else "onnx.reference"
        other = "onnx" if which == "ort" else "ort"
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise DiffError(f"the reference ({who}) cannot run the model on these inputs: {msg} "
                        f"(--reference {other} tries the other)") from None
    out = {}
    for name, v in zip(names, values):
        arr = np.asarray(v)
        out[name] = arr.astype(object) if arr.dtype.kind in "US" else arr
    return label, out


def _is_float(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or dtype.name.startswith(("float", "bfloat"))  # (ml_dtypes' kind is "V")


def tolerance_for(dtype: np.dtype, rtol: float | None, atol: float | None) -> tuple[float, float]:
    """The tolerances for a value: as given, else the default for its float width."""
    width = dtype.itemsize if _is_float(dtype) else 4
    d_rtol, d_atol = DEFAULT_TOLERANCE.get(width, DEFAULT_TOLERANCE[4])
    return (d_rtol if rtol is None else rtol), (d_atol if atol is None else atol)


def compare(name: str, got: np.ndarray, want: np.ndarray, rtol: float | None = None,
            atol: float | None = None) -> Comparison:
    """One value, symwasm's (``got``) against the reference's (``want``). Floats agree
    within ``atol + rtol * |want|`` (NaN matches NaN); everything else exactly."""
    got, want = np.asarray(got), np.asarray(want)
    r, a = tolerance_for(want.dtype, rtol, atol)
    c = Comparison(name, tuple(got.shape), _dtype_name(got), tuple(want.shape), _dtype_name(want), r, a)
    if got.shape != want.shape:
        c.ok, c.why = False, "shapes differ"
        return c
    text = got.dtype.kind in "OUS", want.dtype.kind in "OUS"
    if any(text):
        if not all(text):
            c.ok, c.why = False, "dtypes differ"
            return c
        differ = int(np.count_nonzero(got.astype(object) != want.astype(object)))
        if differ:
            c.ok, c.why = False, f"{differ} of {got.size} strings differ"
        return c
    g, w = got.astype(np.float64), want.astype(np.float64)
    same = (g == w) | (np.isnan(g) & np.isnan(w))
    with np.errstate(invalid="ignore", divide="ignore"):
        err = np.where(same, 0.0, np.abs(g - w))
        err = np.where(np.isnan(err), np.inf, err)  # NaN against a number, or infinities of opposite signs
        # over the reference's nonzero numbers; where it is NaN or infinite, as large as err
        rel = np.where(np.isfinite(w), np.where(w != 0, err / np.abs(w), 0.0), err)
    c.max_abs = float(err.max()) if err.size else 0.0
    c.max_rel = float(rel.max()) if rel.size else 0.0
    if _is_float(want.dtype):
        bad = int(np.count_nonzero(err > a + r * np.abs(np.where(np.isfinite(w), w, 0.0))))
        what = "elements beyond tolerance"
    else:
        bad = int(np.count_nonzero(~same))
        what = "elements differ"
    if got.dtype != want.dtype:
        c.ok, c.why = False, "dtypes differ" + (f", {bad} of {got.size} {what}" if bad else "")
    elif bad:
        c.ok, c.why = False, f"{bad} of {got.size} {what}"
    return c


def expose(model: onnx.ModelProto, binds: Mapping[str, int]) -> tuple[onnx.ModelProto, list[str], dict[str, str]]:
    """A copy of ``model`` whose graph outputs also list every node output that is a tensor
    symwasm can return: (the copy, the names added, the names skipped -> why). Sequences
    and optionals stay inside (symwasm's VM does not return them); so do the values inside
    control-flow subgraphs (the If or Loop node's own outputs are compared). The added
    outputs carry no type, so a value ONNX cannot type is exposed too: both symwasm and the
    reference infer it."""
    from .frontend.onnx.importer import import_model

    graph = import_model(model, binds)  # which values symwasm holds as tensors (raises CompileError)
    listed = {o.name for o in model.graph.output} | {i.name for i in model.graph.input}
    added, skipped = [], {}
    for node in model.graph.node:
        for o in node.output:
            if not o or o in listed:
                continue
            listed.add(o)
            if o in graph.values:
                added.append(o)
            else:
                skipped[o] = "a sequence or optional, which symwasm does not return"
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    copy.graph.output.extend(onnx.ValueInfoProto(name=o) for o in added)
    return copy, added, skipped


def _subgraph_reads(node: onnx.NodeProto) -> set[str]:
    """The names a control-flow node's subgraphs read: outer values they capture among them."""
    out: set[str] = set()
    for a in node.attribute:
        for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
            for n in g.node:
                out.update(i for i in n.input if i)
                out |= _subgraph_reads(n)
    return out


def first_divergence(model: onnx.ModelProto, compared: Mapping[str, Comparison],
                     values: Mapping[str, np.ndarray]) -> tuple[int, Divergence | None]:
    """(how many nodes have a diverging output, the first in graph order whose compared
    inputs all agree). ``values`` are symwasm's results, the feeds and the initializers,
    for the inputs' summaries."""
    diverging, first = 0, None
    for index, node in enumerate(model.graph.node):
        bad = [compared[o] for o in node.output if o in compared and not compared[o].ok]
        if not bad:
            continue
        diverging += 1
        if first is not None:
            continue
        reads = list(dict.fromkeys(i for i in node.input if i))  # (Mul(x, x) reads x once)
        reads += sorted(n for n in _subgraph_reads(node) if n in compared and n not in reads)
        if any(i in compared and not compared[i].ok for i in reads):
            continue
        summaries = {i: Summary.of(values[i]) for i in reads if i in values}
        first = Divergence(node.name or f"{node.op_type}_{index}", node.op_type, index, bad[0], summaries,
                           [i for i in reads if i not in values])
    return diverging, first


def diff_model(model, target: str = "wasm32", binds: Mapping[str, int] | None = None,
               inputs: str | Path | Mapping[str, np.ndarray] | None = None, seed: int = 0,
               reference: str = "auto", rtol: float | None = None, atol: float | None = None,
               nodes: bool = False, cpu: str | None = None,
               progress: Callable[[str], None] | None = None) -> DiffResult:
    """Run ``model`` (path, bytes or ModelProto) through symwasm, compiled for ``target``
    with ``binds`` fixed, and through ``reference`` (``auto``, ``ort``, ``onnx``), and
    compare every output. ``inputs``: a .npz path or a mapping of arrays; None draws them
    from ``seed`` at the declared shapes, every symbol from ``binds``. ``rtol``/``atol``
    None: the defaults for each value's dtype (:data:`DEFAULT_TOLERANCE`). ``nodes``:
    compare every intermediate value too and name the first diverging node.

    Raises :class:`DiffError` for what keeps the diff from running.
    """
    import wasm_runtime

    from .compiler import compile_model
    from .ir.graph import CompileError
    from .link import LinkError

    say = progress or (lambda _msg: None)
    binds = dict(binds or {})
    proto = load(model)
    label = str(model) if isinstance(model, (str, Path)) else f"model '{proto.graph.name}'"
    specs = input_specs(proto)
    symbols = {d for s in specs for d in s.shape if isinstance(d, str)}
    unknown = [name for name in binds if name not in symbols]
    if unknown:
        raise DiffError(f"--bind names {', '.join(unknown)}, which no input dim uses (the inputs' symbols: "
                        f"{', '.join(sorted(symbols)) or 'none'})")
    if inputs is None:
        feeds, inputs_from = random_inputs(specs, binds, seed, index_bounds(proto)), f"random, seed {seed}"
    elif isinstance(inputs, Mapping):
        feeds, inputs_from = dict(inputs), "given"
    else:
        feeds, inputs_from = read_inputs(inputs, specs), str(inputs)
    which = reference_name(reference)

    skipped: dict[str, str] = {}
    added: list[str] = []
    run_model = proto
    try:
        if nodes:
            run_model, added, skipped = expose(proto, binds)
        with tempfile.TemporaryDirectory(prefix="symwasm-diff-") as tmp:
            out = Path(tmp) / ("model.wasm" if target == "wasm32" else "model.so")
            extra = f", with {len(added)} intermediate values as outputs" if nodes else ""
            say(f"compiling {label} for {target}{extra}")
            compile_model(run_model, out, target=target, binds=binds, cpu=cpu,
                          progress=lambda msg: say(f"  {msg}"))
            say(f"running symwasm ({target})")
            compiled = wasm_runtime.load(out, cache=False)
            try:
                got, run_error = compiled.run(feeds), ""
            except wasm_runtime.ModelError as e:
                got, run_error = {}, str(e)
            finally:
                compiled.close()
    except CompileError as e:
        raise DiffError(f"symwasm cannot compile {label}: {e}") from None
    except LinkError as e:
        raise DiffError(f"linking {label} failed (a symwasm bug): {e}") from None
    except ValueError as e:  # an unknown target or CPU
        raise DiffError(str(e)) from None
    except Exception as e:  # noqa: BLE001 - a compiler crash: a diff still ends in one line, with where it was
        tb = traceback.extract_tb(e.__traceback__)[-1]
        raise DiffError(f"symwasm crashed compiling {label} (a symwasm bug): {type(e).__name__}: {e} "
                        f"(at {Path(tb.filename).name}:{tb.lineno})") from None

    say(f"running the reference ({'onnxruntime' if which == 'ort' else 'onnx.reference'})")
    try:
        ref_label, want = run_reference(which, run_model, feeds)
    except DiffError as e:
        raise DiffError(f"{e}; symwasm's run failed too: {run_error}" if run_error else str(e)) from None
    r32, a32 = tolerance_for(np.dtype(np.float32), rtol, atol)
    wider = " (wider for 16- and 8-bit floats)" if rtol is None or atol is None else ""
    tolerance = f"rtol {r32:g}, atol {a32:g}{wider}"
    result = DiffResult(label, target, ref_label, {k: Summary.of(np.asarray(v)) for k, v in feeds.items()},
                        inputs_from, binds, [], run_error=run_error, tolerance=tolerance)
    if run_error:
        return result
    originals = [o.name for o in proto.graph.output]
    result.outputs = [compare(n, got[n], want[n], rtol, atol) for n in originals]
    if nodes:
        compared = {c.name: c for c in result.outputs}
        compared.update((n, compare(n, got[n], want[n], rtol, atol)) for n in added)
        values = {i.name: numpy_helper.to_array(i) for i in proto.graph.initializer}
        values.update(feeds)
        values.update(got)
        diverging, first = first_divergence(proto, compared, values)
        result.nodes = NodeReport(len(added), skipped, diverging, first)
    return result


__all__ = ["diff_model", "DiffResult", "DiffError", "Comparison", "Divergence", "NodeReport", "compare",
           "expose", "first_divergence", "input_specs", "random_inputs", "read_inputs", "DEFAULT_TOLERANCE"]
