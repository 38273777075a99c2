/**
 * The symwasm JS loader: load a compiled `.wasm` model and run it from Node or a browser.
 *
 * A thin layer over the module ABI (docs/ABI.md) that mirrors the Python host
 * (`wasm_runtime`): the same validation, the same error messages, the same status codes.
 * Plain ES module with no dependencies and no build step. The ABI's tables (dtypes, status
 * codes, exports, the tensor layout) come from `abi.js`, generated from toolkit/abi.py.
 */
import { DTYPES, EXPORTS, FORMAT_VERSION, MAX_RANK, STATUS, STATUS_MEANING, TENSOR_LAYOUT } from './abi.js';

export { DTYPES, FORMAT_VERSION };

const CODE_DTYPES = Object.fromEntries(Object.entries(DTYPES).map(([name, d]) => [d.code, name]));
/** Everything the host calls, checked once at load so a foreign module fails there with a
 * plain message instead of a TypeError mid-run. */
const ABI_EXPORTS = ['memory', ...EXPORTS];
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

/**
 * The dtype a feed's data carries: `dtype` when the feed names one, else the input's own
 * dtype when the typed array holds it (a Uint8Array is uint8 or bool, a Uint16Array uint16 or
 * float16), else the first dtype that typed array holds. Null for an array of no dtype.
 */
function dtypeOf(data, declared, named) {
  if (named !== undefined) return DTYPES[named] && data instanceof DTYPES[named].array ? named : null;
  if (data instanceof DTYPES[declared].array) return declared;
  return Object.keys(DTYPES).find((name) => data instanceof DTYPES[name].array) ?? null;
}

