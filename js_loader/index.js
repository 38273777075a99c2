/**
 * The symwasm JS loader: load a compiled `.wasm` model and run it from Node or a browser.
 *
 * A thin layer over the module ABI (docs/ABI.md) that mirrors the Python host
 * (`wasm_runtime`): the same validation, the same error messages, the same status codes.
 * Plain ES module with no dependencies and no build step. The ABI's tables (dtypes, status
 * codes, exports, the tensor layout) come from `abi.js`, generated from toolkit/abi.py.
 * `createWorker` runs a model in a worker (worker.js): off the calling thread, and a run can
 * be cancelled. A model's threads variant runs a call's split kernels on several threads,
 * each a worker (thread.js) with an instance of its own over the one shared memory.
 */
import {
  DTYPES, EXPORTS, EXPORTS_SINCE, FORMAT_VERSION, MAX_RANK, SHARED_DIM_MARK, STATUS, STATUS_MEANING, TENSOR_LAYOUT,
} from './abi.js';

export { DTYPES, FORMAT_VERSION, STATUS };

const CODE_DTYPES = Object.fromEntries(Object.entries(DTYPES).map(([name, d]) => [d.code, name]));
/** Everything the host calls, checked once at load so a foreign module fails there with a
 * plain message instead of a TypeError mid-run: all but the exports a later format added
 * (a module of an older minor version lacks them; the loader then takes the older way). */
const ABI_EXPORTS = ['memory', ...EXPORTS.filter((name) => !EXPORTS_SINCE[name])];
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
   * @param {{cause?: unknown}} [options]
   */
  constructor(message, status = STATUS.INTERNAL, options = undefined) {
    super(message, options);
    this.name = 'ModelError';
    this.status = status;
  }
}

/** A module that cannot be loaded, in the Python host's words: what was read is not a
 * symwasm module this loader runs. */
function loadError(label, reason, cause) {
  return new ModelError(`${label}: cannot load the model: ${reason}`, STATUS.INVALID_PROGRAM,
    cause === undefined ? undefined : { cause });
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

/** The int64 at i32[at] as a Number, from its two 32-bit halves (wasm is little-endian): a
 * BigInt per dim, through a DataView, cost more than the run of a small model. Dims are safe
 * integers. */
function getInt64(i32, at) {
  return i32[at + 1] * 4294967296 + (i32[at] >>> 0);
}

/** Store the safe integer d as the int64 at i32[at] (the inverse of getInt64). */
function setInt64(i32, at, d) {
  i32[at] = d >>> 0;
  i32[at + 1] = Math.floor(d / 4294967296);
}

const isNode = typeof process !== 'undefined' && typeof process.versions?.node === 'string';

/** Strings that name something fetch() can load in Node; any other string there is a path. */
const FETCHABLE = /^(https?|data|blob):/i;

/** The TypeError for a source that is none of those loadModel takes. */
function notASource(source) {
  return new TypeError('a model source is a URL, a file path (Node), an ArrayBuffer, a Uint8Array '
    + `or a WebAssembly.Module, not ${source === null ? 'null' : typeof source}`);
}

/** A fetched model's response, refused unless it is a success. */
async function fetchSource(source, label) {
  const response = await fetch(source);
  if (!response.ok) throw new Error(`${label}: HTTP ${response.status} ${response.statusText}`);
  return response;
}

const EMPTY = new Uint8Array(0);
/** The least a read of a model file takes (Node): the first read holds the metadata and
 * variant sections unless the metadata is over 64 KiB. */
const FILE_READ_BYTES = 1 << 16;

/** `chunks` (Uint8Arrays of `length` bytes in all) as one array: the chunk itself when alone. */
function concat(chunks, length) {
  if (chunks.length === 1) return chunks[0];
  const out = new Uint8Array(length);
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.length;
  }
  return out;
}

/**
 * `readTo(n)` for a file that `next(wanted)` gives chunk by chunk (undefined at its end): it
 * resolves to the file's first n bytes as one array (all of them when it has fewer). Each
 * byte is read once.
 */
function prefixReader(next) {
  let chunks = [];
  let length = 0;
  let ended = false;
  return async (n) => {
    while (length < n && !ended) {
      const chunk = await next(n - length);
      if (chunk === undefined) ended = true;
      else {
        chunks.push(chunk);
        length += chunk.length;
      }
    }
    chunks = length ? [concat(chunks, length)] : [];
    return chunks[0] ?? EMPTY;
  };
}

/**
 * A model file given by path (Node) or URL, opened to be read from its front and at most once
 * in all: `readTo(n)` resolves to its first n bytes; then `whole()` to all of them or
 * `module()` to the file compiled, either reading on from where readTo stopped; `close()`
 * stops reading (a download is cancelled, a file closed).
 */
async function openNamed(source, label) {
  if (isNode && !FETCHABLE.test(label)) return openFile(source, label);
  const response = await fetchSource(source, label);
  // the first bytes are read from a clone, so that the response itself, with its URL, can be
  // compiled as it streams; what the clone read is still in the response
  let head;
  const stopHead = () => head?.cancel().catch(() => {});
  return {
    readTo: prefixReader(async () => {
      head ??= response.clone().body?.getReader();
      return (await head?.read())?.value;
    }),
    whole: async () => {
      stopHead();
      return new Uint8Array(await response.arrayBuffer());
    },
    module: async () => {
      stopHead();
      return compileResponse(response, label);
    },
    close: () => {
      stopHead();
      if (!response.bodyUsed) response.body?.cancel().catch(() => {});
    },
  };
}

/** openNamed for a path or file: URL (Node's fetch() cannot read files). */
async function openFile(source, label) {
  const { open } = await import('node:fs/promises');
  let file;
  try {
    file = await open(source instanceof URL || label.startsWith('file:') ? new URL(label) : source);
  } catch (e) {
    if (e.code === 'ENOENT') throw new Error(`no such model: ${label}`, { cause: e });
    throw e;
  }
  const { size } = await file.stat();
  let position = 0;
  const readTo = prefixReader(async (wanted) => {
    // the rest of the file in one read where it has the size stat said (a pipe has none)
    const buffer = new Uint8Array(Math.max(FILE_READ_BYTES, Math.min(wanted, size - position)));
    const { bytesRead } = await file.read(buffer, 0, buffer.length, position);
    position += bytesRead;
    return bytesRead ? buffer.subarray(0, bytesRead) : undefined;
  });
  const whole = async () => {
    try {
      return await readTo(Infinity);
    } finally {
      await file.close();
    }
  };
  return {
    readTo,
    whole,
    module: async () => compileBytes(await whole(), label),
    close: () => file.close().catch(() => {}),
  };
}

/** A fetched module compiled as it streams where the response's type allows. */
async function compileResponse(response, label) {
  // compileStreaming insists on the application/wasm type; many static servers send another
  if (response.headers.get('content-type')?.startsWith('application/wasm')) {
    try {
      return await WebAssembly.compileStreaming(response);
    } catch (e) {
      if (e instanceof WebAssembly.CompileError) throw loadError(label, `not a valid WebAssembly module (${e.message})`, e);
      throw e;
    }
  }
  return compileBytes(await response.arrayBuffer(), label);
}

/**
 * Compile `source` into a WebAssembly.Module, labelled for messages. `threaded`: it is a
 * threads variant, whose memory's limits are read from its bytes too (`memory`: see
 * importedMemory; undefined for a module given compiled, whose bytes are gone).
 * @returns {Promise<{module: WebAssembly.Module, label: string, memory?: object | null}>}
 */
async function compileSource(source, threaded = false) {
  if (source instanceof WebAssembly.Module) return { module: source, label: 'the given module' };
  if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) {
    const label = 'the given bytes';
    const memory = threaded ? await importedMemory(bytesReader(source)) : null;
    return { module: await compileBytes(source, label), label, memory };
  }
  if (typeof source !== 'string' && !(source instanceof URL)) throw notASource(source);
  const label = String(source);
  const file = await openNamed(source, label);
  try {
    const memory = threaded ? await importedMemory(file.readTo) : null;
    return { module: await file.module(), label, memory };
  } finally {
    file.close();
  }
}

/** Bytes are checked for the wasm magic first so that a native library passed by mistake
 * gets a plain message rather than a CompileError about magic words. */
async function compileBytes(bytes, label) {
  const head = new Uint8Array(ArrayBuffer.isView(bytes) ? bytes.buffer : bytes, bytes.byteOffset ?? 0,
    Math.min(4, bytes.byteLength));
  if (head.length < 4 || WASM_MAGIC.some((b, i) => head[i] !== b)) {
    throw loadError(label, 'not a WebAssembly module');
  }
  try {
    return await WebAssembly.compile(bytes);
  } catch (e) {
    // a truncated or damaged file
    if (e instanceof WebAssembly.CompileError) throw loadError(label, `not a valid WebAssembly module (${e.message})`, e);
    throw e;
  }
}

