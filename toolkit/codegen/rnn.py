"""The recurrent kernel: one RNN, GRU or LSTM layer, every direction, every step.

Per direction: the input projection of all steps, ``XW = X @ W^T + Wb`` ([seq * batch,
gates * hidden], rows in X's order), is one GEMM up front; then each step runs the
recurrent GEMM ``G = H @ R^T`` over the batch and one pass over the batch and hidden units
that adds ``XW``'s row and the recurrence bias, applies the activations and updates the
states in place (the GEMM has read them all by then). GRU without linear_before_reset
needs ``(r * H) @ Rh^T``, so its step is two GEMMs with a pass after each. The GEMMs are
:func:`toolkit.codegen.linalg.matmul` over strided views: W and R are read as given
(``[gates * hidden, in]``, dot products) or, when the compiler transposed a constant, with
contiguous rows (``[in, gates * hidden]``).

Scratch buffers (in the compute type): the projection, the step's gates [batch, gates *
hidden] and the states [rows, batch, hidden]: the hidden state, then GRU's r * H or LSTM's
cell state.

Sequence lengths: a batch entry of length L takes steps 0 .. L-1 (reversed: L-1 .. 0 at
steps 0 .. L-1); at a step past L its states stay, and Y gets a zero at that step's own
position (so each position past L is zeroed once). Y_h and Y_c are zero when L is 0, as in
onnxruntime. A length outside [0, seq] fails with (length, seq, batch index).

8-bit W and R (``op.quantized``, onnxruntime's DynamicQuantizeLSTM): each GEMM is
onnxruntime's dynamically quantized one (:func:`_quantized_product`). The input projection
covers the steps up to the longest sequence (onnxruntime's range is that of X's first
max(sequence_lens) steps); the recurrent GEMM's operand is the previous step's hidden state,
in which an entry past its length counts as zero when Y is an output (onnxruntime reads it
back from Y, where it is zero) and as its last state otherwise (its Y_h buffer).
"""
from __future__ import annotations

from typing import Sequence

from llvmlite import ir

from ..ir.dims import Dim
from ..ir.dtypes import INT8, DType
from .kernel import F32, I32, I64, STATUS_OUT_OF_RANGE, KernelBuilder, Tensor, fptosi_sat, i64, intrinsic
from .linalg import Mat, matmul
from .scalar import Scalar

TensorType = tuple[DType, Sequence[Dim]]


