/** Type declarations for the symwasm JS loader (index.js). */

declare global {
  /** TypeScript declares WebAssembly only in its DOM and webworker libs, which Node-only
   * projects leave out; this empty interface merges with theirs when present and keeps
   * these declarations compiling without them. */
  namespace WebAssembly {
    interface Module {}
  }
  /** Likewise for URL and AbortSignal (DOM, webworker or @types/node). */
  interface URL {}
  interface AbortSignal {}
}

/** The dtypes the module ABI carries (toolkit/abi.py; abi.js). */
export type DType = 'float32' | 'float64' | 'float16' | 'int8' | 'int16' | 'int32' | 'int64' | 'uint8' | 'uint16'
  | 'uint32' | 'uint64' | 'bool' | 'bfloat16' | 'float8_e4m3fn' | 'float8_e4m3fnuz' | 'float8_e5m2'
  | 'float8_e5m2fnuz' | 'float8_e8m0fnu' | 'float4_e2m1fn' | 'uint4' | 'int4' | 'uint2' | 'int2' | 'string';

/**
 * What holds each dtype's elements. bool is one byte (0 or 1) per element; float16 and
 * bfloat16 travel as their bits in a Uint16Array; the float8, float4 and 4-/2-bit integer
 * formats as one code per byte in a Uint8Array; string as a plain Array of strings (UTF-8
 * inside the module).
 */
export interface TypedArrayOf {
  float32: Float32Array;
  float64: Float64Array;
  float16: Uint16Array;
  int8: Int8Array;
  int16: Int16Array;
  int32: Int32Array;
  int64: BigInt64Array;
  uint8: Uint8Array;
  uint16: Uint16Array;
  uint32: Uint32Array;
  uint64: BigUint64Array;
  bool: Uint8Array;
  bfloat16: Uint16Array;
  float8_e4m3fn: Uint8Array;
  float8_e4m3fnuz: Uint8Array;
  float8_e5m2: Uint8Array;
  float8_e5m2fnuz: Uint8Array;
  float8_e8m0fnu: Uint8Array;
  float4_e2m1fn: Uint8Array;
  uint4: Uint8Array;
  int4: Uint8Array;
  uint2: Uint8Array;
  int2: Uint8Array;
  string: string[];
}

export type TensorData = TypedArrayOf[DType];

/** Per dtype: its ABI code, bytes per element, kind (f float, i signed, u unsigned, b bool, s string) and
 * the array that holds it (Array for string, whose elements are 16-byte {address, length} in the module). */
export const DTYPES: { readonly [D in DType]: { readonly code: number; readonly size: number; readonly kind: 'f' | 'i' | 'u' | 'b' | 's'; readonly array: new (buffer: ArrayBuffer) => TypedArrayOf[D] } };

/** The module format this loader runs (major, minor): modules of another major are refused. */
export const FORMAT_VERSION: readonly [number, number];

/** The status codes a ModelError carries, by name (the ABI's; abi.js). */
export const STATUS: {
  readonly OK: 0;
  readonly INVALID_INPUT: 1;
  readonly OUT_OF_RANGE: 2;
  readonly OUT_OF_MEMORY: 3;
  readonly INVALID_PROGRAM: 4;
  readonly INTERNAL: 5;
  /** A WorkerModel run stopped by its timeout or AbortSignal. */
  readonly CANCELLED: 6;
};

/** An input or output of the model: a dim is a number or the name of a symbol. */
export interface TensorInfo {
  readonly name: string;
  readonly dtype: DType;
  readonly shape: readonly (number | string)[];
}

/** An input as the metadata lists it: `default` (compile --overridable) is what a run that
 * does not feed it gets, base64 of its little-endian bytes. */
export interface InputInfo extends TensorInfo {
  readonly default?: { shape: number[]; data: string };
}

/**
 * An input to `Model.run`: dense row-major data and its concrete shape. The data's typed
 * array must hold the input's dtype; `dtype` says which one when the array could hold two
 * (a Uint8Array is uint8 or bool, a Uint16Array uint16 or float16); by default it is the
 * input's own dtype when the array holds it. A string input's data is an Array of strings.
 */