function metadataOf(module, label) {
  const sections = WebAssembly.Module.customSections(module, SECTION);
  if (sections.length === 0) throw loadError(label, 'a WebAssembly module without symwasm metadata');
  let text;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(sections[0]);
  } catch (e) {
    throw loadError(label, 'its metadata is not valid UTF-8', e);
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw loadError(label, `its metadata is not valid JSON (${e.message})`, e);
  }
}

/** A module of another major format version cannot run on this loader. */
function checkFormat(metadata, label) {
  if (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata)) {
    throw loadError(label, 'the metadata is not a JSON object');
  }
  const version = Array.isArray(metadata.format_version) ? metadata.format_version : [0, 0];
  if (metadata.format !== 'symwasm' || version[0] !== FORMAT_VERSION[0]) {
    throw new ModelError(`${label}: module format ${version.join('.')} cannot run on this host (it reads `
      + `format ${FORMAT_VERSION[0]}.x); recompile the model with this symwasm`, STATUS.INVALID_PROGRAM);
  }
}

/** The fields the loader reads exist and have the right types, as the Python host checks. */
function checkMetadata(metadata, label) {
  for (const key of ['inputs', 'outputs']) {
    const items = metadata[key];
    if (!Array.isArray(items)) throw loadError(label, `the metadata has no list of ${key}`);
    for (const d of items) {
      if (d !== null && typeof d === 'object' && typeof d.name === 'string' && typeof d.dtype === 'string'
        && !Object.hasOwn(DTYPES, d.dtype)) {
        // a dtype a later minor format added: this loader cannot hand it over
        const version = Array.isArray(metadata.format_version) ? metadata.format_version.join('.') : '0.0';
        throw loadError(label, `${key.slice(0, -1)} '${d.name}' has dtype ${d.dtype}, which this host does not know `
          + `(the module is format ${version}, this host reads ${FORMAT_VERSION.join('.')}); load it with a newer symwasm`);
      }
      if (!(d !== null && typeof d === 'object' && typeof d.name === 'string' && Object.hasOwn(DTYPES, d.dtype)
        && Array.isArray(d.shape))) {
        throw loadError(label, `the metadata's ${key} entry ${JSON.stringify(d).slice(0, 80)} is not {name, dtype, shape}`);
      }
    }
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
 * @param {{variant?: string, threads?: number}} [options] variant: 'auto' (default) or one of
 *   VARIANTS (see prepare); threads: threads a call runs on, the caller's included (default:
 *   the CPUs, defaultThreads)
 * @returns {Promise<Model>}
 */
export async function loadModel(source, options = {}) {
  const threads = options?.threads === undefined ? await defaultThreads() : threadCount(options.threads);
  const { module, metadata, label, variant, memory: limits, whyOneThread } = await prepare(source, options?.variant,
    threads, false);
  const memory = limits ? sharedMemory(limits, label) : undefined;
  const model = new Model(await instantiate(module, label, memory), metadata, label,
    memory ? { module, memory } : { whyOneThread });
  model.variant = variant;
  try {
    await model.setThreads(threads);
  } catch (e) {
    model.dispose();
    throw e;
  }
  return model;
}

/** A model's variants, best first: the compiler's --relaxed-simd and --threads write the others. */
export const VARIANTS = Object.freeze(['relaxed-simd+threads', 'threads', 'relaxed-simd', 'baseline']);
const THREADS = 'threads';
const isThreaded = (variant) => variant.split('+').includes(THREADS);

/** Threads a call runs on unless told: the CPUs, as onnxruntime-web's numThreads. */
async function defaultThreads() {
  if (isNode) return (await import('node:os')).availableParallelism();
  return globalThis.navigator?.hardwareConcurrency || 1;
}

/** `n` when it is a count of threads; the Python host's error otherwise. */
function threadCount(n) {
  if (!(Number.isSafeInteger(n) && n >= 1)) {
    throw new ModelError(`threads must be a whole number of threads (1 or more), not ${typeof n === 'string' ? `'${n}'` : n}`,
      STATUS.INVALID_INPUT);
  }
  return n;
}

/** A browser's main thread: Atomics.wait, and so memory.atomic.wait32, trap there. */
const isBrowserMainThread = !isNode && typeof WorkerGlobalScope === 'undefined';
const MAIN_THREAD = 'a browser\'s main thread may not wait for other threads (run the model with createWorker to use '
  + 'threads)';

/** Why this environment cannot give a module shared memory, or null when it can. */
function sharedMemoryProblem() {
  if (typeof SharedArrayBuffer === 'undefined' || globalThis.crossOriginIsolated === false) {
    return isNode ? 'this Node has no SharedArrayBuffer' : 'the page is not cross-origin isolated, which shared '
      + 'memory needs (serve it with Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp)';
  }
  try {
    new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true });
  } catch {
    return 'this engine has no shared WebAssembly memory';
  }
  return null;
}

/** Why calls here cannot run on several threads whatever the model (`inWorker`: in
 * createWorker's worker rather than on this thread), or null when they can. */
function threadsProblem(inWorker) {
  return sharedMemoryProblem() ?? (!inWorker && isBrowserMainThread ? MAIN_THREAD : null);
}
const VARIANT_SECTION = 'symwasm.variant';

/** A module's bytes from its sections, each [id, content] (every probe's is under 128 bytes,
 * so its size is one LEB128 byte). */
function wasmModule(sections) {
  return new Uint8Array([...WASM_MAGIC, 0x01, 0x00, 0x00, 0x00, ...sections.flatMap(([id, content]) => [id, content.length, ...content])]);
}

/** A module with one function `() -> result` (no result when undefined) running `code`;
 * `more` are sections between the function and code sections (a memory). */
function probeFunction(result, code, more = []) {
  const body = [0x00, ...code, 0x0b];
  return wasmModule([[1, [0x01, 0x60, 0x00, ...(result === undefined ? [0x00] : [0x01, result])]], [3, [0x01, 0x00]],
    ...more, [10, [0x01, body.length, ...body]]]);
}

const [I32, V128] = [0x7f, 0x7b];
const V128_ZERO = [0xfd, 0x0c, ...new Array(16).fill(0)];
/**
 * One tiny module per WebAssembly feature a symwasm module may need, by the name the
 * compiler writes in its metadata (toolkit/codegen/target.py: WASM_FEATURES, and
 * relaxed-simd): each uses one instruction of its feature, so an engine has the feature
 * when it validates the probe.
 */
const FEATURE_PROBES = Object.freeze({
  simd128: probeFunction(V128, V128_ZERO),
  'bulk-memory': probeFunction(undefined, [0x41, 0, 0x41, 0, 0x41, 0, 0xfc, 0x0b, 0x00], [[5, [0x01, 0x00, 0x00]]]), // memory.fill
  'nontrapping-fptoint': probeFunction(I32, [0x43, 0, 0, 0, 0, 0xfc, 0x00]), // i32.trunc_sat_f32_s
  'sign-ext': probeFunction(I32, [0x41, 0, 0xc0]), // i32.extend8_s
  'mutable-globals': wasmModule([[6, [0x01, I32, 0x01, 0x41, 0, 0x0b]], [7, [0x01, 0x01, 0x67, 0x03, 0x00]]]), // exported
  'relaxed-simd': probeFunction(V128, [...V128_ZERO, ...V128_ZERO, ...V128_ZERO, 0xfd, 0x85, 0x02]), // f32x4.relaxed_madd
  // a shared memory and i32.atomic.load
  [THREADS]: probeFunction(I32, [0x41, 0, 0xfe, 0x10, 0x02, 0x00], [[5, [0x01, 0x03, 0x01, 0x01]]]),
});
/** The features a variant's name adds to the baseline's. */
const VARIANT_FEATURES = ['relaxed-simd', THREADS];

/** Those of `features` (metadata names) this engine does not validate. A name without a
 * probe is not checked: the engine's compile error then says what is wrong. */
function missingFeatures(features) {
  return features.filter((f) => Object.hasOwn(FEATURE_PROBES, f) && !WebAssembly.validate(FEATURE_PROBES[f]));
}

/**
 * The model variants that can run here, best first: relaxed SIMD where the engine validates
 * `f32x4.relaxed_madd` (Chromium, Firefox, Node 22; Node 20 with
 * --experimental-wasm-relaxed-simd), threads where it validates atomics and this environment
 * gives shared memory (Node; a browser page only when cross-origin isolated), the baseline
 * on any engine with WebAssembly SIMD, and none on one without.
 * @returns {string[]}
 */
export function supportedVariants() {
  const missing = missingFeatures(Object.keys(FEATURE_PROBES));
  if (missing.some((f) => !VARIANT_FEATURES.includes(f))) return [];
  const lacks = (f) => missing.includes(f) || (f === THREADS && sharedMemoryProblem() !== null);
  return VARIANTS.filter((name) => !name.split('+').some(lacks));
}

