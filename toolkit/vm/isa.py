"""The VM's instruction set, defined once as data.

This table generates ``wasm_runtime/vm/sw_isa.h`` (``python -m toolkit.vm.isa``) and drives
the Python encoder and disassembler. An instruction is a run of int32 words: the opcode,
then its operands in order; an operand of a ``*`` kind is a count followed by that many
words.

Operand kinds: ``reg`` tensor register, ``slot`` shape-heap slot (int64), ``msg`` index
in the message table, ``kernel`` index in the kernel table, ``const`` index in the constant
table, ``input``/``output`` model input/output index, ``dtype`` an ONNX dtype code,
``imm`` a plain int32, ``arith`` an arithmetic kind, ``pc`` a word offset in the program.

Format version: a major bump means old modules cannot be read; a minor bump only adds.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

FORMAT_VERSION = (1, 1)


@dataclass(frozen=True)
class Op:
    code: int
    name: str
    operands: tuple[str, ...]
    doc: str


OPS: tuple[Op, ...] = (
    Op(0, "RETURN", (), "end of the program"),
    Op(1, "INPUT", ("input", "reg"),
       "reg := model input (its dtype and rank were checked by sw_set_input)"),
    Op(2, "DIM", ("slot", "reg", "imm"), "slot := shape[imm] of reg"),
    Op(3, "CHECK_EQ", ("slot", "slot", "msg"), "fail with msg(a, b) unless a == b"),
    Op(4, "CHECK_LE", ("slot", "slot", "msg"), "fail with msg(a, b) unless a <= b"),
    Op(5, "ARITH", ("arith", "slot", "slot", "slot", "msg"),
       "dst := a <arith> b; msg(a, b) on division by zero or inexact DIV"),
    Op(6, "BCAST", ("slot", "slot", "slot", "msg"),
       "dst := numpy broadcast of dims a and b; msg(a, b) when they do not broadcast"),
    Op(7, "LOAD_VALUES", ("reg", "msg", "slot*"),
       "slots := the integer elements of reg; msg(count, numel) when the counts differ"),
    Op(8, "STORE_VALUES", ("reg", "slot*"), "the integer elements of reg := slots"),
    Op(9, "ALLOC", ("reg", "dtype", "msg", "slot*"),
       "reg := new tensor of that dtype and shape; msg(bytes, limit) when out of memory"),
    Op(10, "VIEW", ("reg", "reg", "slot*"), "dst := src's data with a new shape, no copy"),
    Op(11, "CALL", ("kernel", "msg", "reg*", "slot*"),
       "run kernel(tensors, scalars, detail); scalars are written back to their slots; "
       "msg(detail[0], detail[1], detail[2]) when it returns non-zero"),
    Op(12, "FREE", ("reg",), "release reg's buffer (a no-op for views, inputs, constants)"),
    Op(13, "CONST", ("reg", "const"), "reg := constant tensor"),
    Op(14, "OUTPUT", ("output", "reg"), "model output := reg (kept alive until the next run)"),
    Op(15, "RESHAPE", ("msg", "slot*", "slot*"),
       "resolve ONNX Reshape's 0 and -1 in the target slots (second list, in place) "
       "against the input dims (first list); msg(a, b) when impossible"),
    Op(16, "SLICE_DIM", ("slot", "slot", "slot", "slot", "slot", "slot", "msg"),
       "(dim, start, end, step) -> (first, count) with ONNX Slice clamping; msg when step is 0"),
    Op(17, "JUMP", ("pc",), "continue at pc"),
    Op(18, "BRANCH", ("slot", "pc"), "continue at pc if the slot is non-zero"),
    Op(19, "ALLOC_STATIC", ("reg", "dtype", "imm", "slot*"),
       "reg := a tensor at byte offset imm of the static arena, planned at compile time "
       "(FREE is a no-op for it)"),
)

ARITH = ("ADD", "SUB", "MUL", "FLOORDIV", "MOD", "MIN", "MAX", "DIV", "EQ", "LT", "LE")

BY_NAME = {op.name: op for op in OPS}
BY_CODE = {op.code: op for op in OPS}


def encode(name: str, *operands) -> list[int]:
    """The words of one instruction; list operands are given as Python lists."""
    op = BY_NAME[name]
    if len(operands) != len(op.operands):
        raise ValueError(f"{name} takes {len(op.operands)} operands, got {len(operands)}")
    words = [op.code]
    for kind, value in zip(op.operands, operands):
        if kind.endswith("*"):
            words.append(len(value))
            words.extend(int(v) for v in value)
        elif kind == "arith":
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
        for kind in op.operands:
            if kind.endswith("*"):
                n = words[pc]
                vals.append(list(words[pc + 1: pc + 1 + n]))
                pc += 1 + n
            else:
                vals.append(words[pc])
                pc += 1
        yield start, op, vals


def disassemble(words: list[int], strings: list[str] | None = None,
                kernels: list[str] | None = None, reg_names: list[str] | None = None,
                slot_names: dict[int, str] | None = None) -> str:
    """Readable text of a program. Names are used where given."""
    slot_names = slot_names or {}

    def fmt(kind: str, v):
        if kind.endswith("*"):
            return "[" + ", ".join(fmt(kind[:-1], x) for x in v) + "]"
        if kind == "reg":
            return f"%{v}" + (f"<{reg_names[v]}>" if reg_names and v < len(reg_names) else "")
        if kind == "slot":
            return f"${v}" + (f"<{slot_names[v]}>" if v in slot_names else "")
        if kind == "kernel":
            return kernels[v] if kernels and v < len(kernels) else f"kernel#{v}"
        if kind == "arith":
            return ARITH[v]
        if kind == "msg":
            return f"msg#{v}"
        if kind == "dtype":
            return {1: "float32", 6: "int32", 7: "int64", 9: "bool"}.get(v, f"dtype{v}")
        return str(v)

    lines = []
    for pc, op, vals in decode(words):
        args = ", ".join(fmt(k, v) for k, v in zip(op.operands, vals))
        lines.append(f"{pc:5d}  {op.name:<12} {args}")
    return "\n".join(lines)


def c_header() -> str:
    gen = "toolkit/vm/isa.py"
    lines = [
        f"/* generated by {gen} (python -m toolkit.vm.isa), do not edit */",
        "#ifndef SW_ISA_H", "#define SW_ISA_H", "",
        f"#define SW_FORMAT_MAJOR {FORMAT_VERSION[0]}",
        f"#define SW_FORMAT_MINOR {FORMAT_VERSION[1]}", "",
        "typedef enum sw_opcode {",
    ]
    for op in OPS:
        lines.append(f"  SW_OP_{op.name} = {op.code},  /* {' '.join(op.operands)}: {op.doc} */")
    lines += ["  SW_OP_COUNT", "} sw_opcode;", "", "typedef enum sw_arith {"]
    for i, a in enumerate(ARITH):
        lines.append(f"  SW_ARITH_{a} = {i},")
    lines += ["  SW_ARITH_COUNT", "} sw_arith;", ""]
    # operand kinds per opcode, for the load-time verifier
    kinds = sorted({k.rstrip("*") for op in OPS for k in op.operands})
    lines.append("typedef enum sw_operand_kind {")
    lines.append("  SW_K_END = 0,")
    for i, k in enumerate(kinds, start=1):
        lines.append(f"  SW_K_{k.upper()} = {i},")
    lines.append("  SW_K_LIST = 64  /* or-ed in: a count then that many operands */")
    lines.append("} sw_operand_kind;")
    lines.append("")
    width = max(len(op.operands) for op in OPS) + 1
    lines.append(f"static const unsigned char sw_op_operands[SW_OP_COUNT][{width}] = {{")
    for op in OPS:
        ks = [f"SW_K_{k.rstrip('*').upper()}" + (" | SW_K_LIST" if k.endswith("*") else "")
              for k in op.operands] + ["SW_K_END"]
        lines.append(f"  /* {op.name} */ {{{', '.join(ks)}}},")
    lines += ["};", "", "#endif", ""]
    return "\n".join(lines)


HEADER_PATH = Path(__file__).resolve().parents[2] / "wasm_runtime" / "vm" / "sw_isa.h"


if __name__ == "__main__":
    if "--check" in sys.argv:
        if HEADER_PATH.read_text() != c_header():
            sys.exit(f"{HEADER_PATH} is stale: run python -m toolkit.vm.isa")
    else:
        HEADER_PATH.write_text(c_header())
        print(f"wrote {HEADER_PATH}")
