/**
 * The symwasm JS loader: load a compiled `.wasm` model and run it from Node or a browser.
 *
 * A thin layer over the module ABI (docs/ABI.md) that mirrors the Python host
 * (`wasm_runtime`): the same validation, the same error messages, the same status codes.
 * Plain ES module with no dependencies and no build step.
 */

/** ONNX TensorProto dtype codes of the dtypes the ABI carries (docs/ABI.md, "Data"). */
const DTYPE_CODES = { float32: 1, int32: 6, int64: 7, bool: 9 };
const CODE_DTYPES = Object.fromEntries(Object.entries(DTYPE_CODES).map(([k, v]) => [v, k]));

/** The typed array holding each dtype; bool is one byte per element, like numpy's bool_. */
const TYPED_ARRAYS = { float32: Float32Array, int32: Int32Array, int64: BigInt64Array, bool: Uint8Array };

/** Fallback messages for a non-zero status whose module message is empty. */
const STATUS_NAMES = { 1: 'invalid input', 2: 'out of range', 3: 'out of memory', 4: 'invalid program', 5: 'internal error' };
const SW_INVALID_INPUT = 1;
const SW_OUT_OF_MEMORY = 3;
const MAX_RANK = 8;
/** Everything the host calls (docs/ABI.md, "Exports"), checked once at load so a foreign
 * module fails there with a plain message instead of a TypeError mid-run. */
const ABI_EXPORTS = ['memory', 'sw_init', 'sw_input_buffer', 'sw_shape_buffer', 'sw_set_input', 'sw_run',
  'sw_output_data', 'sw_output_dtype', 'sw_output_rank', 'sw_output_dim', 'sw_last_error', 'sw_last_error_len',
  'sw_set_memory_limit'];
const SECTION = 'symwasm.metadata';
const WASM_MAGIC = [0x00, 0x61, 0x73, 0x6d];

/**
 * A failed run or load reported by the module (or by the same checks the Python host makes
 * before calling it). `status` is the ABI status code; the message is the module's own,
 * naming the input, op and dim.
 */
export class ModelError extends Error {
  /**
   * @param {string} message
   * @param {number} [status] the ABI status code (5, SW_INTERNAL, when none applies)
   */
  constructor(message, status = 5) {
    super(message);
    this.name = 'ModelError';
    this.status = status;
  }
}

/** The dtype name of a typed array; unsupported arrays get numpy-style names ("float64") so
 * messages read the same as the Python host's. */
function dtypeName(data) {
  for (const [name, T] of Object.entries(TYPED_ARRAYS)) if (data instanceof T) return name;
  return data.constructor.name.replace(/^Big/, '').replace(/Array$/, '').toLowerCase();
}

const isNode = typeof process !== 'undefined' && typeof process.versions?.node === 'string';

/** Strings that name something fetch() can load in Node; any other string there is a path. */
const FETCHABLE = /^(https?|data|blob):/i;

/**
 * Compile `source` into a WebAssembly.Module, labelled for messages.
 * @returns {Promise<{module: WebAssembly.Module, label: string}>}
 */
async function compileSource(source) {
  if (source instanceof WebAssembly.Module) return { module: source, label: 'the given module' };
  if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) {
    return { module: await compileBytes(source, 'the given bytes'), label: 'the given bytes' };
  }
  if (typeof source !== 'string' && !(source instanceof URL)) {
    throw new TypeError('a model source is a URL, a file path (Node), an ArrayBuffer, a Uint8Array '
      + `or a WebAssembly.Module, not ${source === null ? 'null' : typeof source}`);
  }
  const label = String(source);
  if (isNode && !FETCHABLE.test(label)) {
    // Node's fetch() cannot read files: read paths and file: URLs from disk
    const { readFile } = await import('node:fs/promises');
    let bytes;
    try {
      bytes = await readFile(source instanceof URL || label.startsWith('file:') ? new URL(label) : source);
    } catch (e) {
      if (e.code === 'ENOENT') throw new Error(`no such model: ${label}`, { cause: e });
      throw e;
    }
    return { module: await compileBytes(bytes, label), label };
  }
  const response = await fetch(source);
  if (!response.ok) throw new Error(`${label}: HTTP ${response.status} ${response.statusText}`);
  // compileStreaming insists on the application/wasm type; many static servers send another
  if (response.headers.get('content-type')?.startsWith('application/wasm')) {
    return { module: await WebAssembly.compileStreaming(response), label };
  }
  return { module: await compileBytes(await response.arrayBuffer(), label), label };
}