function variantOf(module) {
  const sections = WebAssembly.Module.customSections(module, VARIANT_SECTION);
  return sections.length ? new TextDecoder().decode(sections[0]) : 'baseline';
}

/** The file of variant `name` next to the file `label` names (a path or URL), or null. */
function siblingOf(source, label, file) {
  if (typeof file !== 'string' || file.includes('/') || file.includes('\\')) return null;
  if (source instanceof URL || FETCHABLE.test(label) || label.startsWith('file:')) return new URL(file, label).href;
  if (!isNode) return new URL(file, new URL(label, globalThis.location?.href)).href;
  const slash = label.lastIndexOf('/');
  return slash < 0 ? file : label.slice(0, slash + 1) + file;
}

/** The unsigned LEB128 number (a u32) at `at` in `view`, read no further than `end`:
 * [value, where it ends], or null when it runs past `end` or over 5 bytes. */
function u32At(view, at, end) {
  let value = 0;
  for (let shift = 0; at < end && shift < 35; shift += 7) {
    const byte = view[at++];
    value += (byte & 0x7f) * 2 ** shift;
    if (!(byte & 0x80)) return [value, at];
  }
  return null;
}

/** The section at `pos` in a module's bytes: its id and where its content starts and ends
 * (the end may lie past the bytes); null when its header is cut short or malformed. */
function sectionAt(view, pos) {
  const size = u32At(view, pos + 1, view.length);
  return size && { id: view[pos], start: size[1], end: size[1] + size[0] };
}

/** A custom section's [name, content], or null when its name does not fit in it. */
function customSection(view, { start, end }) {
  const n = u32At(view, start, end);
  if (n === null || n[1] + n[0] > end) return null;
  return [new TextDecoder().decode(view.subarray(n[1], n[1] + n[0])), view.subarray(n[1] + n[0], end)];
}

const isModuleHead = (view) => view.length >= 8 && WASM_MAGIC.every((b, i) => view[i] === b);

/** A module's custom sections by name (the first of a name), read from its bytes without
 * compiling them (null if the bytes are not a module's). */
function customSectionsOf(bytes) {
  const view = new Uint8Array(ArrayBuffer.isView(bytes) ? bytes.buffer : bytes, bytes.byteOffset ?? 0, bytes.byteLength);
  if (!isModuleHead(view)) return null;
  const out = new Map();
  for (let pos = 8; pos < view.length;) {
    const section = sectionAt(view, pos);
    if (section === null || section.end > view.length) return null;
    if (section.id === 0) {
      const custom = customSection(view, section);
      if (custom === null) return null;
      if (!out.has(custom[0])) out.set(...custom);
    }
    pos = section.end;
  }
  return out;
}

/** A module's bytes as openNamed's `readTo`, which gives them all whatever it is asked. */
function bytesReader(bytes) {
  const view = new Uint8Array(ArrayBuffer.isView(bytes) ? bytes.buffer : bytes, bytes.byteOffset ?? 0, bytes.byteLength);
  return async () => view;
}

/**
 * The limits of the memory a threads variant imports, {initial, maximum (undefined when it
 * has none), shared}, in pages: from its import section, read with `readTo` (openNamed's) no
 * further, as WebAssembly.Module.imports names an import but not its limits. Null when the
 * first import is not a memory env.memory or the bytes are cut short.
 */
async function importedMemory(readTo) {
  if (!isModuleHead(await readTo(8))) return null;
  for (let pos = 8; ;) {
    const section = sectionAt(await readTo(pos + 6), pos);
    // sections come in order of their ids (custom sections, 0, anywhere): types, then imports
    if (section === null || section.id > 2) return null;
    if (section.id === 2) {
      const view = await readTo(section.end);
      return section.end <= view.length ? memoryImport(view, section) : null;
    }
    pos = section.end;
  }
}

/** The import section's first entry when it is a memory env.memory: its limits, as importedMemory. */
function memoryImport(view, { start, end }) {
  const name = (at) => {
    const n = u32At(view, at, end);
    return n && n[1] + n[0] <= end ? [new TextDecoder().decode(view.subarray(n[1], n[1] + n[0])), n[1] + n[0]] : null;
  };
  const count = u32At(view, start, end);
  const module = count && count[0] > 0 && name(count[1]);
  const field = module && name(module[1]);
  if (!field || module[0] !== 'env' || field[0] !== 'memory' || view[field[1]] !== 0x02) return null;
  // limits: flags (bit 0 a maximum follows, bit 1 shared), the minimum, the maximum
  const flags = view[field[1] + 1];
  const initial = u32At(view, field[1] + 2, end);
  const maximum = initial && flags & 1 ? u32At(view, initial[1], end) : undefined;
  if (!initial || maximum === null) return null;
  return { initial: initial[0], maximum: maximum?.[0], shared: (flags & 2) !== 0 };
}

/**
 * The custom sections at the front of a module, before its first other section, read with
 * `readTo` (openNamed's) no further than the metadata and variant sections, which symwasm
 * writes right after the header (docs/ABI.md). Null when they are not both there: a file
 * written before they moved to the front (they were at its end), a file cut short, or one
 * that is not a module.
 */
async function frontSections(readTo) {
  if (!isModuleHead(await readTo(8))) return null;
  const sections = new Map();
  for (let pos = 8; !sections.has(SECTION) || !sections.has(VARIANT_SECTION);) {
    const section = sectionAt(await readTo(pos + 6), pos); // an id and a size of up to 5 bytes
    if (section === null || section.id !== 0) return null;
    const view = await readTo(section.end);
    const custom = section.end <= view.length ? customSection(view, section) : null;
    if (custom === null) return null;
    if (!sections.has(custom[0])) sections.set(...custom);
    pos = section.end;
  }
  return sections;
}

/**
 * The model `prepare` was given, opened: its label, its custom sections, `readTo`
 * (openNamed's), `module()`, which compiles it, and `close()`, which stops reading it. A file
 * named by path or URL is read up to its metadata and variant sections and no further until
 * `module()` reads on; a file written before those sections moved to the front is read whole.
 */
async function openGiven(source) {
  if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) {
    const label = 'the given bytes';
    return { label, sections: customSectionsOf(source), readTo: bytesReader(source),
      module: () => compileBytes(source, label), close() {} };
  }
  if (typeof source !== 'string' && !(source instanceof URL)) throw notASource(source);
  const label = String(source);
  const file = await openNamed(source, label);
  let sections;
  try {
    sections = await frontSections(file.readTo);
  } catch (e) {
    file.close();
    throw e;
  }
  if (sections === null) {
    const bytes = await file.whole();
    return { label, sections: customSectionsOf(bytes), readTo: bytesReader(bytes), module: () => compileBytes(bytes, label),
      close() {} };
  }
  let open = true;
  return {
    label,
    sections,
    readTo: file.readTo,
    // closed when another variant's file was fetched instead, which turned out to be another
    // model's: then this file is read anew
    module: async () => (open ? file.module() : (await compileSource(source)).module),
    close: () => {
      open = false;
      file.close();
    },
  };
}

/**
 * Compile `source` (or the variant of it `want` asks for) and check its metadata:
 * everything short of instantiating, so a foreign module is rejected unrun. The metadata is
 * read from the file before it is compiled, so that a file needing a WebAssembly feature
 * this engine lacks is refused by name rather than by a CompileError. A model given by URL
 * or path is a set of files, one per variant, that its metadata lists: with "auto" the best
 * variant whose features this engine validates runs, another file only if the metadata
 * lists it (nothing is fetched on a guess) and only if that file carries the same metadata;
 * a threads variant only when a call may run on `threads` here (`inWorker`: in createWorker's
 * worker). The given file is read only as far as its metadata until the variant is chosen,
 * then read on, or left for the other variant's file. Bytes and modules run as given (a module
 * compiled here has every feature it needs).
 * @returns {Promise<{module: WebAssembly.Module, metadata: object, label: string, variant: string,
 *   memory: object | null, whyOneThread: string}>} memory: a threads variant's (importedMemory);
 *   whyOneThread: why a call will run on one thread although asked for more ('' when it was not)
 */
