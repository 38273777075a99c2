"""The VM's instruction set, defined once as data.

This table generates ``wasm_runtime/vm/sw_isa.h`` (``python -m toolkit.abi``) and drives
the Python encoder and disassembler. An instruction is a run of int32 words: the opcode,
then its operands in order; an operand of a ``*`` kind is a count followed by that many
words.

Operand kinds: ``reg`` tensor register, ``slot`` shape-heap slot (int64), ``msg`` index
in the message table, ``kernel`` index in the kernel table, ``const`` index in the constant
table, ``input``/``output`` model input/output index, ``dtype`` an ONNX dtype code,
``imm`` a plain int32, ``arith`` an arithmetic kind, ``pc`` a word offset in the program.
A register or slot operand is read unless marked: ``=`` the instruction defines it, ``+``
it reads and writes it. The program IR's liveness and def-before-use checks read these
marks (:func:`roles`).

The format version is the ABI's (:data:`toolkit.abi.FORMAT_VERSION`).
"""
from __future__ import annotations

import functools
import sys
from dataclasses import dataclass

from ..abi import DTYPES



@dataclass(frozen=True)
class Op:
    code: int
    name: str
    operands: tuple[str, ...]
    doc: str


OPS: tuple[Op, ...] = (
    Op(0, "RETURN", (), "end of the program"),
    Op(1, "INPUT", ("input", "=reg"),
       "reg := model input (its dtype and rank were checked by sw_set_input)"),
    Op(2, "DIM", ("=slot", "reg", "imm"), "slot := shape[imm] of reg"),
    Op(3, "CHECK_EQ", ("slot", "slot", "msg"), "fail with msg(a, b) unless a == b"),
    Op(4, "CHECK_LE", ("slot", "slot", "msg"), "fail with msg(a, b) unless a <= b"),
    Op(5, "ARITH", ("arith", "=slot", "slot", "slot", "msg"),
       "dst := a <arith> b; msg(a, b) on division by zero or inexact DIV"),
    Op(6, "BCAST", ("=slot", "slot", "slot", "msg"),
       "dst := numpy broadcast of dims a and b; msg(a, b) when they do not broadcast"),
    Op(7, "LOAD_VALUES", ("reg", "msg", "=slot*"),
       "slots := the integer elements of reg; msg(count, numel) when the counts differ"),
    Op(8, "STORE_VALUES", ("reg", "slot*"), "the integer elements of reg := slots"),
    Op(9, "ALLOC", ("=reg", "dtype", "msg", "slot*"),
       "reg := new tensor of that dtype and shape; msg(bytes, limit) when out of memory"),
    Op(10, "VIEW", ("=reg", "reg", "slot*"), "dst := src's data with a new shape, no copy"),
    Op(11, "CALL", ("kernel", "msg", "reg*", "+slot*"),
       "run kernel(tensors, scalars, detail); scalars are written back to their slots; "
       "msg(detail[0], detail[1], detail[2]) when it returns non-zero"),
    Op(12, "FREE", ("reg",), "release reg's buffer (a no-op for views, inputs, constants)"),
    Op(13, "CONST", ("=reg", "const"), "reg := constant tensor"),
    Op(14, "OUTPUT", ("output", "reg"), "model output := reg (kept alive until the next run)"),
    Op(15, "RESHAPE", ("msg", "slot*", "+slot*"),
       "resolve ONNX Reshape's 0 and -1 in the target slots (second list, in place) "
       "against the input dims (first list); msg(a, b) when impossible"),
    Op(16, "SLICE_DIM", ("slot", "slot", "slot", "slot", "=slot", "=slot", "msg"),
       "(dim, start, end, step) -> (first, count) with ONNX Slice clamping; msg when step is 0"),
    Op(17, "JUMP", ("pc",), "continue at pc"),
    Op(18, "BRANCH", ("slot", "pc"), "continue at pc if the slot is non-zero"),
    Op(19, "ALLOC_STATIC", ("=reg", "dtype", "imm", "slot*"),
       "reg := a tensor at byte offset imm of the static arena, planned at compile time "
       "(FREE is a no-op for it)"),
    Op(20, "MOVE", ("=reg", "reg"),
       "dst := src's tensor and buffer, src := empty; an owned buffer changes owner, with its views "
       "(an If branch's or a Loop body's result leaving its region without a copy)"),
    Op(21, "COPY", ("=reg", "reg", "msg"),
       "dst := a new buffer holding a copy of src, with its dtype and shape; msg(bytes, limit) when out "
       "of memory"),
    Op(22, "APPEND", ("reg", "reg", "msg", "msg"),
       "append item (second) to acc (first: owned, one more dim): the first item sets acc's element "
       "shape, later ones must match it (first msg(axis, expected, got)); acc grows by doubling "
       "(second msg(bytes, limit) when out of memory). A Loop's scan outputs"),
    Op(23, "ARENA", ("slot", "imm", "msg"),
       "the run's dynamic arena holds at least slot bytes (the planned size of the buffers whose sizes "
       "are expressions of the input dims); when it must grow it takes max(slot, imm) bytes, imm being "
       "the size at the symbols' --range bounds (0: none), and keeps them between runs; msg(bytes, limit) "
       "when out of memory"),
    Op(24, "ALLOC_AT", ("=reg", "dtype", "slot", "slot*"),
       "reg := a tensor at byte offset slot of the dynamic arena, planned at compile time (FREE is a "
       "no-op for it)"),
)

ARITH = ("ADD", "SUB", "MUL", "FLOORDIV", "MOD", "MIN", "MAX", "DIV", "EQ", "LT", "LE")
# the bytes a static arena can span: a buffer's offset in it is an ``imm`` operand (int32)
ARENA_LIMIT = (1 << 31) - 1