export interface Feed {
  data: TensorData;
  shape: readonly number[];
  dtype?: DType;
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
  /** check_facts: compiled with --check-facts; weight_inputs: initializers the model also
   * lists as inputs (ONNX IR version 3), compiled as constants (a run that feeds one is refused;
   * compile --overridable keeps one an input with a default instead). */
  model: { name: string; opset: number; notes?: string[]; check_facts?: boolean; weight_inputs?: string[] };
  inputs: InputInfo[];
  outputs: TensorInfo[];
  symbols: Record<string, { kind: string; min: number | null; max: number | null }>;
  values: Record<string, { dtype: string; shape: (number | string)[]; [key: string]: unknown }>;
  program: Record<string, unknown>;
  /** The memory plan (see `Model.requiredBytes`). */
  memory?: MemoryPlan | null;
  /** The model's files, one per variant, and the WebAssembly features each needs. */
  variants?: { [V in Variant]?: { file: string; features: string[] } } | null;
  [key: string]: unknown;
}

export interface MemoryPlan {
  /** The static arena: buffers of static shape, allocated once. */
  static_bytes: number;
  /** The dynamic arena's size, a formula of the input symbols (`evaluateFormula`). */
  dynamic_bytes: number | unknown[];
  /** The same, as text (`512*n`). */
  dynamic_formula: string;
  /** The dynamic arena at the symbols' upper bounds, reserved once (0: unbounded). */
  reserve: number;
  /** Which values share each block of the dynamic arena. */
  blocks: { offset: string; size: string; values: string[] }[];
  /** Values the run-time allocator holds (sizes known only from data). */
  runtime: string[];
}

/**
 * What `loadModel` and `readMetadata` accept: a URL (fetched; in Node a file: URL or any
 * string that is not an http(s), data or blob URL is read as a path), the module's bytes,
 * or a compiled module.
 */
export type ModelSource = string | URL | ArrayBuffer | ArrayBufferView | WebAssembly.Module;

/**
 * A failed run or load reported by the module, or by the checks the loader makes before
 * calling it. The message names the input, op and dim; a load failure's names the source.
 */
export class ModelError extends Error {
  constructor(message: string, status?: number, options?: { cause?: unknown });
  readonly name: 'ModelError';
  /**
   * The ABI status (`STATUS`): 1 invalid input, 2 out of range, 3 out of memory, 4 invalid
   * program (every load failure about the module itself), 5 internal, 6 cancelled (a
   * WorkerModel run stopped by its timeout or AbortSignal; `cause` is the signal's reason).
   */
  readonly status: number;
}

/** A loaded module: one instance with its own VM context; get one from `loadModel`. */
export class Model {
  private constructor();
  readonly metadata: Metadata;
  /** Always 'wasm32' for a .wasm module. */
  readonly target: string;
  /** The variant running: the file's own (`symwasm.variant` section), chosen by `LoadOptions.variant`. */
  readonly variant: Variant;
  readonly inputs: readonly TensorInfo[];
  readonly outputs: readonly TensorInfo[];
  /**
   * Run the model with one feed per input. Rejects with a ModelError for bad inputs or a
   * failed run (the model stays usable), or with an Error if the module traps (a bug).
   */
  run(feeds: Record<string, Feed>): Promise<Record<string, Tensor>>;
  /** Cap the bytes the VM may hold at once (default 2 GiB). */
  setMemoryLimit(bytes: number | bigint): void;
  /**
   * The bytes a run with these symbol values needs under the memory limit, before running
   * it: the static arena, the dynamic arena planned from the input dims and the input
   * buffers (buffers sized from data, `metadata.memory.runtime`, come on top). Throws a
   * RangeError naming a symbol without a value.
   */
  requiredBytes(bindings: Record<string, number>): number;
  /**
   * Free the instance now (its context, buffers and this object's hold on its memory). Later
   * runs reject, and `setMemoryLimit` throws, a ModelError of status 1 (`SOURCE: the model
   * was disposed`); disposing again does nothing.
   */
  dispose(): void;
}