async function prepare(source, want = 'auto', threads = 1, inWorker = false) {
  want ??= 'auto';
  if (want !== 'auto' && !VARIANTS.includes(want)) {
    throw new TypeError(`unknown variant '${want}' (choose auto, ${VARIANTS.join(', ')})`);
  }
  const blocked = threads > 1 ? threadsProblem(inWorker) : null;
  let found;
  if (source instanceof WebAssembly.Module) {
    found = checked(await compileSource(source));
    if (want !== 'auto' && found.variant !== want) {
      throw new ModelError(`${found.label}: cannot run the ${want} variant: it is the ${found.variant} variant`,
        STATUS.INVALID_PROGRAM);
    }
  } else {
    const given = await openGiven(source);
    try {
      found = await chooseVariant(given, source, want, threads > 1 && blocked === null);
    } finally {
      given.close();
    }
  }
  found.whyOneThread = threads > 1 && !isThreaded(found.variant)
    ? blocked ?? found.whyOneThread ?? `it is the ${found.variant} variant, which has no threads` : '';
  return found;
}

/** prepare's choice among the files of the model `given` is (a file opened by openGiven);
 * `threaded`: a threads variant may run. */
async function chooseVariant(given, source, want, threaded) {
  const { label, sections } = given;
  let metadata = null;
  try {
    metadata = JSON.parse(new TextDecoder().decode(sections?.get(SECTION)));
  } catch { /* the checks of the given file say what is wrong */ }
  const own = sections?.has(VARIANT_SECTION) ? new TextDecoder().decode(sections.get(VARIANT_SECTION)) : 'baseline';
  // read before any other file is opened, which closes this one
  const ownMemory = isThreaded(own) ? await importedMemory(given.readTo) : null;
  const variants = metadata?.variants !== null && typeof metadata?.variants === 'object' ? metadata.variants : {};
  const features = (name) => {
    const listed = variants[name]?.features ?? (name === own ? metadata?.features : null);
    return Array.isArray(listed) ? listed.filter((f) => typeof f === 'string') : [];
  };
  // a path or URL names a set of files, one per variant; bytes are the one they are
  const named = typeof source === 'string' || source instanceof URL;
  const files = named ? variants : {};
  const candidates = want === 'auto'
    ? VARIANTS.filter((name) => (name === own || Object.hasOwn(files, name)) && (threaded || !isThreaded(name)))
    : [want];
  const problems = new Map();
  // a variant without threads chosen by auto where threads were wanted: why the threads variants were not
  const chosen = (found) => {
    if (want === 'auto' && threaded && !isThreaded(found.variant)) {
      const tried = [...problems].filter(([name]) => isThreaded(name));
      const none = named ? 'the model has no threads variant (compile with --threads)' : `it is the ${own} variant, `
        + 'which has no threads (give the threads variant\'s bytes, or load the model by path or URL)';
      found.whyOneThread = tried.length ? tried.map(([name, problem]) => `${name}: ${problem}`).join('; ') : none;
    }
    return found;
  };
  for (const name of candidates) {
    const missing = missingFeatures(features(name));
    let problem;
    if (!named && name !== own) {
      problem = `it is the ${own} variant`;
    } else if (missing.length) {
      problem = `this engine lacks ${missing.join(', ')}`;
    } else if (name === own) {
      return chosen(checked({ module: await given.module(), label, memory: ownMemory }));
    } else {
      const other = siblingOf(source, label, files[name]?.file);
      if (other === null) {
        problem = `the model has no ${name} variant (compile with ${name.split('+').map((f) => `--${f}`).join(' and ')})`;
      } else {
        given.close(); // no more of it is downloaded
        const alt = checked(await compileSource(other, isThreaded(name)));
        if (alt.variant === name && JSON.stringify(alt.metadata) === JSON.stringify(metadata)) return chosen(alt);
        problem = `${alt.label} is not the ${name} variant of this model (its metadata differs)`;
      }
    }
    if (want !== 'auto') throw new ModelError(`${label}: cannot run the ${want} variant: ${problem}`, STATUS.INVALID_PROGRAM);
    problems.set(name, problem);
  }
  // the file's own variant was a candidate and failed: this engine lacks a feature it needs
  if (candidates.includes(own)) {
    const each = [...problems].map(([name, problem]) => `${name}: ${problem}`);
    throw loadError(label, problems.size === 1 ? problems.get(own) : `no variant of it runs on this engine (${each.join('; ')})`);
  }
  return chosen(checked({ module: await given.module(), label, memory: ownMemory }));
}

/**
 * A compiled module (compileSource's result) checked: its metadata, format and imports: none,
 * but a threads variant's one shared memory, whose limits `memory` gives (importedMemory's;
 * undefined when the module came compiled).
 */
function checked({ module, label, memory }) {
  const metadata = metadataOf(module, label);
  checkFormat(metadata, label);
  checkMetadata(metadata, label);
  const variant = variantOf(module);
  const imports = WebAssembly.Module.imports(module);
  if (!isThreaded(variant)) {
    if (imports.length) {
      throw loadError(label, `the module imports ${JSON.stringify(imports.map((i) => i.name))}; `
        + 'symwasm modules import nothing');
    }
    return { module, metadata, label, variant, memory: null };
  }
  if (imports.length !== 1 || imports[0].module !== 'env' || imports[0].name !== 'memory' || imports[0].kind !== 'memory') {
    throw loadError(label, `the module imports ${JSON.stringify(imports.map((i) => `${i.module}.${i.name}`))}; `
      + `a symwasm ${variant} variant imports one shared memory, env.memory`);
  }
  if (memory === undefined) {
    throw loadError(label, `it is the ${variant} variant, whose memory's size this loader reads from the module's `
      + 'bytes: give its bytes, path or URL rather than a WebAssembly.Module');
  }
  if (memory === null || !memory.shared || memory.maximum === undefined) {
    throw loadError(label, 'its import section does not declare env.memory a shared memory with a maximum size');
  }
  return { module, metadata, label, variant, memory };
}

/** A threads variant's memory: shared, of the limits it imports (importedMemory's). */
function sharedMemory({ initial, maximum }, label) {
  try {
    return new WebAssembly.Memory({ initial, maximum, shared: true });
  } catch (e) {
    throw loadError(label, `cannot make its shared memory of ${initial} to ${maximum} pages (${e.message})`, e);
  }
}

/**
 * `memory`: a threads variant's shared memory (sharedMemory), which it imports.
 * @returns {Promise<WebAssembly.Instance>}
 */
async function instantiate(module, label, memory) {
  try {
    // async instantiation: browsers refuse to instantiate large modules synchronously
    return await WebAssembly.instantiate(module, memory ? { env: { memory } } : {});
  } catch (e) {
    // the imports were checked, so a LinkError cannot happen; memory that cannot be reserved can
    throw loadError(label, `cannot instantiate the module (${e.message})`, e);
  }
}

/** The frozen `inputs` and `outputs` of a model, from its metadata. */
/**
 * The value of a dim formula from a module's metadata (the memory plan's arena size), as
 * the compiler writes it: a number, ['sym', name], ['poly', [[coef, [atom, ...]], ...]] or
 * [op, ...args] for floordiv, mod, div, min, max, bcast and ifzero.
 * @param {number | Array} f
 * @param {Record<string, number>} bindings symbol values
 * @returns {number}
 */
export function evaluateFormula(f, bindings) {
  if (typeof f === 'number') return f;
  const [op, ...args] = f;
  if (op === 'sym') {
    if (!(args[0] in bindings)) throw new RangeError(`symbol '${args[0]}' needs a value`);
    return Number(bindings[args[0]]);
  }
  if (op === 'poly') {
    return args[0].reduce((total, [coef, atoms]) =>
      total + atoms.reduce((term, a) => term * evaluateFormula(a, bindings), coef), 0);
  }
  const v = args.map((a) => evaluateFormula(a, bindings));
  const floorDiv = (a, b) => Math.floor(a / b);
  switch (op) {
    case 'floordiv': case 'div': return floorDiv(v[0], v[1]);
    case 'mod': return v[0] - floorDiv(v[0], v[1]) * v[1];
    case 'min': return Math.min(...v);
    case 'max': return Math.max(...v);
    case 'bcast': return v[0] === 1 ? v[1] : v[0];
    case 'ifzero': return v[0] !== 0 ? v[0] : v[1];
    default: throw new Error(`unknown formula operation '${op}'`);
  }
}

/**
 * The bytes a run with these symbol values needs under the memory limit, before running it:
 * the static arena, the dynamic arena the compiler planned and the input buffers (buffers
 * sized from data come on top: metadata.memory.runtime).
 * @param {object} metadata
 * @param {Record<string, number>} bindings
 */
function requiredBytes(metadata, given) {
  // an input's own copy of a shared dim name (N@y) is sized from the name when not given
  const bindings = { ...given };
  for (const symbol of Object.keys(metadata.symbols ?? {})) {
    const declared = symbol.split(SHARED_DIM_MARK)[0];
    if (!(symbol in bindings) && declared in bindings) bindings[symbol] = bindings[declared];
  }
  const plan = metadata.memory ?? { static_bytes: metadata.program.arena_size ?? 0, dynamic_bytes: 0 };
  let total = plan.static_bytes + evaluateFormula(plan.dynamic_bytes, bindings);
  for (const info of metadata.inputs) {
    let n = DTYPES[info.dtype].size;
    for (const d of info.shape) {
      if (typeof d === 'string' && !(d in bindings)) throw new RangeError(`symbol '${d}' needs a value`);
      n *= typeof d === 'string' ? Number(bindings[d]) : d;
    }
    total += n;
  }
  return total;
}

