"""Constant: a value from its attribute, known at compile time (so never a kernel)."""
from __future__ import annotations

import numpy as np

from ....ir.graph import Value, dtype_of_numpy
from ..infer import InferContext, promote_sym

# the attribute that holds the value, and how to make it an array
ATTRS = {
    "value": lambda v: np.asarray(v),
    "value_float": lambda v: np.array(v, np.float32),
    "value_floats": lambda v: np.array(v, np.float32),
    "value_int": lambda v: np.array(v, np.int64),
    "value_ints": lambda v: np.array(v, np.int64),
}


def infer_constant(ctx: InferContext) -> None:
    given = [k for k in ctx.attrs if k.startswith("value") or k == "sparse_value"]
    if len(given) != 1:
        ctx.fail(f"needs exactly one value attribute, has {given or 'none'}")
    if given[0] not in ATTRS:
        ctx.fail(f"attribute '{given[0]}' is not supported (use one of {', '.join(ATTRS)})")
    arr = ATTRS[given[0]](ctx.attr(given[0]))
    try:
        dt = dtype_of_numpy(arr.dtype)
    except KeyError:
        ctx.fail(f"constant of dtype {arr.dtype} is not supported (float32, int32, int64, bool)")
    sym = promote_sym(Value(ctx.node.outputs[0], dt, arr.shape, const=arr))
    ctx.set_output(0, dt, arr.shape, const=arr, sym=sym)


def register(r) -> None:
    r.add("Constant", 13, infer_constant, None, foldable=False)