/** numpy-style names for typed arrays of no dtype ("uint8clamped"), as the Python host says them. */
function arrayName(data) {
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

/** A module of another major format version cannot run on this loader. */
function checkFormat(metadata, label) {
  const version = metadata.format_version ?? [0, 0];
  if (metadata.format !== 'symwasm' || version[0] !== FORMAT_VERSION[0]) {
    throw new ModelError(`${label}: module format ${version.join('.')} cannot run on this host (it reads `
      + `format ${FORMAT_VERSION[0]}.x); recompile the model with this symwasm`, STATUS.INVALID_PROGRAM);
  }
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
  checkFormat(metadata, label);
  const imports = WebAssembly.Module.imports(module);
  if (imports.length) {
    throw new Error(`${label}: the module imports ${JSON.stringify(imports.map((i) => i.name))}; `
      + 'symwasm modules import nothing');
  }
  // async instantiation: browsers refuse to instantiate large modules synchronously
  const instance = await WebAssembly.instantiate(module, {});
  return new Model(instance, metadata);
}

/**
 * A loaded module: one instance with its own VM context. `run` takes `{name: {data, shape}}`
 * and returns `{name: {data, shape, dtype}}`.
 */
export class Model {
  #exports;
  #ctx = 0;

  /**
   * Use loadModel(); this creates the model's context, which verifies the embedded program.
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
    const version = this.#call('sw_format_version');
    if (version >>> 16 !== metadata.format_version[0] || (version & 0xffff) !== metadata.format_version[1]) {
      throw new ModelError(`the module's code is format ${version >>> 16}.${version & 0xffff} but its metadata `
        + `says ${metadata.format_version.join('.')}: the file is corrupt`, STATUS.INVALID_PROGRAM);
    }
    this.#ctx = this.#call('sw_context_create');
    if (!this.#ctx) throw new ModelError('out of memory while creating the model\'s context', STATUS.OUT_OF_MEMORY);
    this.#check(this.#call('sw_context_status', this.#ctx));
  }

  /**
   * Cap the bytes the VM may hold at once (the module's default is 2 GiB); a run that needs
   * more fails with a ModelError of status 3 and the model stays usable.
   * @param {number | bigint} bytes
   */
  setMemoryLimit(bytes) {
    this.#live();
    this.#call('sw_set_memory_limit', this.#ctx, BigInt(bytes));
  }

  /** Free the model's buffers and context now; the model cannot run afterwards. */
  dispose() {
    if (this.#ctx) this.#call('sw_context_destroy', this.#ctx);
    this.#ctx = 0;
  }

  #live() {
    if (!this.#ctx) throw new ModelError('the model was disposed', STATUS.INVALID_INPUT);
  }

  /**
   * Run the model.
   * @param {Record<string, {data: Float32Array | Int32Array | BigInt64Array | Uint8Array, shape: number[]}>} feeds
   * @returns {Promise<Record<string, {data: Float32Array | Int32Array | BigInt64Array | Uint8Array, shape: number[], dtype: string}>>}
   *   every output, copied out of the module's memory (the next run reuses it)
   */
  async run(feeds) {
    this.#live();
    if (feeds === null || typeof feeds !== 'object') {
      throw new TypeError('run: feeds must be an object {name: {data, shape}}');
    }
    const names = this.inputs.map((i) => i.name);
    const unknown = Object.keys(feeds).filter((k) => !names.includes(k));
    if (unknown.length) {
      throw new ModelError(`unknown input(s) ${unknown.sort().join(', ')}; the model takes ${names.join(', ')}`,
        STATUS.INVALID_INPUT);
    }
    this.inputs.forEach((info, index) => {
      if (!Object.hasOwn(feeds, info.name)) {
        throw new ModelError(`input '${info.name}' is missing`, STATUS.INVALID_INPUT);
      }
      this.#setInput(index, info, feeds[info.name]);
    });
    this.#check(this.#call('sw_run', this.#ctx));
    const result = {};
    this.outputs.forEach((info, i) => {
      const desc = this.#call('sw_output_tensor', this.#ctx, i) >>> 0;
      if (!desc) throw new Error(`output '${info.name}' was not produced (a symwasm bug)`);
      // a DataView needs no alignment and states the byte order (wasm is little-endian)
      const view = new DataView(this.#memory(), desc, TENSOR_LAYOUT.size);
      const code = view.getInt32(TENSOR_LAYOUT.dtype, true);
      const dtype = CODE_DTYPES[code];
      if (!dtype) throw new Error(`output '${info.name}': dtype code ${code} is unknown (a symwasm bug)`);
      const rank = view.getInt32(TENSOR_LAYOUT.rank, true);
      const shape = Array.from({ length: rank }, (_, a) => Number(view.getBigInt64(TENSOR_LAYOUT.shape + 8 * a, true)));
      const ptr = view.getUint32(TENSOR_LAYOUT.data, true);
      const T = DTYPES[dtype].array;
      const nbytes = shape.reduce((a, b) => a * b, 1) * T.BYTES_PER_ELEMENT;
      // slice() copies, so the result survives the next run; the copy is also aligned
      result[info.name] = { data: new T(this.#memory().slice(ptr, ptr + nbytes)), shape, dtype };
    });
    return result;
  }

  #setInput(index, info, feed) {
    const { data, shape, dtype: named } = feed ?? {};
    if (!ArrayBuffer.isView(data) || data instanceof DataView) {
      const got = ArrayBuffer.isView(feed) ? `a bare ${feed.constructor.name}`
        : `data ${data === null ? 'null' : data?.constructor?.name ?? typeof data}`;
      throw new ModelError(`input '${info.name}': expected {data, shape} with data a typed array of its dtype `
        + `(${info.dtype}: ${DTYPES[info.dtype].array.name}), got ${got}`, STATUS.INVALID_INPUT);
    }
    const dtype = dtypeOf(data, info.dtype, named);
    if (dtype === null) {
      const what = named !== undefined ? `dtype '${named}' with a ${data.constructor.name}` : `dtype ${arrayName(data)}`;
      throw new ModelError(`input '${info.name}': ${what} is not supported (expected ${info.dtype})`,
        STATUS.INVALID_INPUT);
    }
    if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
      throw new ModelError(`input '${info.name}': shape must be an array of non-negative integers, `
        + `got ${JSON.stringify(shape)}`, STATUS.INVALID_INPUT);
    }
    if (shape.length > MAX_RANK) {
      throw new ModelError(`input '${info.name}': rank ${shape.length} exceeds ${MAX_RANK}`, STATUS.INVALID_INPUT);
    }
    const count = shape.reduce((a, b) => a * b, 1);
    if (data.length !== count) {
      throw new ModelError(`input '${info.name}': data has ${data.length} elements but shape `
        + `[${shape.join(', ')}] needs ${count}`, STATUS.INVALID_INPUT);
    }
    const ptr = this.#call('sw_input_buffer', this.#ctx, index, BigInt(data.byteLength)) >>> 0;
    if (!ptr) this.#check(STATUS.OUT_OF_MEMORY);
    const dst = new Uint8Array(this.#memory(), ptr, data.byteLength);
    if (dtype === 'bool') {
      // the VM's bool is exactly 0 or 1, as numpy guarantees; a Uint8Array may hold any byte
      for (let i = 0; i < data.length; i++) dst[i] = data[i] ? 1 : 0;
    } else {
      dst.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
    }
    const shapePtr = this.#call('sw_shape_buffer', this.#ctx) >>> 0;
    // a DataView needs no 8-byte alignment and states the byte order (wasm is little-endian)
    const view = new DataView(this.#memory(), shapePtr, MAX_RANK * 8);
    for (let a = 0; a < MAX_RANK; a++) view.setBigInt64(a * 8, BigInt(shape[a] ?? 0), true);
    this.#check(this.#call('sw_set_input', this.#ctx, index, DTYPES[dtype].code, shape.length));
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
      const ptr = this.#call('sw_last_error', this.#ctx) >>> 0;
      const len = this.#call('sw_last_error_len', this.#ctx);
      const message = new TextDecoder().decode(new Uint8Array(this.#memory(), ptr, len));
      throw new ModelError(message || STATUS_MEANING[status] || `status ${status}`, status);
    }
  }
}