function tensorInfos(metadata) {
  const info = ({ name, dtype, shape }) => Object.freeze({ name, dtype, shape: Object.freeze([...shape]) });
  return { inputs: Object.freeze(metadata.inputs.map(info)), outputs: Object.freeze(metadata.outputs.map(info)) };
}

/** An input's default (compile --overridable: {shape, data: base64 of little-endian bytes}) as
 * the feed a run that does not give the input gets; null when it has none. */
function defaultFeed({ dtype, default: given }) {
  if (!given) return null;
  const bytes = Uint8Array.from(atob(given.data), (c) => c.charCodeAt(0));
  return { data: new DTYPES[dtype].array(bytes.buffer), shape: given.shape, dtype };
}

/** UTF-8 text from bytes in a module's memory: a shared memory's are copied first, as
 * browsers' TextDecoder refuses a view of a SharedArrayBuffer. */
function decodeUtf8(bytes) {
  return new TextDecoder().decode(bytes.buffer instanceof ArrayBuffer ? bytes : bytes.slice());
}

/** How long setThreads waits for the threads it starts to enter the pool's loop. */
const THREAD_START_MS = 30_000;

/**
 * A loaded module: one instance with its own VM context. `run` takes `{name: {data, shape}}`
 * and returns `{name: {data, shape, dtype}}`.
 */
export class Model {
  /** Threads a call runs on, the caller's included (setThreads). */
  threads = 1;
  /** Why they are fewer than asked; '' when they are not. */
  threadsNote = '';
  #exports;
  /** The module's memory: its export, or a threads variant's shared memory, which it imports. */
  #wasmMemory;
  /** A threads variant's module, which each of the pool's threads instantiates; null otherwise. */
  #module = null;
  /** Why an instance without threads runs calls on one thread. */
  #whyOneThread;
  /** The workers running the pool's threads (thread.js). */
  #threadWorkers = [];
  /** The last setThreads while it is under way (each waits for the one before); else null. */
  #starting = null;
  #label;
  #ctx = 0;
  /** Format 3.5: the context's io table (sw_io_table), so a run is one call (sw_run_io); 0 before. */
  #io = 0;
  /** Per input, its buffer's address and capacity: asked for again only when it must grow. */
  #buffers = [];
  /** #heap()'s views, with the buffer they view. */
  #views = null;
  /** The inputs' names, for run's check of the feeds. */
  #inputNames;
  /** Per input, its default feed (compile --overridable), decoded the first time a run omits it. */
  #defaults = [];

  /**
   * Use loadModel(); this checks the metadata against the program and creates the model's
   * context, which verifies the embedded program. Calls run on one thread until setThreads.
   * @param {WebAssembly.Instance} instance
   * @param {object} metadata checked by checkFormat and checkMetadata
   * @param {string} label the source, for messages
   * @param {{module?: WebAssembly.Module, memory?: WebAssembly.Memory, whyOneThread?: string}} [threading]
   *   a threads variant's module and the shared memory it was instantiated with; or for another
   *   variant, why it runs on one thread (default: it has no threads)
   */
  constructor(instance, metadata, label = 'the given module', threading = {}) {
    const missing = ABI_EXPORTS.filter((name) => !(name in instance.exports) && !(name === 'memory' && threading.memory));
    if (missing.length) {
      throw loadError(label, `not a symwasm module of this format (it does not export ${missing.join(', ')})`);
    }
    this.#exports = instance.exports;
    this.#wasmMemory = threading.memory ?? instance.exports.memory;
    this.#module = threading.memory ? threading.module : null;
    this.#whyOneThread = threading.whyOneThread || 'this .wasm has no threads (compile with --threads for its threads '
      + 'variant, which needs shared memory)';
    this.#label = label;
    this.metadata = metadata;
    this.target = metadata.target;
    Object.assign(this, tensorInfos(metadata));
    this.#inputNames = new Set(this.inputs.map((i) => i.name));
    const version = this.#call('sw_format_version');
    if (version >>> 16 !== metadata.format_version[0] || (version & 0xffff) !== metadata.format_version[1]) {
      throw new ModelError(`${label}: the module's code is format ${version >>> 16}.${version & 0xffff} but its `
        + `metadata says ${metadata.format_version.join('.')}: the file is corrupt`, STATUS.INVALID_PROGRAM);
    }
    this.#checkProgram(label);
    this.#ctx = this.#call('sw_context_create');
    if (!this.#ctx) {
      throw new ModelError(`${label}: out of memory while creating the model's context`, STATUS.OUT_OF_MEMORY);
    }
    this.#check(this.#call('sw_context_status', this.#ctx));
    if ('sw_io_table' in instance.exports && 'sw_run_io' in instance.exports) {
      this.#io = this.#call('sw_io_table', this.#ctx) >>> 0;
    }
  }