class _Layer:
    """The kernel's tensors, sizes and index arithmetic."""

    def __init__(self, kb: KernelBuilder, op, plan, types: Sequence[TensorType]):
        self.kb, self.op, self.plan = kb, op, plan
        args = iter(enumerate(types))

        def take(present: bool = True) -> Tensor | None:
            if not present:
                return None
            index, (dt, shape) = next(args)
            return kb.tensor(index, dt, shape)

        self.x, self.w, self.r = take(), take(), take()
        self.bias, self.lens = take(plan.has_b), take(plan.has_lens)
        self.h0, self.c0, self.peep = take(plan.has_h0), take(plan.has_c0), take(plan.has_p)
        quantized = op.quantized is not None
        self.w_scale, self.r_scale = take(quantized), take(quantized)
        self.xw, self.gates, self.states = take(), take(), take()
        self.sums = take(quantized)
        self.y, self.yh, self.yc = take(plan.has_y), take(plan.has_yh), take(plan.has_yc)
        x = self.x
        self.seq, self.batch = (x.dim(1), x.dim(0)) if op.layout else (x.dim(0), x.dim(1))
        self.size = x.dim(2)
        self.hidden = self.r.dim(1) if op.r_transposed else self.r.dim(2)
        self.gh = kb.mul(self.hidden, i64(op.spec.gates))
        self.s = Scalar(kb.b, x.dtype)

    # ------------------------------------------------------------------ index arithmetic
    def mul(self, *xs: ir.Value) -> ir.Value:
        out = xs[0]
        for v in xs[1:]:
            out = self.kb.mul(out, v)
        return out

    def add(self, *xs: ir.Value) -> ir.Value:
        out = xs[0]
        for v in xs[1:]:
            out = self.kb.add(out, v)
        return out

    def col(self, gate: int) -> ir.Value:
        """The first column of gate block ``gate``."""
        return self.mul(self.hidden, i64(gate))

    def length(self, bi: ir.Value) -> ir.Value:
        if self.lens is None:
            return self.seq
        v = self.lens.load(bi)
        return v if v.type == I64 else self.kb.b.sext(v, I64)

    def x_row(self, bi: ir.Value, pos: ir.Value) -> ir.Value:
        """The row of X (and of the projection) of batch entry ``bi`` at step ``pos``."""
        if self.op.layout:
            return self.add(self.mul(bi, self.seq), pos)
        return self.add(self.mul(pos, self.batch), bi)

    def y_row(self, pos: ir.Value, d: int, bi: ir.Value) -> ir.Value:
        """The offset of Y's hidden vector at (step, direction, batch entry)."""
        dirs = i64(self.op.directions)
        if self.op.layout:
            return self.mul(self.add(self.mul(self.add(self.mul(bi, self.seq), pos), dirs), i64(d)), self.hidden)
        return self.mul(self.add(self.mul(self.add(self.mul(pos, dirs), i64(d)), self.batch), bi), self.hidden)

    def state_row(self, d: int, bi: ir.Value) -> ir.Value:
        """The offset of the hidden vector of (direction, batch entry) in initial_h, Y_h..."""
        if self.op.layout:
            return self.mul(self.add(self.mul(bi, i64(self.op.directions)), i64(d)), self.hidden)
        return self.mul(self.add(self.mul(i64(d), self.batch), bi), self.hidden)

    def weights(self, t: Tensor, transposed: bool, d: int, k: ir.Value, col0: ir.Value) -> Mat:
        """Direction ``d`` of W or R as the [k, n] right operand of a product, from gate
        column ``col0`` on."""
        if transposed:  # [dirs, k, gh]
            return Mat(t, self.add(self.mul(i64(d), k, self.gh), col0), self.gh, i64(1))
        return Mat(t, self.add(self.mul(i64(d), self.gh, k), self.mul(col0, k)), i64(1), k)

    def clipped(self, v: ir.Value) -> ir.Value:
        c = self.op.clip
        if c is None:
            return v
        s = self.s
        v = s.select(s.cmp(">", v, s.const(c)), s.const(c), v)
        return s.select(s.lt(v, s.const(-c)), s.const(-c), v)


def build_recurrent(kb: KernelBuilder, params, types: Sequence[TensorType]) -> None:
    """One recurrent layer. ``params``: (the Recurrent op, its Plan). Tensors: X, W, R, [B],
    [sequence_lens], [initial_h], [initial_c], [P], the three scratch buffers, then the
    outputs present of Y, Y_h, Y_c."""
    op, plan = params
    L = _Layer(kb, op, plan, types)
    b = kb.b
    if L.lens is not None:
        with kb.loop(L.batch, "len") as bi:
            n = L.length(bi)
            # unsigned: a negative length is out of range too
            kb.fail_if(b.icmp_unsigned(">", n, L.seq), STATUS_OUT_OF_RANGE, [n, L.seq, bi])
    steps = L.seq  # of the input projection: up to the longest sequence
    if op.quantized is not None and L.lens is not None:
        steps = kb.accumulate(L.batch, i64(0), lambda m, bi: _smax(b, m, L.length(bi)), "longest")
    per_dir = op.spec.activations
    for d in range(op.directions):
        reverse = op.direction == "reverse" or d == 1
        _direction(L, d, reverse, op.activations[d * per_dir:(d + 1) * per_dir], steps)


def _smax(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed(">", x, y), x, y)


def _clamp(b: ir.IRBuilder, v: ir.Value, lo: ir.Value, hi: ir.Value) -> ir.Value:
    v = b.select(b.fcmp_ordered("<", v, lo), lo, v)
    return b.select(b.fcmp_ordered(">", v, hi), hi, v)