/** The value of a dim formula of the metadata (`metadata.memory.dynamic_bytes`). */
export function evaluateFormula(formula: number | unknown[], bindings: Record<string, number>): number;

/**
 * Load and instantiate a compiled model. Rejects with a ModelError of status 4 naming the
 * source when the module is not one this loader runs (not WebAssembly, truncated, no or
 * broken metadata, another format, metadata that disagrees with the program); with an Error
 * when the source cannot be read, a TypeError when it is not a source.
 */
export function loadModel(source: ModelSource, options?: LoadOptions): Promise<Model>;

/** A model's files: the baseline, and with `symwasm compile --relaxed-simd` `NAME.relaxed.wasm`. */
export type Variant = 'relaxed-simd' | 'baseline';

/** The variants, best first. */
export const VARIANTS: readonly Variant[];

/**
 * The variants this engine validates, best first: probes of the WebAssembly features a
 * symwasm module may need say which (relaxed SIMD where `f32x4.relaxed_madd` validates).
 * Empty on an engine without WebAssembly SIMD, where loading any model fails.
 */
export function supportedVariants(): Variant[];

export interface LoadOptions {
  /**
   * 'auto' (the default): for a source given by URL or path, the best variant whose
   * WebAssembly features this engine validates among the files its metadata lists beside it
   * (`NAME.relaxed.wasm` next to `NAME.wasm`); bytes and modules run as given. Where no
   * variant can run, a ModelError (status 4) names the features the engine lacks
   * (`m.wasm: cannot load the model: this engine lacks simd128`). A named variant must run:
   * a ModelError (status 4) says why not.
   */
  variant?: 'auto' | Variant;
}

/** How to cancel a `WorkerModel.run`; without either the run goes on until it finishes. */
export interface RunOptions {
  /** Milliseconds from the call (more than 0, at most 2**31 - 1), time waiting for earlier runs included. */
  timeout?: number;
  signal?: AbortSignal;
}

export interface CreateWorkerOptions extends LoadOptions {
  /** As `setMemoryLimit`, from the start. */
  memoryLimit?: number | bigint;
}

/**
 * A model whose instance runs in a worker of its own (Node worker_threads or a browser
 * module Worker), off the calling thread, so that a run can be stopped; get one from
 * `createWorker`. Runs are served one at a time, in the order they were called.
 */
export class WorkerModel {
  private constructor();
  readonly metadata: Metadata;
  readonly target: string;
  readonly variant: Variant;
  readonly inputs: readonly TensorInfo[];
  readonly outputs: readonly TensorInfo[];
  /**
   * Run the model in the worker (the feeds are copied there). Rejects as `Model.run` does,
   * and when `options.timeout` expires or `options.signal` aborts first, with a ModelError of
   * status `STATUS.CANCELLED`: the worker is terminated and the next run gets a fresh
   * instance with the same memory limit.
   */
  run(feeds: Record<string, Feed>, options?: RunOptions): Promise<Record<string, Tensor>>;
  /** Cap the bytes the VM may hold at once, kept for the instances that replace this one. */
  setMemoryLimit(bytes: number | bigint): void;
  /** As `Model.requiredBytes`. */
  requiredBytes(bindings: Record<string, number>): number;
  /**
   * Terminate the worker, which frees the instance. Pending and later runs reject, and
   * `setMemoryLimit` throws, a ModelError of status 1 (`SOURCE: the model was disposed`);
   * disposing again does nothing.
   */
  dispose(): void;
}

/**
 * Compile a model on this thread and load it into a worker of its own, whose runs have
 * `Model.run`'s API and can be stopped; resolves once the worker has loaded and checked it,
 * with the same load failures as `loadModel`. In browsers the worker is `worker.js` beside
 * `index.js`, which must come from the page's origin.
 */
export function createWorker(source: ModelSource, options?: CreateWorkerOptions): Promise<WorkerModel>;

/** The metadata of a compiled model, without instantiating it. */
export function readMetadata(source: ModelSource): Promise<Metadata>;