/** Bytes are checked for the wasm magic first so that a native library passed by mistake
 * gets a plain message rather than a CompileError about magic words. */
async function compileBytes(bytes, label) {
  const head = new Uint8Array(ArrayBuffer.isView(bytes) ? bytes.buffer : bytes, bytes.byteOffset ?? 0,
    Math.min(4, bytes.byteLength));
  if (head.length < 4 || WASM_MAGIC.some((b, i) => head[i] !== b)) {
    throw new Error(`${label}: not a WebAssembly module`);
  }
  return WebAssembly.compile(bytes);
}

function metadataOf(module, label) {
  const sections = WebAssembly.Module.customSections(module, SECTION);
  if (sections.length === 0) throw new Error(`${label}: a WebAssembly module without symwasm metadata`);
  return JSON.parse(new TextDecoder().decode(sections[0]));
}

/**
 * The metadata JSON of a compiled module, read from its `symwasm.metadata` custom section
 * without instantiating or running it.
 * @param {string | URL | ArrayBuffer | ArrayBufferView | WebAssembly.Module} source as for loadModel
 */
export async function readMetadata(source) {
  const { module, label } = await compileSource(source);
  return metadataOf(module, label);
}

/**
 * Load a compiled model.
 * @param {string | URL | ArrayBuffer | ArrayBufferView | WebAssembly.Module} source a URL
 *   (fetched), a file path or file: URL (Node), the module's bytes, or a compiled module
 * @returns {Promise<Model>}
 */
export async function loadModel(source) {
  const { module, label } = await compileSource(source);
  // the metadata is read before instantiating so a foreign module is rejected unrun
  const metadata = metadataOf(module, label);
  const imports = WebAssembly.Module.imports(module);
  if (imports.length) {
    throw new Error(`${label}: the module imports ${JSON.stringify(imports.map((i) => i.name))}; `
      + 'symwasm modules import nothing');
  }
  // async instantiation: browsers refuse to instantiate large modules synchronously
  const instance = await WebAssembly.instantiate(module, {});
  return new Model(instance, metadata);
}

/** A loaded module. `run` takes `{name: {data, shape}}` and returns `{name: {data, shape, dtype}}`. */
export class Model {
  #exports;

  /**
   * Use loadModel(); this calls sw_init, which verifies the embedded program.
   * @param {WebAssembly.Instance} instance
   * @param {object} metadata
   */
  constructor(instance, metadata) {
    const missing = ABI_EXPORTS.filter((name) => !(name in instance.exports));
    if (missing.length) throw new Error(`not a symwasm module: it does not export ${missing.join(', ')}`);
    this.#exports = instance.exports;
    this.metadata = metadata;
    this.target = metadata.target;
    const info = ({ name, dtype, shape }) => Object.freeze({ name, dtype, shape: Object.freeze([...shape]) });
    this.inputs = Object.freeze(metadata.inputs.map(info));
    this.outputs = Object.freeze(metadata.outputs.map(info));
    this.#check(this.#call('sw_init'));
  }

  /**
   * Cap the bytes the VM may hold at once (the module's default is 2 GiB); a run that needs
   * more fails with a ModelError of status 3 and the model stays usable.
   * @param {number | bigint} bytes
   */
  setMemoryLimit(bytes) {
    this.#call('sw_set_memory_limit', BigInt(bytes));
  }