def _quantized_product(L: _Layer, d: int, a: Mat, m: ir.Value, k: ir.Value, w: Tensor, scale: Tensor,
                       per_column: bool, w_zero: int, y: Mat, c: Mat | None, kept=None) -> None:
    """``y = a @ (w - w_zero) * scale (+ c)`` over all gates columns, as onnxruntime's
    quantized GEMM of an LSTM computes it: ``a`` ([m, k] float32, rows contiguous) quantized
    to uint8 over its range (0 included; scale ``(hi - lo) / 255``, 1 for an empty range;
    zero point ``rint(clamp(-lo / scale, 0, 255))``; ``clamp(rint(a / scale) + zp, 0,
    255)``); the exact int32 sums of ``(qa - zp) * (w - w_zero)``; each times the float32
    ``a_scale * w_scale`` of its column (``scale``: direction ``d``'s one value, or its
    column's). ``w``: direction ``d`` of [directions, k, gates * hidden]. ``kept(i)``: whether
    row i counts (a row that does not is zero, and its sums are not computed)."""
    kb, b, n = L.kb, L.kb.b, L.gh
    zero, one, top = ir.Constant(F32, 0.0), ir.Constant(F32, 1.0), ir.Constant(F32, 255.0)

    def row_count(i: ir.Value) -> ir.Value:
        return k if kept is None else b.select(kept(i), k, i64(0))

    def extend(i: ir.Value, acc: list[ir.Value]) -> list[ir.Value]:
        def element(kk: ir.Value, vals: list[ir.Value]) -> list[ir.Value]:
            v = a.load(kb, i, kk)
            return [intrinsic(b, "llvm.maximum", vals[0], v), intrinsic(b, "llvm.minimum", vals[1], v)]

        return kb.carry(i64(0), row_count(i), acc, element, "range_k")

    hi, lo = kb.carry(i64(0), m, [zero, zero], extend, "range")
    a_scale = b.select(b.fcmp_ordered("==", hi, lo), one, b.fdiv(b.fsub(hi, lo), top))
    a_zero = intrinsic(b, "llvm.rint", _clamp(b, b.fsub(zero, b.fdiv(lo, a_scale)), zero, top))
    a_zero_int = fptosi_sat(b, a_zero, I32)
    signed = w.dtype == INT8
    w_base = L.mul(i64(d), k, n)
    sums = L.sums
    with kb.loop(m, "qi") as i:
        with kb.loop(n, "qz") as j:
            sums.store(j, ir.Constant(I32, 0))
        with kb.loop(row_count(i), "qk") as kk:
            q = _clamp(b, b.fadd(intrinsic(b, "llvm.rint", b.fdiv(a.load(kb, i, kk), a_scale)), a_zero), zero, top)
            qa = b.sub(fptosi_sat(b, q, I32), a_zero_int)
            row = L.add(w_base, L.mul(kk, n))
            with kb.loop(n, "qj") as j:
                raw = w.load_raw(L.add(row, j))
                wv = b.sub(b.sext(raw, I32) if signed else b.zext(raw, I32), ir.Constant(I32, w_zero))
                sums.store(j, b.add(sums.load(j), b.mul(qa, wv)))
        with kb.loop(n, "qo") as j:
            col_scale = scale.load(L.add(L.mul(i64(d), n), j) if per_column else i64(d))
            v = b.fmul(b.sitofp(sums.load(j), F32), b.fmul(a_scale, col_scale))
            if c is not None:
                v = b.fadd(v, c.load(kb, i, j))
            y.store(kb, i, j, v)