  /** The metadata must describe the program the module runs: a module whose metadata was
   * edited (inputs reordered, a dtype changed) would otherwise run silently wrong. */
  #checkProgram(label) {
    const where = `${label}: the module's metadata disagrees with its program`;
    const [nIn, nOut] = [this.#call('sw_num_inputs'), this.#call('sw_num_outputs')];
    if (nIn !== this.inputs.length || nOut !== this.outputs.length) {
      throw new ModelError(`${where}: the program has ${nIn} inputs and ${nOut} outputs, the metadata `
        + `${this.inputs.length} and ${this.outputs.length}`, STATUS.INVALID_PROGRAM);
    }
    this.inputs.forEach((info, i) => {
      const name = this.#string(this.#call('sw_input_name', i));
      const [code, rank] = [this.#call('sw_input_dtype', i), this.#call('sw_input_rank', i)];
      if (name !== info.name || code !== DTYPES[info.dtype].code || rank !== info.shape.length) {
        throw new ModelError(`${where}: input ${i} is '${name}' (dtype code ${code}, rank ${rank}) in the program `
          + `but '${info.name}' (${info.dtype}, rank ${info.shape.length}) in the metadata`, STATUS.INVALID_PROGRAM);
      }
    });
    this.outputs.forEach((info, i) => {
      const name = this.#string(this.#call('sw_output_name', i));
      if (name !== info.name) {
        throw new ModelError(`${where}: output ${i} is '${name}' in the program but '${info.name}' in the metadata`,
          STATUS.INVALID_PROGRAM);
      }
    });
  }

  /** The NUL-terminated UTF-8 text at `ptr` (at most `limit` bytes, within memory). */
  #string(ptr, limit = 4096) {
    const memory = new Uint8Array(this.#memory());
    const start = Math.min(ptr >>> 0, memory.length);
    const bytes = memory.subarray(start, Math.min(start + limit, memory.length));
    const end = bytes.indexOf(0);
    return decodeUtf8(end < 0 ? bytes : bytes.subarray(0, end));
  }

  /**
   * Run calls on `n` threads from now on, the caller's included: a threads variant starts
   * n - 1 workers, each running one of the context's pool (the previous pool's stop first).
   * Another variant, or a browser's main thread, stays at one thread; `threadsNote` says why.
   * Results have the same bits whatever the count.
   * @param {number} n
   * @returns {Promise<number>} the threads calls run on (`threads`), once they have started
   */
  setThreads(n) {
    this.#live();
    const asked = threadCount(n);
    const started = (this.#starting ?? Promise.resolve()).catch(() => {}).then(() => this.#applyThreads(asked));
    this.#starting = started;
    started.finally(() => {
      if (this.#starting === started) this.#starting = null;
    }).catch(() => {});
    return started;
  }

  async #applyThreads(asked) {
    this.#live();
    let why = this.#whyOneThread;
    if (!this.#module || isBrowserMainThread) {
      if (this.#module) {
        // a threads variant named on a browser's main thread
        this.#stopThreads(this.#ctx, 1);
        why = MAIN_THREAD;
      }
      this.threads = 1;
    } else {
      this.threads = await this.#startThreads(asked);
      why = `the module's pool holds at most ${this.threads}`;
    }
    this.threadsNote = this.threads < asked ? `${this.threads} of ${asked} threads: ${why}` : '';
    return this.threads;
  }

  /** Stop the pool's threads (sw_set_threads returns once they have left its loop), make a
   * pool of `n` threads and end the old workers; returns the new pool's count. */
  #stopThreads(ctx, n) {
    const count = this.#call('sw_set_threads', ctx, n);
    for (const worker of this.#threadWorkers.splice(0)) worker.terminate();
    return count;
  }

  /** The threads of a pool of `asked`, each a worker: resolves to the count in effect once
   * every one is in the pool's loop (sw_threads_running). A dispose meanwhile waits for this:
   * the pool may not be freed while a thread is still entering it. */
  async #startThreads(asked) {
    const ctx = this.#ctx;
    const count = this.#stopThreads(ctx, asked);
    const failures = [];
    const Worker = await workerClass();
    this.#live();
    for (let index = 1; index < count; index++) {
      const stackTop = this.#call('sw_thread_stack', ctx, index) >>> 0;
      this.#threadWorkers.push(spawnThread(Worker, { module: this.#module, memory: this.#wasmMemory, stackTop, ctx, index },
        (reason) => failures.push(`thread ${index}: ${reason}`)));
    }
    const deadline = performance.now() + THREAD_START_MS;
    while (this.#call('sw_threads_running', ctx) < count - 1) {
      if (failures.length || performance.now() > deadline) {
        this.#stopThreads(ctx, 1);
        throw new ModelError(`${this.#label}: the model's threads did not start: `
          + `${failures.join('; ') || `not within ${THREAD_START_MS / 1000} s`}`, STATUS.INTERNAL);
      }
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
    this.#live();
    return count;
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

  /**
   * The bytes a run with these symbol values needs, before running it (see the README's
   * "Memory"): `model.requiredBytes({batch: 4, seq: 512}) <= budget`.
   * @param {Record<string, number>} bindings
   */
  requiredBytes(bindings) {
    return requiredBytes(this.metadata, bindings);
  }

  /**
   * Free the instance now: its context and buffers, its threads and their workers, and this
   * object's hold on the module's memory. Later runs and setMemoryLimit fail with a
   * ModelError; disposing again does nothing.
   */
  dispose() {
    const ctx = this.#ctx;
    if (!ctx) return;
    this.#ctx = 0;
    this.#buffers = [];
    // the pool stops its threads and waits for them to leave its loop; threads still starting
    // are waited for first (setThreads then rejects: the model was disposed)
    const destroy = () => {
      this.#call('sw_context_destroy', ctx);
      for (const worker of this.#threadWorkers.splice(0)) worker.terminate();
      this.#exports = null;
      this.#wasmMemory = null;
    };
    if (this.#starting) this.#starting.then(destroy, destroy);
    else destroy();
  }

  #live() {
    if (!this.#ctx) throw new ModelError(`${this.#label}: the model was disposed`, STATUS.INVALID_INPUT);
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
    const inputs = this.inputs;
    const keys = Object.keys(feeds);
    for (let j = 0; j < keys.length; j++) {
      if (!this.#inputNames.has(keys[j])) {
        const names = inputs.map((i) => i.name);
        const unknown = keys.filter((k) => !names.includes(k)).sort();
        const weights = unknown.filter((k) => (this.metadata.model.weight_inputs || []).includes(k));
        const why = weights.length ? ` (${weights.join(', ')}: initializers the model also lists as inputs, which ` +
          'symwasm compiles as the constants they hold; compile with --overridable ' +
          `${weights.join(',')} to let a run feed them)` : '';
        throw new ModelError(`unknown input(s) ${unknown.join(', ')}; the model takes ${names.join(', ')}${why}`,
          STATUS.INVALID_INPUT);
      }
    }
    for (let i = 0; i < inputs.length; i++) {
      const info = inputs[i];
      let feed = feeds[info.name];
      if (!Object.hasOwn(feeds, info.name)) {
        feed = this.#defaults[i] ??= defaultFeed(this.metadata.inputs[i]);
        if (feed === null) throw new ModelError(`input '${info.name}' is missing`, STATUS.INVALID_INPUT);
      }
      this.#setInput(i, info, feed);
    }
    this.#check(this.#call(this.#io ? 'sw_run_io' : 'sw_run', this.#ctx));
    const result = {};
    const outputs = this.outputs;
    for (let i = 0; i < outputs.length; i++) {
      const info = outputs[i];
      const desc = this.#io ? this.#io + (inputs.length + i) * TENSOR_LAYOUT.size
        : this.#call('sw_output_tensor', this.#ctx, i) >>> 0;
      const { buffer, i32 } = this.#heap();
      const at = desc >>> 2;
      const code = i32[at + (TENSOR_LAYOUT.dtype >>> 2)];
      const ptr = i32[at + (TENSOR_LAYOUT.data >>> 2)] >>> 0;
      if (!desc || (this.#io && !code && !ptr)) {
        throw new Error(`output '${info.name}' was not produced (a symwasm bug)`);
      }
      const dtype = CODE_DTYPES[code];
      if (!dtype) throw new Error(`output '${info.name}': dtype code ${code} is unknown (a symwasm bug)`);
      const rank = i32[at + (TENSOR_LAYOUT.rank >>> 2)];
      if (!(rank >= 0 && rank <= MAX_RANK)) throw new Error(`output '${info.name}': rank ${rank} (a symwasm bug)`);
      const shape = new Array(rank);
      let count = 1;
      let negative = false;
      for (let a = 0, s = at + (TENSOR_LAYOUT.shape >>> 2); a < rank; a++, s += 2) {
        shape[a] = getInt64(i32, s);
        count *= shape[a];
        negative ||= shape[a] < 0;
      }
      const { array, size } = DTYPES[dtype];
      const nbytes = count * size;
      if (negative || ptr + nbytes > buffer.byteLength) {
        throw new Error(`output '${info.name}': its ${nbytes} bytes at ${ptr} lie outside the module's memory `
          + '(a symwasm bug)');
      }
      if (dtype === 'string') {
        result[info.name] = { data: this.#readStrings(ptr, count), shape, dtype };
        continue;
      }
      // slice() copies, so the result survives the next run (and is not shared memory). A typed
      // array's slice() of a few elements took 40 ns in Node against 380 for the ArrayBuffer's;
      // data the VM did not align to its elements is copied as bytes, which aligns the copy
      const data = ptr % size === 0 ? new array(buffer, ptr, count).slice()
        : new array(new Uint8Array(buffer, ptr, nbytes).slice().buffer);
      result[info.name] = { data, shape, dtype };
    }
    return result;
  }

  /** Int32 and byte views of the module's memory, made again after it grows: growth detaches
   * a memory's buffer, or for a shared memory (which any of its threads may grow) leaves the
   * old buffer at its old length. */
  #heap() {
    const buffer = this.#memory();
    if (this.#views?.buffer.byteLength !== buffer.byteLength) {
      this.#views = { buffer, u8: new Uint8Array(buffer), i32: new Int32Array(buffer) };
    }
    return this.#views;
  }

  /** n string elements {address, length} at ptr, decoded from UTF-8. */
  #readStrings(ptr, n) {
    const view = new DataView(this.#memory(), ptr, 16 * n);
    const bytes = new Uint8Array(this.#memory());
    return Array.from({ length: n }, (_, i) => {
      const addr = Number(view.getBigInt64(16 * i, true));
      const len = Number(view.getBigInt64(16 * i + 8, true));
      return len ? decodeUtf8(bytes.subarray(addr, addr + len)) : '';
    });
  }

  /** A string input's buffer: the elements {address, length}, then every element's UTF-8
   * bytes (the VM checks that each element points into the buffer). */
  #writeStrings(index, info, data) {
    const bad = data.findIndex((s) => typeof s !== 'string');
    if (bad >= 0) {
      throw new ModelError(`input '${info.name}': element ${bad} is ${typeof data[bad]}, not a string`,
        STATUS.INVALID_INPUT);
    }
    const encoder = new TextEncoder();
    const parts = data.map((s) => encoder.encode(s));
    const nbytes = 16 * parts.length + parts.reduce((a, p) => a + p.length, 0);
    const ptr = this.#inputBuffer(index, nbytes);
    const view = new DataView(this.#memory(), ptr, nbytes);
    const bytes = new Uint8Array(this.#memory(), ptr, nbytes);
    let at = 16 * parts.length;
    parts.forEach((p, i) => {
      view.setBigInt64(16 * i, BigInt(ptr + at), true);
      view.setBigInt64(16 * i + 8, BigInt(p.length), true);
      bytes.set(p, at);
      at += p.length;
    });
  }

  #setInput(index, info, feed) {
    const { data, shape, dtype: named } = feed ?? {};
    if (info.dtype === 'string') {
      if (!Array.isArray(data)) {
        throw new ModelError(`input '${info.name}': expected {data, shape} with data an Array of strings, `
          + `got ${data === null ? 'null' : data?.constructor?.name ?? typeof data}`, STATUS.INVALID_INPUT);
      }
    } else if (!ArrayBuffer.isView(data) || data instanceof DataView) {
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
    if (dtype === 'string') {
      this.#writeStrings(index, info, data);
    } else {
      this.#writeData(index, dtype, data);
    }
    if (this.#io) {
      // format 3.5: the io table's entry (8-byte aligned); sw_run_io declares the input
      const { i32 } = this.#heap();
      const at = (this.#io + index * TENSOR_LAYOUT.size) >>> 2;
      i32[at + (TENSOR_LAYOUT.dtype >>> 2)] = DTYPES[dtype].code;
      i32[at + (TENSOR_LAYOUT.rank >>> 2)] = shape.length;
      for (let a = 0, s = at + (TENSOR_LAYOUT.shape >>> 2); a < MAX_RANK; a++, s += 2) {
        setInt64(i32, s, a < shape.length ? shape[a] : 0);
      }
      return;
    }
    // a DataView needs no 8-byte alignment and states the byte order (wasm is little-endian)
    const shapePtr = this.#call('sw_shape_buffer', this.#ctx) >>> 0;
    const view = new DataView(this.#memory(), shapePtr, MAX_RANK * 8);
    for (let a = 0; a < MAX_RANK; a++) view.setBigInt64(a * 8, BigInt(shape[a] ?? 0), true);
    this.#check(this.#call('sw_set_input', this.#ctx, index, DTYPES[dtype].code, shape.length));
  }

  /** The module's buffer for input index, of at least nbytes; asked for only when it must grow. */
  #inputBuffer(index, nbytes) {
    const cached = this.#buffers[index];
    if (cached && cached[1] >= nbytes) return cached[0];
    this.#buffers[index] = undefined;
    const ptr = this.#call('sw_input_buffer', this.#ctx, index, BigInt(nbytes)) >>> 0;
    if (!ptr) this.#check(STATUS.OUT_OF_MEMORY);
    this.#buffers[index] = [ptr, nbytes];
    return ptr;
  }

  #writeData(index, dtype, data) {
    const ptr = this.#inputBuffer(index, data.byteLength);
    const { u8 } = this.#heap();
    if (dtype === 'bool') {
      // the VM's bool is exactly 0 or 1, as numpy guarantees; a Uint8Array may hold any byte
      for (let i = 0; i < data.length; i++) u8[ptr + i] = data[i] ? 1 : 0;
    } else {
      u8.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), ptr);
    }
  }

  /** The current memory buffer: memory may grow in any call, detaching older buffers. */
  #memory() {
    return this.#wasmMemory.buffer;
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
      const message = decodeUtf8(new Uint8Array(this.#memory(), ptr, len));
      throw new ModelError(message || STATUS_MEANING[status] || `status ${status}`, status);
    }
  }
}

// ---------------------------------------------------------------------------- worker models
//
// Wasm runs on the calling thread until it returns: nothing can stop a call from the same
// thread. A WorkerModel runs its instance in a worker (worker.js) and stops a call by
// terminating the worker, then loads the model into a fresh one. The module is compiled
// once, on this thread, and sent to every worker, so a restart only instantiates it.

/**
 * Load a compiled model into a worker of its own (Node worker_threads, a browser module
 * Worker): its runs take the calling thread no time, have Model's `run` API, and can be
 * stopped (`timeout`, `signal`). Load failures are the same as loadModel's.
 * @param {string | URL | ArrayBuffer | ArrayBufferView | WebAssembly.Module} source as for loadModel
 * @param {{variant?: string, threads?: number, memoryLimit?: number | bigint}} [options] variant,
 *   threads: as for loadModel (threads run in a browser's worker too); memoryLimit: as
 *   Model.setMemoryLimit
 * @returns {Promise<WorkerModel>} once the worker has loaded the model and checked it
 */
export async function createWorker(source, options = {}) {
  const threads = options?.threads === undefined ? await defaultThreads() : threadCount(options.threads);
  const { module, metadata, label, variant, memory, whyOneThread } = await prepare(source, options?.variant, threads, true);
  const memoryLimit = options?.memoryLimit === undefined ? undefined : BigInt(options.memoryLimit);
  const init = { module, metadata, label, memoryLimit, memory, whyOneThread, threads };
  return new WorkerModel(await startWorker(init), init, variant);
}

/**
 * A model whose instance lives in a worker: the same `inputs`, `outputs`, `metadata` and
 * errors as a Model, and `run` can be cancelled. Runs are served one at a time, in order.
 */
export class WorkerModel {
  /** Threads a call runs on in the worker, the caller's included (setThreads). */
  threads = 1;
  /** Why they are fewer than asked; '' when they are not. */
  threadsNote = '';
  /** What a worker needs to load the model: {module, metadata, label, memoryLimit, memory,
   * whyOneThread, threads} (memory: a threads variant's limits; threads: the count asked). */
  #init;
  /** Promise of the current WorkerChannel; null when none is running or starting. */
  #channel = null;
  /** Settles when every run called so far has finished. */
  #queue = Promise.resolve();
  #disposed = false;

  /**
   * Use createWorker().
   * @param {WorkerChannel} channel a worker that has loaded the model
   * @param {{module: WebAssembly.Module, metadata: object, label: string, memoryLimit?: bigint,
   *   memory: object | null, whyOneThread: string, threads: number}} init
   */
  constructor(channel, init, variant = 'baseline') {
    this.#init = init;
    this.metadata = init.metadata;
    this.target = init.metadata.target;
    this.variant = variant;
    Object.assign(this, tensorInfos(init.metadata));
    this.#adopt(Promise.resolve(channel));
  }

  /**
   * Run the model in its worker. Without options it is Model.run in another thread.
   * @param {Record<string, {data: ArrayBufferView, shape: number[], dtype?: string}>} feeds as for Model.run
   *   (copied to the worker; the caller's arrays are left as they are)
   * @param {{timeout?: number, signal?: AbortSignal}} [options] cancel the run after `timeout`
   *   ms from this call (time spent waiting for earlier runs counts) or when `signal` aborts
   * @returns {Promise<Record<string, {data: ArrayBufferView, shape: number[], dtype: string}>>}
   *   rejects with a ModelError of status STATUS.CANCELLED when cancelled; the next run
   *   gets a fresh instance (with the same memory limit)
   */
  async run(feeds, options = {}) {
    this.#live();
    const { timeout, signal } = options ?? {};
    // the Python host's wording (it counts seconds); setTimeout fires at once beyond 2**31 - 1 ms
    if (timeout !== undefined && !(typeof timeout === 'number' && timeout > 0 && timeout <= MAX_TIMEOUT)) {
      throw new ModelError(`timeout must be a positive number of milliseconds (at most ${MAX_TIMEOUT}), `
        + `not ${typeof timeout === 'string' ? `'${timeout}'` : timeout}`, STATUS.INVALID_INPUT);
    }
    if (signal !== undefined && !(signal instanceof AbortSignal)) {
      throw new ModelError('signal must be an AbortSignal', STATUS.INVALID_INPUT);
    }
    const cancel = cancellation(timeout, signal);
    const previous = this.#queue;
    let finished;
    this.#queue = Promise.all([previous, new Promise((resolve) => { finished = resolve; })]);
    try {
      await Promise.race([previous, cancel.promise]);
      this.#live();
      const channel = await Promise.race([this.#worker(), cancel.promise]);
      this.#live();
      const reply = channel.call({ type: 'run', feeds });
      try {
        return await Promise.race([reply, cancel.promise]);
      } catch (e) {
        if (cancel.fired) this.#restart(channel, e);
        else if (e?.name === 'DataCloneError') {
          throw new TypeError(`run: the feeds cannot be sent to the worker (${e.message})`, { cause: e });
        }
        throw e;
      }
    } finally {
      cancel.stop();
      finished();
    }
  }

  /**
   * Cap the bytes the VM may hold at once, for this instance and every one that replaces it
   * after a cancelled run. Takes effect before any run called after it.
   * @param {number | bigint} bytes
   */
  /** As Model.requiredBytes. @param {Record<string, number>} bindings */
  requiredBytes(bindings) {
    return requiredBytes(this.metadata, bindings);
  }

  setMemoryLimit(bytes) {
    this.#live();
    const limit = BigInt(bytes);
    this.#init = { ...this.#init, memoryLimit: limit };
    // a worker still starting was sent the old limit; messages reach it in order
    this.#channel?.then((channel) => channel.post({ type: 'limit', bytes: limit }), () => {});
  }

  /**
   * As Model.setThreads, in the worker, for this instance and every one that replaces it
   * after a cancelled run; served in order with the runs.
   * @param {number} n
   * @returns {Promise<number>} the threads calls run on (`threads`)
   */
  async setThreads(n) {
    this.#live();
    const threads = threadCount(n);
    this.#init = { ...this.#init, threads };
    const previous = this.#queue;
    let finished;
    this.#queue = Promise.all([previous, new Promise((resolve) => { finished = resolve; })]);
    try {
      await previous;
      this.#live();
      this.#threadsOf(await (await this.#worker()).call({ type: 'threads', threads }));
      return this.threads;
    } finally {
      finished();
    }
  }

  /** The worker's reply to a load or setThreads: {threads, threadsNote}. */
  #threadsOf({ threads, threadsNote }) {
    this.threads = threads;
    this.threadsNote = threadsNote;
  }

  /** Terminate the worker, which frees its instance; runs still pending and later calls fail
   * with a ModelError. Disposing again does nothing. */
  dispose() {
    if (this.#disposed) return;
    this.#disposed = true;
    const error = this.#disposedError();
    this.#channel?.then((channel) => channel.close(error), () => {});
    this.#channel = null;
  }

  #disposedError() {
    return new ModelError(`${this.#init.label}: the model was disposed`, STATUS.INVALID_INPUT);
  }

  #live() {
    if (this.#disposed) throw this.#disposedError();
  }

  /** The current worker, started if there is none (the first run after a crash). */
  #worker() {
    if (!this.#channel) this.#adopt(startWorker(this.#init));
    return this.#channel;
  }

  /** Make `started` the current worker, forgotten when it fails to start or stops. */
  #adopt(started) {
    this.#channel = started;
    const forget = () => {
      if (this.#channel === started) this.#channel = null;
    };
    started.then((channel) => {
      this.#threadsOf(channel.loaded);
      return channel.closed.then(forget);
    }, forget);
  }

  /** Stop a worker mid-call and start its replacement now, so the next run waits less. */
  #restart(channel, error) {
    channel.close(error);
    if (!this.#disposed) this.#adopt(startWorker(this.#init));
  }
}

const MAX_TIMEOUT = 2 ** 31 - 1;

/**
 * A promise that rejects with a cancelled ModelError when `timeout` ms pass or `signal`
 * aborts; `fired` says whether it has, `stop` disarms it.
 */
function cancellation(timeout, signal) {
  const start = performance.now();
  let reject;
  const promise = new Promise((_, r) => { reject = r; });
  promise.catch(() => {}); // a run that finished first never looks at it
  const state = { promise, fired: false, stop };
  const fire = (message, cause) => {
    state.fired = true;
    reject(new ModelError(message, STATUS.CANCELLED, cause === undefined ? undefined : { cause }));
  };
  const timer = timeout === undefined ? undefined
    : setTimeout(() => fire(`the call was timed out after ${timeout} ms`), timeout);
  // "the call was cancelled" as in the Python host, which has no signal to name
  const onAbort = () => fire(`the call was cancelled (its AbortSignal aborted ${Math.round(performance.now() - start)} ms `
    + 'after the call)', signal.reason);
  if (signal?.aborted) onAbort();
  else signal?.addEventListener('abort', onAbort, { once: true });
  function stop() {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
  }
  return state;
}

/**
 * A worker that has loaded the model described by `init`; its `loaded` is the load's reply,
 * {threads, threadsNote}.
 * @returns {Promise<WorkerChannel>}
 */
async function startWorker(init) {
  const channel = new WorkerChannel(await spawnWorker(), init.label);
  try {
    channel.loaded = await channel.call({ type: 'load', ...init });
  } catch (e) {
    channel.close(e);
    throw e;
  }
  return channel;
}

/**
 * A worker running worker.js, the same few calls on both platforms.
 * @returns {Promise<{post: Function, terminate: Function, busy: (yes: boolean) => void,
 *   listen: (onMessage: Function, onFailure: (reason: string) => void) => void}>}
 */
async function spawnWorker() {
  if (isNode) {
    const Worker = await workerClass();
    const worker = new Worker(new URL('./worker.js', import.meta.url), { execArgv: nodeWorkerFlags() });
    // an idle worker does not keep the process alive; one with a call pending does
    worker.unref();
    return {
      post: (message, transfer) => worker.postMessage(message, transfer),
      terminate: () => void worker.terminate(),
      busy: (yes) => (yes ? worker.ref() : worker.unref()),
      listen(onMessage, onFailure) {
        worker.on('message', onMessage);
        worker.on('error', (e) => onFailure(e.message));
        worker.on('messageerror', (e) => onFailure(e.message));
        worker.on('exit', (code) => onFailure(`it exited with code ${code}`));
      },
    };
  }
  const worker = new (await workerClass())(new URL('./worker.js', import.meta.url), { type: 'module' });
  return {
    post: (message, transfer) => worker.postMessage(message, transfer),
    terminate: () => worker.terminate(),
    busy: () => {},
    listen(onMessage, onFailure) {
      worker.addEventListener('message', (e) => onMessage(e.data));
      worker.addEventListener('error', (e) => onFailure(workerErrorReason(e)));
      worker.addEventListener('messageerror', () => onFailure('a message could not be read'));
    },
  };
}

/** The Worker class: Node's worker_threads one, or the browser's. */
async function workerClass() {
  if (isNode) return (await import('node:worker_threads')).Worker;
  if (typeof Worker === 'undefined') throw new Error('this environment has no Worker (createWorker and threads need one)');
  return Worker;
}

/** A Node worker's flags: the process's, but --input-type, which a worker refuses and a
 * script run as `node --input-type=module -e …` has. */
function nodeWorkerFlags() {
  return process.execArgv.filter((flag) => !flag.startsWith('--input-type'));
}

/** A browser worker's error event as a reason: a script that fails to load gives no message. */
function workerErrorReason(e) {
  e.preventDefault();
  return e.message || 'its script could not be loaded (it must be served from the page\'s origin)';
}

/**
 * A worker running thread.js, one thread of a context's pool, sent `start` ({module, memory,
 * stackTop, ctx, index}: thread.js says what it does with them); `onFailure(reason)` hears
 * it fail or end. The pool's owner terminates it once the pool has stopped.
 * @param {typeof Worker} Worker workerClass()'s
 * @returns {{terminate: () => void}}
 */
function spawnThread(Worker, start, onFailure) {
  const url = new URL('./thread.js', import.meta.url);
  if (isNode) {
    // no flags: it needs none of the process's, and refuses V8's (V8's apply to it anyway)
    const worker = new Worker(url, { execArgv: [] });
    worker.on('message', ({ error }) => onFailure(error));
    worker.on('error', (e) => onFailure(e.message));
    worker.on('exit', (code) => onFailure(`it exited with code ${code}`));
    worker.postMessage(start);
    // it waits in the pool for a call: the process need not (unref'd after its listeners,
    // as a 'message' listener refs it)
    worker.unref();
    return { terminate: () => void worker.terminate() };
  }
  const worker = new Worker(url, { type: 'module' });
  worker.addEventListener('message', (e) => onFailure(e.data.error));
  worker.addEventListener('error', (e) => onFailure(workerErrorReason(e)));
  worker.postMessage(start);
  return worker;
}

/** Calls into one worker: each `call` posts a message with an id and settles on the reply
 * with that id. `closed` resolves when the worker stops, by `close` or on its own. */
class WorkerChannel {
  #worker;
  #label;
  #pending = new Map();
  #nextId = 0;
  #stopped = false;
  #onClosed;
  closed = new Promise((resolve) => { this.#onClosed = resolve; });

  constructor(worker, label) {
    this.#worker = worker;
    this.#label = label;
    worker.listen((reply) => this.#settle(reply),
      (reason) => this.close(new Error(`${label}: the model's worker stopped: ${reason}`)));
  }

  /** Post `message` with a fresh id; resolves with the worker's result, rejects with its error. */
  call(message) {
    if (this.#stopped) return Promise.reject(new Error(`${this.#label}: the model's worker has stopped`));
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      if (this.#pending.size === 1) this.#worker.busy(true);
      try {
        this.#worker.post({ ...message, id });
      } catch (e) {
        this.#settle({ id, error: e });
      }
    });
  }

  /** Post a message that needs no reply. */
  post(message) {
    if (!this.#stopped) this.#worker.post(message);
  }

  /** Terminate the worker; calls still pending reject with `error`. */
  close(error) {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#worker.terminate();
    for (const { reject } of this.#pending.values()) reject(error);
    this.#pending.clear();
    this.#worker.busy(false);
    this.#onClosed();
  }

  #settle({ id, result, error }) {
    const call = this.#pending.get(id);
    if (!call) return;
    this.#pending.delete(id);
    if (this.#pending.size === 0) this.#worker.busy(false);
    if (error === undefined) call.resolve(result);
    else call.reject(error instanceof Error ? error : reviveError(error));
  }
}

/** An error the worker sent as {name, message, status, cause}, as the class it was there. */
function reviveError({ name, message, status, cause }) {
  const options = cause ? { cause: reviveError(cause) } : undefined;
  if (name === 'ModelError') return new ModelError(message, status, options);
  const Class = { TypeError, RangeError, RuntimeError: WebAssembly.RuntimeError }[name] ?? Error;
  return new Class(message, options);
}
