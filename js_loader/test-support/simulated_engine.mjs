/**
 * Turns this Node into an engine that lacks WebAssembly features, for the loader's feature
 * detection tests (Node has no flag that turns SIMD off). Preload it:
 *
 *     SYMWASM_SIMULATE=no-simd node --import ./simulated_engine.mjs script.mjs
 *
 * `no-simd`: an engine without SIMD, which refuses a module whose types mention v128 or whose
 * code holds the SIMD prefix byte 0xfd. That is exact for the loader's feature probes and
 * errs towards refusing other modules (an immediate may hold the byte 0xfd), as such an
 * engine refuses every symwasm module. `nothing`: an engine that refuses every module.
 * validate, compile, compileStreaming and instantiate refuse alike.
 */
const mode = process.env.SYMWASM_SIMULATE;
if (mode !== 'no-simd' && mode !== 'nothing') throw new Error(`SYMWASM_SIMULATE=${mode}: choose no-simd or nothing`);

const real = { validate: WebAssembly.validate, compile: WebAssembly.compile, instantiate: WebAssembly.instantiate };
const [TYPE, CODE, V128, SIMD_PREFIX] = [1, 10, 0x7b, 0xfd];

/** The module's sections as [id, content]; none when the bytes are not a module's. */
function sections(bytes) {
  const view = new Uint8Array(ArrayBuffer.isView(bytes) ? bytes.buffer : bytes, bytes.byteOffset ?? 0, bytes.byteLength);
  const out = [];
  let pos = 8;
  while (pos < view.length) {
    const id = view[pos++];
    let size = 0;
    for (let shift = 0; ; shift += 7) {
      const byte = view[pos++];
      size += (byte & 0x7f) * 2 ** shift;
      if (!(byte & 0x80) || pos >= view.length) break;
    }
    out.push([id, view.subarray(pos, pos + size)]);
    pos += size;
  }
  return out;
}

function accepts(bytes) {
  if (mode === 'nothing') return false;
  return !sections(bytes).some(([id, content]) => (id === TYPE && content.includes(V128))
    || (id === CODE && content.includes(SIMD_PREFIX)));
}

WebAssembly.validate = (bytes) => accepts(bytes) && real.validate(bytes);
WebAssembly.compile = async (bytes) => {
  if (!accepts(bytes)) throw new WebAssembly.CompileError(`this simulated engine (${mode}) refuses the module`);
  return real.compile(bytes);
};
WebAssembly.compileStreaming = async (response) => WebAssembly.compile(await (await response).arrayBuffer());
WebAssembly.instantiate = async (source, imports) => {
  if (source instanceof WebAssembly.Module) return real.instantiate(source, imports);
  const module = await WebAssembly.compile(source);
  return { module, instance: await real.instantiate(module, imports) };
};