def _direction(L: _Layer, d: int, reverse: bool, acts, steps: ir.Value) -> None:
    kb, op, s = L.kb, L.op, L.s
    b = kb.b
    dt = L.x.dtype
    hidden, batch, gh = L.hidden, L.batch, L.gh
    one = i64(1)
    # the input projection of every step, with W's bias
    wb = Mat(L.bias, L.mul(i64(d), gh, i64(2)), i64(0), one) if L.bias is not None else None
    q = op.quantized
    if q is None:
        matmul(kb, dt, Mat(L.x, i64(0), L.size, one), L.weights(L.w, op.w_transposed, d, L.size, i64(0)),
               Mat(L.xw, i64(0), gh, one), L.mul(L.seq, batch), gh, L.size, c=wb)
    else:
        _quantized_product(L, d, Mat(L.x, i64(0), L.size, one), L.mul(steps, batch), L.size, L.w, L.w_scale,
                           q.w_per_column, q.w_zero[d], Mat(L.xw, i64(0), gh, one), wb)
    second = L.mul(batch, hidden)  # where the second state row starts
    with kb.loop(batch, "b0") as bi:
        row = L.mul(bi, hidden)
        with kb.loop(hidden, "j0") as j:
            for k, init in enumerate((L.h0, L.c0) if op.cell == "lstm" else (L.h0,)):
                v = init.load(L.add(L.state_row(d, bi), j)) if init is not None else s.const(0)
                L.states.store(L.add(L.mul(i64(k), second), row, j), v)

    def recur(src: Mat, gate: int, gates: int) -> None:
        """gates[:, block gate .. gate + gates] = src @ R^T over those blocks."""
        col0 = L.col(gate)
        matmul(kb, dt, src, L.weights(L.r, op.r_transposed, d, hidden, col0),
               Mat(L.gates, col0, gh, one), batch, L.mul(hidden, i64(gates)), hidden)

    def rb(gate: int, j: ir.Value) -> ir.Value | None:
        """The recurrence bias of gate block ``gate`` at unit ``j`` (None without B)."""
        if L.bias is None:
            return None
        return L.bias.load(L.add(L.mul(i64(d), gh, i64(2)), gh, L.col(gate), j))

    def each_unit(t: ir.Value, body) -> None:
        """``body(u)`` for each batch entry and hidden unit at step ``t``; ``u`` gives the
        values of that unit (see Unit)."""
        with kb.loop(batch, "b") as bi:
            n = L.length(bi)
            valid = b.icmp_signed("<", t, n)
            pos = b.select(valid, b.sub(b.sub(n, one), t), t) if reverse else t
            xrow = L.mul(L.x_row(bi, pos), gh)
            hrow = L.mul(bi, hidden)
            yrow = L.y_row(pos, d, bi) if L.y is not None else None
            with kb.loop(hidden, "j") as j:
                body(Unit(L, bi, j, valid, xrow, hrow, yrow, rb))

    hmat = Mat(L.states, i64(0), hidden, one)
    f = acts[0]
    with kb.loop(L.seq, "t") as t:
        if op.cell == "rnn":
            recur(hmat, 0, 1)
            each_unit(t, lambda u: u.finish(f.apply(s, L.clipped(u.pre(0)))))
        elif op.cell == "gru":
            g = acts[1]
            if op.linear_before_reset:
                recur(hmat, 0, 3)

                def gru_lbr(u: Unit) -> None:
                    z = f.apply(s, L.clipped(u.pre(0)))
                    r = f.apply(s, L.clipped(u.pre(1)))
                    gh_ = u.gate(2)
                    bias_h = rb(2, u.j)
                    if bias_h is not None:
                        gh_ = s.add(gh_, bias_h)
                    hh = g.apply(s, L.clipped(s.add(u.projected(2), s.mul(r, gh_))))
                    u.finish(_gru_mix(s, z, hh, u.h()))

                each_unit(t, gru_lbr)
            else:
                recur(hmat, 0, 2)

                def gru_gates(u: Unit) -> None:
                    z = f.apply(s, L.clipped(u.pre(0)))
                    r = f.apply(s, L.clipped(u.pre(1)))
                    L.gates.store(u.gate_index(0), z)  # kept for the second pass
                    L.states.store(L.add(second, u.hrow, u.j), s.mul(r, u.h()))

                each_unit(t, gru_gates)
                recur(Mat(L.states, second, hidden, one), 2, 1)

                def gru_hidden(u: Unit) -> None:
                    hh = g.apply(s, L.clipped(u.pre(2)))
                    u.finish(_gru_mix(s, u.gate(0), hh, u.h()))

                each_unit(t, gru_hidden)
        else:
            if q is None:
                recur(hmat, 0, 4)
            else:
                # an entry past its length at the previous step (t - 1 >= length) is zero in Y
                kept = None if L.y is None or L.lens is None else (
                    lambda bi: b.icmp_signed("<=", t, L.length(bi)))
                _quantized_product(L, d, hmat, batch, hidden, L.r, L.r_scale, q.r_per_column, q.r_zero[d],
                                   Mat(L.gates, i64(0), gh, one), None, kept)
            each_unit(t, lambda u: _lstm_unit(L, u, d, acts, second))
    # the final states
    with kb.loop(batch, "bh") as bi:
        empty = b.icmp_signed("==", L.length(bi), i64(0))
        row = L.mul(bi, hidden)
        with kb.loop(hidden, "jh") as j:
            for k, out in enumerate((L.yh, L.yc)):
                if out is not None:
                    v = L.states.load(L.add(L.mul(i64(k), second), row, j))
                    out.store(L.add(L.state_row(d, bi), j), s.select(empty, s.const(0), v))


