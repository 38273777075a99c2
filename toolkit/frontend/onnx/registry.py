"""The op registry: each ONNX op maps to versioned definitions (a shape function and a
lowering), registered explicitly by the op family modules in ``ops/``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from ...lower import Lowerer
    from .infer import InferContext


@dataclass(frozen=True)
class OpDef:
    op: str
    # the oldest opset (>= 13, the oldest symwasm reads) whose semantics this implements;
    # a later version that changes the op's meaning gets a definition of its own
    since: int
    infer: "Callable[[InferContext], None]"
    lower: "Callable[[Lowerer, Any], None] | None"
    # outputs computed at compile time when all inputs are constant (onnx.reference)
    foldable: bool = True


class Registry:
    def __init__(self) -> None:
        self._defs: dict[str, list[OpDef]] = {}

    def add(self, op: str, since: int, infer, lower, foldable: bool = True) -> None:
        self._defs.setdefault(op, []).append(OpDef(op, since, infer, lower, foldable))
        self._defs[op].sort(key=lambda d: d.since)

    def lookup(self, op: str, opset: int) -> OpDef | None:
        """The newest definition not newer than the model's opset."""
        best = None
        for d in self._defs.get(op, ()):
            if d.since <= opset:
                best = d
        return best

    def ops(self) -> list[str]:
        return sorted(self._defs)


_REGISTRY: Registry | None = None


def registry() -> Registry:
    global _REGISTRY
    if _REGISTRY is None:
        from .ops import constant, conv, data_dependent, elementwise, nn, reduce, shape, tensor

        r = Registry()
        for family in (constant, elementwise, shape, tensor, reduce, nn, conv, data_dependent):
            family.register(r)
        _REGISTRY = r
    return _REGISTRY
