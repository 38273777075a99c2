"""Constant: a value from its attribute, known at compile time (so it becomes no core op)."""
from __future__ import annotations

import numpy as np

from ....ir.dtypes import dtype_of_numpy
from ....ir.graph import Value
from ....ops.base import promote_sym
from ..translate import TranslateContext

# the attribute that holds the value, and how to make it an array
ATTRS = {
    "value": lambda v: np.asarray(v),
    "value_float": lambda v: np.array(v, np.float32),
    "value_floats": lambda v: np.array(v, np.float32),
    "value_int": lambda v: np.array(v, np.int64),
    "value_ints": lambda v: np.array(v, np.int64),
}


def constant(ctx: TranslateContext) -> None:
    given = [k for k in ctx.attrs if k.startswith("value") or k == "sparse_value"]
    if len(given) != 1:
        ctx.fail(f"needs exactly one value attribute, has {given or 'none'}")
    if given[0] not in ATTRS:
        ctx.fail(f"attribute '{given[0]}' is not supported (use one of {', '.join(ATTRS)})")
    arr = ATTRS[given[0]](ctx.attr(given[0]))
    try:
        dt = dtype_of_numpy(arr.dtype)
    except KeyError:
        ctx.fail(f"constant of dtype {arr.dtype} is not supported")
    v = Value(ctx.outputs[0], dt, tuple(arr.shape), const=arr)
    v.sym = promote_sym(v)
    ctx.graph.add_value(v)


def register(r) -> None:
    r.add("Constant", (1, 9, 11, 12, 13, 19, 21, 23, 24, 25), constant, foldable=False)