def _gru_mix(s: Scalar, z: ir.Value, hh: ir.Value, h: ir.Value) -> ir.Value:
    """(1 - z) * hh + z * h."""
    return s.add(s.mul(s.sub(s.const(1), z), hh), s.mul(z, h))


def _lstm_unit(L: _Layer, u: "Unit", d: int, acts, second: ir.Value) -> None:
    """One LSTM unit: gates i, o, f, c (W's order); peepholes P = [Pi, Po, Pf]."""
    s, op = L.s, L.op
    f, g, h = acts
    cpos = L.add(second, u.hrow, u.j)
    c = L.states.load(cpos)

    def peephole(k: int, state: ir.Value) -> ir.Value | None:
        if L.peep is None:
            return None
        return s.mul(L.peep.load(L.add(L.mul(i64(d), L.hidden, i64(3)), L.col(k), u.j)), state)

    def gate(block: int, peep: int | None, state: ir.Value | None) -> ir.Value:
        v = u.pre(block)
        p = peephole(peep, state) if peep is not None else None
        return f.apply(s, L.clipped(v if p is None else s.add(v, p)))

    i = gate(0, 0, c)
    forget = s.sub(s.const(1), i) if op.input_forget else gate(2, 2, c)
    cell = g.apply(s, L.clipped(u.pre(3)))
    c_new = s.add(s.mul(forget, c), s.mul(i, cell))
    o = gate(1, 1, c_new)
    h_new = s.mul(o, h.apply(s, c_new))
    L.states.store(cpos, s.select(u.valid, c_new, c))
    u.finish(h_new)


class Unit:
    """One (batch entry, hidden unit) of a step: its gate sums and states."""

    def __init__(self, L: _Layer, bi, j, valid, xrow, hrow, yrow, rb):
        self.L, self.bi, self.j, self.valid = L, bi, j, valid
        self.xrow, self.hrow, self.yrow, self._rb = xrow, hrow, yrow, rb

    def gate_index(self, block: int) -> ir.Value:
        L = self.L
        return L.add(L.mul(self.bi, L.gh), L.col(block), self.j)

    def gate(self, block: int) -> ir.Value:
        """The recurrent GEMM's sum for gate block ``block``."""
        return self.L.gates.load(self.gate_index(block))

    def projected(self, block: int) -> ir.Value:
        """X's projection (with W's bias) for gate block ``block``."""
        L = self.L
        return L.xw.load(L.add(self.xrow, L.col(block), self.j))

    def pre(self, block: int) -> ir.Value:
        """A gate's input before clipping: projection + recurrent sum + recurrence bias."""
        s = self.L.s
        v = s.add(self.projected(block), self.gate(block))
        bias = self._rb(block, self.j)
        return v if bias is None else s.add(v, bias)

    def h(self) -> ir.Value:
        L = self.L
        return L.states.load(L.add(self.hrow, self.j))

    def finish(self, h_new: ir.Value) -> None:
        """Store the new hidden state (kept as it was past the entry's length) and Y."""
        L, s = self.L, self.L.s
        pos = L.add(self.hrow, self.j)
        L.states.store(pos, s.select(self.valid, h_new, L.states.load(pos)))
        if self.yrow is not None:
            L.y.store(L.add(self.yrow, self.j), s.select(self.valid, h_new, s.const(0)))
