/** Type declarations for the symwasm JS loader (index.js). */

declare global {
  /** TypeScript declares WebAssembly only in its DOM and webworker libs, which Node-only
   * projects leave out; this empty interface merges with theirs when present and keeps
   * these declarations compiling without them. */
  namespace WebAssembly {
    interface Module {}
  }
}

/** The dtypes the module ABI carries. */
export type DType = 'float32' | 'int32' | 'int64' | 'bool';

/** The typed array holding each dtype; bool is one byte (0 or 1) per element. */
export interface TypedArrayOf {
  float32: Float32Array;
  int32: Int32Array;
  int64: BigInt64Array;
  bool: Uint8Array;
}

export type TensorData = TypedArrayOf[DType];

/** An input or output of the model: a dim is a number or the name of a symbol. */
export interface TensorInfo {
  readonly name: string;
  readonly dtype: DType;
  readonly shape: readonly (number | string)[];
}

/** An input to `Model.run`: dense row-major data and its concrete shape. */
export interface Feed {
  data: TensorData;
  shape: readonly number[];
}

/** An output of `Model.run`, copied out of the module's memory. */
export type Tensor = { [D in DType]: { data: TypedArrayOf[D]; shape: number[]; dtype: D } }[DType];

/** The `symwasm.metadata` custom section (docs/ABI.md); fields beyond these are left untyped. */
export interface Metadata {
  format: 'symwasm';
  format_version: [number, number];
  compiler?: string;
  target: string;
  features: string[];
  model: { name: string; opset: number };
  inputs: TensorInfo[];
  outputs: TensorInfo[];
  symbols: Record<string, { kind: string; min: number | null; max: number | null }>;
  values: Record<string, { dtype: string; shape: (number | string)[]; [key: string]: unknown }>;
  program: Record<string, unknown>;
  [key: string]: unknown;
}

/**
 * What `loadModel` and `readMetadata` accept: a URL (fetched; in Node a file: URL or any
 * string that is not an http(s), data or blob URL is read as a path), the module's bytes,
 * or a compiled module.
 */
export type ModelSource = string | URL | ArrayBuffer | ArrayBufferView | WebAssembly.Module;

/**
 * A failed run or load reported by the module, or by the checks the loader makes before
 * calling it. The message names the input, op and dim.
 */
export class ModelError extends Error {
  constructor(message: string, status?: number);
  readonly name: 'ModelError';
  /** The ABI status: 1 invalid input, 2 out of range, 3 out of memory, 4 invalid program, 5 internal. */
  readonly status: number;
}

/** A loaded module; get one from `loadModel`. */
export class Model {
  private constructor();
  readonly metadata: Metadata;
  /** Always 'wasm32' for a .wasm module. */
  readonly target: string;
  readonly inputs: readonly TensorInfo[];
  readonly outputs: readonly TensorInfo[];
  /**
   * Run the model with one feed per input. Rejects with a ModelError for bad inputs or a
   * failed run (the model stays usable), or with an Error if the module traps (a bug).
   */
  run(feeds: Record<string, Feed>): Promise<Record<string, Tensor>>;
  /** Cap the bytes the VM may hold at once (default 2 GiB). */
  setMemoryLimit(bytes: number | bigint): void;
}

/** Load and instantiate a compiled model. */
export function loadModel(source: ModelSource): Promise<Model>;

/** The metadata of a compiled model, without instantiating it. */
export function readMetadata(source: ModelSource): Promise<Metadata>;
