"""symwasm as an ONNX backend (:class:`onnx.backend.base.Backend`): ``prepare`` compiles a
model for one target (``target="wasm32"``, the default, or ``"native"``) and loads it;
the returned rep's ``run`` executes it.

    import toolkit.backend as backend
    rep = backend.prepare(model, target="native")
    (y,) = rep.run([x])            # or rep.run({"x": x})

Keyword arguments other than ``target`` go to :func:`toolkit.compiler.compile_model`
(``binds``, ``ranges``, ``static``...). The compiled file lives in a temporary directory
owned by the rep, removed by ``close()`` (or when the rep is collected).
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep, Device, DeviceType, namedtupledict

import wasm_runtime

from .compiler import compile_model
from .ir.graph import CompileError

TARGETS = ("wasm32", "native")


class SymwasmRep(BackendRep):
    """A compiled and loaded model. ``run`` takes the graph's inputs (initializers
    excluded) as a sequence in declared order or as a mapping by name, and returns the
    outputs in declared order (also readable by name)."""

    def __init__(self, model: onnx.ModelProto, target: str, **compile_kw: Any) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="symwasm-backend-")
        path = Path(self._tmp.name) / ("model.wasm" if target == "wasm32" else "model.so")
        compile_model(model, path, target=target, **compile_kw)
        self.target = target
        self.model = wasm_runtime.load(path)
        self.input_names = [i.name for i in self.model.inputs]
        self.output_names = [o.name for o in self.model.outputs]

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        if isinstance(inputs, Mapping):
            feeds = dict(inputs)
        else:
            if isinstance(inputs, np.ndarray):
                inputs = [inputs]
            inputs = list(inputs)
            if len(inputs) != len(self.input_names):
                raise wasm_runtime.ModelError(
                    f"{len(inputs)} inputs given; the model takes {len(self.input_names)} "
                    f"({', '.join(self.input_names)})")
            feeds = dict(zip(self.input_names, inputs))
        got = self.model.run(feeds, **kwargs)
        return namedtupledict("Outputs", self.output_names)(*[got[n] for n in self.output_names])

    def close(self) -> None:
        if self._tmp is not None:
            self.model.close()
            self._tmp.cleanup()
            self._tmp = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


class SymwasmBackend(Backend):
    @classmethod
    def supports_device(cls, device: str) -> bool:
        return Device(device).type == DeviceType.CPU

    @classmethod
    def is_compatible(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> bool:
        """Whether symwasm compiles ``model`` (it tries)."""
        try:
            cls.prepare(model, device, **kwargs).close()
        except CompileError:
            return False
        return True

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", target: str = "wasm32",
                **kwargs: Any) -> SymwasmRep:
        if not cls.supports_device(device):
            raise ValueError(f"symwasm runs on CPU only, not on '{device}'")
        if target not in TARGETS:
            raise ValueError(f"unknown target '{target}' (symwasm compiles for {', '.join(TARGETS)})")
        return SymwasmRep(model, target, **kwargs)

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU", **kwargs: Any) -> tuple[Any, ...]:
        rep = cls.prepare(model, device, **kwargs)
        try:
            return rep.run(inputs)
        finally:
            rep.close()

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Any, device: str = "CPU",
                 outputs_info: Sequence[tuple[Any, tuple[int, ...]]] | None = None, **kwargs: Any) -> tuple[Any, ...]:
        """One node as a model: its inputs' dtypes and shapes from ``inputs`` (a sequence in
        the node's input order), at ``opset_version`` (default: the newest)."""
        opset = kwargs.pop("opset_version", onnx.defs.onnx_opset_version())
        arrays = [np.asarray(a) for a in inputs]
        names = [n for n in node.input if n]
        if len(names) != len(arrays):
            raise ValueError(f"the node has {len(names)} inputs, {len(arrays)} arrays given")
        ins = [onnx.helper.make_tensor_value_info(n, onnx.helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
               for n, a in zip(names, arrays)]
        outs = [onnx.helper.make_empty_tensor_value_info(o) for o in node.output if o]
        graph = onnx.helper.make_graph([node], f"{node.op_type}_node", ins, outs)
        model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])
        return cls.run_model(model, arrays, device, **kwargs)


prepare = SymwasmBackend.prepare
run_model = SymwasmBackend.run_model
run_node = SymwasmBackend.run_node
supports_device = SymwasmBackend.supports_device
