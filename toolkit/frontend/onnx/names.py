"""Names that are not valid UTF-8, made text once, where a model is read.

ONNX's string fields (names of nodes, values, graphs and functions, dim_params, op types,
attribute names, doc strings...) are meant to be UTF-8, but protobuf does not check proto2's
strings: it hands back a field whose bytes do not decode as ``bytes``, and onnxruntime runs
such a model. Every later use of a name (messages, symbols, kernel names, the metadata's
JSON) expects ``str``, so the model's copy gets each such field decoded with the bad bytes
written as ``\\xff`` escapes: distinct byte strings stay distinct names, and every message
prints the same text for a name."""
from __future__ import annotations

import onnx
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message


def text_names(proto: onnx.ModelProto) -> onnx.ModelProto:
    """``proto`` itself when all its strings are text, else a copy whose strings are."""
    if not _walk(proto, fix=False):
        return proto
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    _walk(copy, fix=True)
    return copy


def _text(s: str | bytes) -> str:
    return s.decode("utf-8", "backslashreplace") if isinstance(s, bytes) else s


def _repeated(fd: FieldDescriptor) -> bool:
    # protobuf 5.29+ says is_repeated; older ones only label
    return fd.is_repeated if hasattr(fd, "is_repeated") else fd.label == FieldDescriptor.LABEL_REPEATED


def _walk(msg: Message, fix: bool) -> bool:
    """Whether ``msg`` or a message inside it has a string field holding bytes; with ``fix``,
    decode them. Only string and message fields are read (a tensor's raw_data is not copied)."""
    found = False
    for fd in msg.DESCRIPTOR.fields:
        if fd.type == FieldDescriptor.TYPE_STRING:
            if _repeated(fd):
                items = getattr(msg, fd.name)
                if any(isinstance(s, bytes) for s in items):
                    found = True
                    if fix:
                        text = [_text(s) for s in items]
                        del items[:]
                        items.extend(text)
            else:
                s = getattr(msg, fd.name)
                if isinstance(s, bytes):
                    found = True
                    if fix:
                        setattr(msg, fd.name, _text(s))
        elif fd.type == FieldDescriptor.TYPE_MESSAGE:
            if _repeated(fd):
                for m in getattr(msg, fd.name):
                    found = _walk(m, fix) or found
            elif msg.HasField(fd.name):
                found = _walk(getattr(msg, fd.name), fix) or found
        if found and not fix:
            return True
    return found