  /**
   * Run the model.
   * @param {Record<string, {data: Float32Array | Int32Array | BigInt64Array | Uint8Array, shape: number[]}>} feeds
   * @returns {Promise<Record<string, {data: Float32Array | Int32Array | BigInt64Array | Uint8Array, shape: number[], dtype: string}>>}
   *   every output, copied out of the module's memory (the next run reuses it)
   */
  async run(feeds) {
    if (feeds === null || typeof feeds !== 'object') {
      throw new TypeError('run: feeds must be an object {name: {data, shape}}');
    }
    const names = this.inputs.map((i) => i.name);
    const unknown = Object.keys(feeds).filter((k) => !names.includes(k));
    if (unknown.length) {
      throw new ModelError(`unknown input(s) ${unknown.sort().join(', ')}; the model takes ${names.join(', ')}`,
        SW_INVALID_INPUT);
    }
    this.inputs.forEach((info, index) => {
      if (!Object.hasOwn(feeds, info.name)) throw new ModelError(`input '${info.name}' is missing`, SW_INVALID_INPUT);
      this.#setInput(index, info, feeds[info.name]);
    });
    this.#check(this.#call('sw_run'));
    const result = {};
    this.outputs.forEach((info, i) => {
      const code = this.#call('sw_output_dtype', i);
      const dtype = CODE_DTYPES[code];
      if (!dtype) throw new Error(`output '${info.name}': dtype code ${code} is unknown (a symwasm bug)`);
      const rank = this.#call('sw_output_rank', i);
      const shape = Array.from({ length: rank }, (_, axis) => Number(this.#call('sw_output_dim', i, axis)));
      const T = TYPED_ARRAYS[dtype];
      const ptr = this.#call('sw_output_data', i) >>> 0;
      const nbytes = shape.reduce((a, b) => a * b, 1) * T.BYTES_PER_ELEMENT;
      // slice() copies, so the result survives the next run; the copy is also aligned
      result[info.name] = { data: new T(this.#memory().slice(ptr, ptr + nbytes)), shape, dtype };
    });
    return result;
  }

  #setInput(index, info, feed) {
    const { data, shape } = feed ?? {};
    if (!ArrayBuffer.isView(data) || data instanceof DataView) {
      const got = ArrayBuffer.isView(feed) ? `a bare ${feed.constructor.name}`
        : `data ${data === null ? 'null' : data?.constructor?.name ?? typeof data}`;
      throw new ModelError(`input '${info.name}': expected {data, shape} with data a Float32Array, Int32Array, `
        + `BigInt64Array or Uint8Array (bool), got ${got}`, SW_INVALID_INPUT);
    }
    const dtype = dtypeName(data);
    const code = DTYPE_CODES[dtype];
    if (code === undefined) {
      throw new ModelError(`input '${info.name}': dtype ${dtype} is not supported (expected ${info.dtype})`,
        SW_INVALID_INPUT);
    }
    if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
      throw new ModelError(`input '${info.name}': shape must be an array of non-negative integers, `
        + `got ${JSON.stringify(shape)}`, SW_INVALID_INPUT);
    }
    if (shape.length > MAX_RANK) {
      throw new ModelError(`input '${info.name}': rank ${shape.length} exceeds ${MAX_RANK}`, SW_INVALID_INPUT);
    }
    const count = shape.reduce((a, b) => a * b, 1);
    if (data.length !== count) {
      throw new ModelError(`input '${info.name}': data has ${data.length} elements but shape `
        + `[${shape.join(', ')}] needs ${count}`, SW_INVALID_INPUT);
    }
    const ptr = this.#call('sw_input_buffer', index, BigInt(data.byteLength)) >>> 0;
    if (!ptr) this.#check(SW_OUT_OF_MEMORY);
    const dst = new Uint8Array(this.#memory(), ptr, data.byteLength);
    if (dtype === 'bool') {
      // the VM's bool is exactly 0 or 1, as numpy guarantees; a Uint8Array may hold any byte
      for (let i = 0; i < data.length; i++) dst[i] = data[i] ? 1 : 0;
    } else {
      dst.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
    }
    const shapePtr = this.#call('sw_shape_buffer') >>> 0;
    // a DataView needs no 8-byte alignment and states the byte order (wasm is little-endian)
    const view = new DataView(this.#memory(), shapePtr, MAX_RANK * 8);
    for (let a = 0; a < MAX_RANK; a++) view.setBigInt64(a * 8, BigInt(shape[a] ?? 0), true);
    this.#check(this.#call('sw_set_input', index, code, shape.length));
  }

  /** The current memory buffer: memory may grow in any call, detaching older buffers. */
  #memory() {
    return this.#exports.memory.buffer;
  }

  #call(name, ...args) {
    try {
      return this.#exports[name](...args);
    } catch (e) {
      // the module has no imports, so anything thrown is a trap: a bug, never the user's fault
      throw new Error(`the module trapped in ${name} (a symwasm bug): ${e.message}`, { cause: e });
    }
  }

  #check(status) {
    if (status !== 0) {
      const ptr = this.#call('sw_last_error') >>> 0;
      const len = this.#call('sw_last_error_len');
      const message = new TextDecoder().decode(new Uint8Array(this.#memory(), ptr, len));
      throw new ModelError(message || STATUS_NAMES[status] || `status ${status}`, status);
    }
  }
}
