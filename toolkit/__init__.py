"""symwasm's compiler: ONNX models with symbolic dims -> .wasm modules and native libraries."""
__version__ = "0.1.0"