BY_NAME = {op.name: op for op in OPS}
BY_CODE = {op.code: op for op in OPS}


def kind(operand: str) -> str:
    """An operand's kind without its role mark: "=slot*" -> "slot*"."""
    return operand.lstrip("=+")


@functools.cache
def roles(op: Op) -> tuple[str, ...]:
    """Per operand: "use", "def" (written), "usedef" (read and written) or "" (not a register
    or slot). Cached: the program IR asks it per operand of every instruction it walks."""
    out = []
    for operand in op.operands:
        k = kind(operand).rstrip("*")
        if k not in ("reg", "slot"):
            out.append("")
        else:
            out.append({"=": "def", "+": "usedef"}.get(operand[0], "use"))
    return tuple(out)


def encode(name: str, *operands) -> list[int]:
    """The words of one instruction; list operands are given as Python lists."""
    op = BY_NAME[name]
    if len(operands) != len(op.operands):
        raise ValueError(f"{name} takes {len(op.operands)} operands, got {len(operands)}")
    words = [op.code]
    for operand, value in zip(op.operands, operands):
        k = kind(operand)
        if k.endswith("*"):
            words.append(len(value))
            words.extend(int(v) for v in value)
        elif k == "arith":
            words.append(ARITH.index(value) if isinstance(value, str) else int(value))
        else:
            words.append(int(value))
    return words


def decode(words: list[int]):
    """Yield ``(pc, op, operands)`` for each instruction."""
    pc = 0
    while pc < len(words):
        op = BY_CODE.get(words[pc])
        if op is None:
            raise ValueError(f"bad opcode {words[pc]} at {pc}")
        start, pc = pc, pc + 1
        vals = []
        for operand in op.operands:
            if operand.endswith("*"):
                n = words[pc]
                vals.append(list(words[pc + 1: pc + 1 + n]))
                pc += 1 + n
            else:
                vals.append(words[pc])
                pc += 1
        yield start, op, vals


def disassemble(words: list[int], strings: list[str] | None = None,
                kernels: list[str] | None = None, reg_names: list[str] | None = None,
                slot_names: dict[int, str] | None = None, blocks: dict[int, str] | None = None) -> str:
    """Readable text of encoded words. Names are used where given; ``blocks`` maps the pc
    where a block starts to its label."""
    dtype_names = {d.code: d.name for d in DTYPES}
    slot_names = slot_names or {}
    blocks = blocks or {}

    def fmt(k: str, v):
        if k.endswith("*"):
            return "[" + ", ".join(fmt(k[:-1], x) for x in v) + "]"
        if k == "reg":
            return f"%{v}" + (f"<{reg_names[v]}>" if reg_names and v < len(reg_names) else "")
        if k == "slot":
            return f"${v}" + (f"<{slot_names[v]}>" if v in slot_names else "")
        if k == "kernel":
            return kernels[v] if kernels and v < len(kernels) else f"kernel#{v}"
        if k == "arith":
            return ARITH[v]
        if k == "msg":
            return f"msg#{v}"
        if k == "dtype":
            return dtype_names.get(v, f"dtype{v}")
        if k == "pc":
            return blocks.get(v, f"@{v}")
        return str(v)

    lines = []
    for pc, op, vals in decode(words):
        if pc in blocks:
            lines.append(f"{blocks[pc]}:")
        args = ", ".join(fmt(kind(k), v) for k, v in zip(op.operands, vals))
        lines.append(f"{pc:5d}  {op.name:<12} {args}")
    return "\n".join(lines)


def c_header() -> str:
    lines = [
        "/* generated by toolkit/vm/isa.py (python -m toolkit.abi), do not edit */",
        "#ifndef SW_ISA_H", "#define SW_ISA_H", "",
        "typedef enum sw_opcode {",
    ]
    for op in OPS:
        lines.append(f"  SW_OP_{op.name} = {op.code},  /* {' '.join(op.operands)}: {op.doc} */")
    lines += ["  SW_OP_COUNT", "} sw_opcode;", "", "typedef enum sw_arith {"]
    for i, a in enumerate(ARITH):
        lines.append(f"  SW_ARITH_{a} = {i},")
    lines += ["  SW_ARITH_COUNT", "} sw_arith;", ""]
    # operand kinds per opcode, for the load-time verifier
    kinds = sorted({kind(k).rstrip("*") for op in OPS for k in op.operands})
    lines.append("typedef enum sw_operand_kind {")
    lines.append("  SW_K_END = 0,")
    for i, k in enumerate(kinds, start=1):
        lines.append(f"  SW_K_{k.upper()} = {i},")
    lines.append("  SW_K_LIST = 64,  /* or-ed in: a count then that many operands */")
    lines.append("  SW_K_DEF = 128  /* or-ed in: the instruction writes the operand (=reg, =slot) */")
    lines.append("} sw_operand_kind;")
    lines.append("")
    width = max(len(op.operands) for op in OPS) + 1
    lines.append(f"static const unsigned char sw_op_operands[SW_OP_COUNT][{width}] = {{")
    for op in OPS:
        ks = [f"SW_K_{kind(k).rstrip('*').upper()}" + (" | SW_K_LIST" if k.endswith("*") else "")
              + (" | SW_K_DEF" if k.startswith("=") else "") for k in op.operands] + ["SW_K_END"]
        lines.append(f"  /* {op.name} */ {{{', '.join(ks)}}},")
    lines += ["};", "", "#endif", ""]
    return "\n".join(lines)

if __name__ == "__main__":
    from ..generate import main

    sys.exit(main(sys.argv[1:]))
