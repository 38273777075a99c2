"""The core op set: what every frontend translates to and every pass and lowering reads.
See :mod:`toolkit.ops.base` for the protocol."""
from .base import CoreOp, InferContext, run_infer
from .conv import LRN, BatchNorm, Conv, ConvTranspose, GroupNorm, LpNorm, MaxUnpool, Pool, SlidingWindow
from .datadep import NonZero, Range
from .elementwise import SCALAR, Cast, Elementwise
from .linalg import Gemm, MatMul
from .movement import Concat, Gather, Slice, Transpose
from .reduce import ArgMax, LayerNorm, Reduce, Softmax
from .shape import Expand, Fill, Flatten, Identity, Reshape, ShapeOf, Size, Squeeze, Unsqueeze, View, ViewAs

__all__ = ["CoreOp", "InferContext", "run_infer", "SCALAR", "Elementwise", "Cast", "View", "Identity", "ViewAs",
           "Reshape", "Flatten", "Squeeze", "Unsqueeze", "ShapeOf", "Size", "Expand", "Fill", "Transpose",
           "Gather", "Concat", "Slice", "MatMul", "Gemm", "Reduce", "ArgMax", "Softmax", "LayerNorm", "Conv",
           "ConvTranspose", "Pool", "MaxUnpool", "SlidingWindow", "BatchNorm", "LRN", "GroupNorm", "LpNorm", "NonZero",
           "Range"]
