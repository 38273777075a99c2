// The loader in Node: every way of loading, metadata, runs with several bindings of the
// symbolic dims checked against onnx.reference, the same errors as the Python host, memory
// growth, and modules that are not what they claim to be.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { Worker } from 'node:worker_threads';

import { DTYPES, SIGNATURES } from '../abi.js';
import { createWorker, evaluateFormula, FORMAT_VERSION, loadModel, Model, ModelError, readMetadata, STATUS, supportedVariants, WorkerModel } from '../index.js';
import { buildFixtures, LOADER_DIR, serve } from '../test-support/harness.js';
import { longFeeds } from '../test-support/cancel.js';
import { decodeTensor, describeRun, feedsOf, mismatches } from '../test-support/fixtures.js';

let dir;
let fixtures;
let cleanup;

before(async () => {
  ({ dir, fixtures, cleanup } = await buildFixtures());
});
after(() => cleanup?.());

const wasmPath = (name) => path.join(dir, fixtures[name].wasm);

/** Run `run` (a fixture run) on `model` and fail with every difference from the reference. */
async function assertRunMatches(model, run) {
  const problems = mismatches(await model.run(feedsOf(run.inputs)), run.expected);
  assert.deepEqual(problems, [], `${describeRun(run)}: ${problems.join('; ')}`);
}

const ADD_MUL_IO = {
  inputs: [{ name: 'x', dtype: 'float32', shape: ['n', 10] }, { name: 'b', dtype: 'float32', shape: [1, 10] }],
  outputs: [{ name: 'y', dtype: 'float32', shape: ['n', 10] }, { name: 'z', dtype: 'float32', shape: ['n', 10] }],
};

function assertAddMul(model) {
  assert.ok(model instanceof Model);
  assert.equal(model.target, 'wasm32');
  assert.equal(model.metadata.format, 'symwasm');
  assert.deepEqual({ inputs: model.inputs, outputs: model.outputs }, ADD_MUL_IO);
}

test('loads from bytes: a Buffer, a Uint8Array view and an ArrayBuffer', async () => {
  const buffer = await readFile(wasmPath('add_mul'));
  const padded = new Uint8Array(buffer.length + 3);
  padded.set(buffer, 3);
  const exact = buffer.buffer.slice(buffer.byteOffset, buffer.byteOffset + buffer.length);
  for (const bytes of [buffer, padded.subarray(3), exact]) {
    const model = await loadModel(bytes);
    assertAddMul(model);
    await assertRunMatches(model, fixtures.add_mul.runs[1]);
  }
});

test('loads from a file path and a file: URL (string or URL)', async () => {
  const url = pathToFileURL(wasmPath('add_mul'));
  for (const source of [wasmPath('add_mul'), url, url.href]) {
    const model = await loadModel(source);
    assertAddMul(model);
    await assertRunMatches(model, fixtures.add_mul.runs[0]);
  }
});

test('loads from a WebAssembly.Module; every load is a separate instance', async () => {
  const module = await WebAssembly.compile(await readFile(wasmPath('add_mul')));
  const [a, b] = [await loadModel(module), await loadModel(module)];
  assertAddMul(a);
  a.setMemoryLimit(100);
  const run = fixtures.add_mul.runs[1];
  await assert.rejects(a.run(feedsOf(run.inputs)), { name: 'ModelError', status: 3 });
  await assertRunMatches(b, run);
});

test('loads over HTTP, whether or not the server sends application/wasm', async () => {
  const server = await serve([
    { prefix: '/typed/', dir },
    { prefix: '/plain/', dir, wasmType: 'application/octet-stream' },
  ]);
  try {
    for (const prefix of ['/typed/', '/plain/']) {
      const model = await loadModel(`${server.url}${prefix}where_greater.wasm`);
      await assertRunMatches(model, fixtures.where_greater.runs[0]);
      await assertRunMatches(await loadModel(new URL(`${prefix}add_mul.wasm`, server.url)), fixtures.add_mul.runs[1]);
    }
    await assert.rejects(loadModel(`${server.url}/typed/nothing.wasm`), /nothing\.wasm: HTTP 404/);
  } finally {
    await server.close();
  }
});

test('readMetadata reads the custom section without running the module', async () => {
  const meta = await readMetadata(wasmPath('int64_ops'));
  assert.equal(meta.format, 'symwasm');
  assert.equal(meta.target, 'wasm32');
  assert.deepEqual(meta.inputs.map((i) => [i.name, i.dtype, i.shape]),
    [['a', 'int64', ['n']], ['b', 'int64', ['n']], ['pick', 'bool', ['n']]]);
  assert.deepEqual(meta.outputs.map((o) => o.dtype), ['int64', 'int64', 'bool', 'int64', 'int32', 'int32']);
  assert.equal(meta.symbols.n.kind, 'input');
});

test('inputs and outputs are frozen {name, dtype, shape} with symbolic dims', async () => {
  const model = await loadModel(wasmPath('where_greater'));
  assert.deepEqual(model.inputs, [{ name: 'x', dtype: 'float32', shape: ['n', 'm'] }, { name: 't', dtype: 'float32', shape: ['m'] }]);
  assert.deepEqual(model.outputs.map((o) => [o.name, o.dtype]), [['mask', 'bool'], ['y', 'float32'], ['count', 'int32']]);
  assert.ok(Object.isFrozen(model.inputs) && Object.isFrozen(model.inputs[0]) && Object.isFrozen(model.inputs[0].shape));
});

for (const name of ['add_mul', 'where_greater', 'int64_ops', 'dtypes']) {
  test(`${name}: one module, every binding of its symbolic dims matches onnx.reference`, async () => {
    const { runs } = fixtures[name];
    assert.ok(new Set(runs.map(describeRun)).size >= 2, 'the fixture must bind its dims at least two ways');
    const model = await loadModel(wasmPath(name));
    for (const run of runs) await assertRunMatches(model, run);
  });
}

test('strings cross the ABI as Arrays of strings (UTF-8 inside); non-strings are refused naming the input', async () => {
  const model = await loadModel(wasmPath('strings'));
  assert.deepEqual(model.inputs.map((i) => i.dtype), ['string', 'string']);
  for (const run of fixtures.strings.runs) await assertRunMatches(model, run);
  const out = await model.run({ a: { data: ['日本', ''], shape: [2] }, b: { data: ['語 x', ''], shape: [2] } });
  assert.deepEqual(out.ab, { data: ['日本語 x', ''], shape: [2], dtype: 'string' });
  assert.deepEqual(out.parts.data, ['日本語', 'x', '', '']);
  await assert.rejects(model.run({ a: { data: ['x', 3], shape: [2] }, b: { data: ['y', 'z'], shape: [2] } }),
    (e) => e instanceof ModelError && e.status === STATUS.INVALID_INPUT && /input 'a': element 1 is number, not a string/.test(e.message));
  await assert.rejects(model.run({ a: { data: new Uint8Array(2), shape: [2] }, b: { data: ['y', 'z'], shape: [2] } }),
    (e) => e instanceof ModelError && /input 'a': expected \{data, shape\} with data an Array of strings, got Uint8Array/.test(e.message));
  const again = await model.run({ a: { data: ['p q'], shape: [1] }, b: { data: ['r'], shape: [1] } });
  assert.deepEqual(again.parts.data, ['p', 'qr']);
  assert.deepEqual(out.ab.data, ['日本語 x', ''], 'outputs are copies that outlive later runs');
});

test('int64 crosses the ABI as BigInt, exact beyond 2**53', async () => {
  const run = fixtures.int64_ops.runs[1];
  const { sum, diff } = await (await loadModel(wasmPath('int64_ops'))).run(feedsOf(run.inputs));
  assert.ok(sum.data instanceof BigInt64Array && diff.data instanceof BigInt64Array);
  assert.ok(decodeTensor(run.inputs.a).data.some((v) => v > 2n ** 53n || v < -(2n ** 53n)));
  assert.deepEqual([...sum.data], [...decodeTensor(run.expected.sum).data]);
});

test('every dtype crosses the ABI in its typed array (float16 as its bits in a Uint16Array)', async () => {
  const run = fixtures.dtypes.runs[1];
  const out = await (await loadModel(wasmPath('dtypes'))).run(feedsOf(run.inputs));
  const arrays = Object.fromEntries(Object.entries(out).map(([k, v]) => [k, [v.dtype, v.data.constructor.name]]));
  assert.deepEqual(arrays, {
    u8_out: ['uint8', 'Uint8Array'], i8_out: ['int8', 'Int8Array'], u16_out: ['uint16', 'Uint16Array'],
    i16_out: ['int16', 'Int16Array'], u32_out: ['uint32', 'Uint32Array'], u64_out: ['uint64', 'BigUint64Array'],
    f16_out: ['float16', 'Uint16Array'], f64_out: ['float64', 'Float64Array'],
  });
});

test('the small dtypes cross the ABI as their raw codes (bfloat16 bits, float8, e8m0 and int4 codes)', async () => {
  const small = { bf_out: 'bfloat16', x_as_f8: 'float8_e4m3fn', x_as_i4: 'int4', x_as_e8m0: 'float8_e8m0fnu' };
  for (const fixture of ['small_dtypes', 'e8m0']) {
    const model = await loadModel(wasmPath(fixture));
    for (const run of fixtures[fixture].runs) {
      const feeds = feedsOf(run.inputs);
      assert.ok(Object.entries(feeds).every(([k, f]) => f.data instanceof DTYPES[run.inputs[k].dtype].array));
      const out = await model.run(feeds);
      for (const [name, want] of Object.entries(run.expected)) {
        if (small[name]) assert.equal(out[name].dtype, small[name], name);
        assert.deepEqual([...out[name].data], [...decodeTensor(want).data], name);  // the codes, bit for bit
      }
    }
  }
});

test('an input with a default (compile --overridable) may be omitted or fed, as onnx.reference reads it', async () => {
  const model = await loadModel(wasmPath('input_defaults'));
  const runs = fixtures.input_defaults.runs;
  assert.deepEqual(runs.map((r) => Object.keys(r.inputs).sort()), [['x'], ['s', 'x'], ['k', 'x']]);
  for (const run of [...runs, ...runs]) await assertRunMatches(model, run);  // twice: the decoded defaults are kept
  assert.deepEqual(model.metadata.inputs.map((i) => i.default?.shape), [undefined, [], [3]]);
});

test('inputs that share a dim name but never meet take their own sizes; requiredBytes sizes each copy from the name', async () => {
  const model = await loadModel(wasmPath('shared_dims'));
  assert.deepEqual(model.inputs.map((i) => i.shape), [['N', 4], ['N@y', 3]]);
  for (const run of fixtures.shared_dims.runs) await assertRunMatches(model, run);
  assert.equal(model.requiredBytes({ N: 3 }), model.requiredBytes({ N: 3, 'N@y': 3 }));
  assert.ok(model.requiredBytes({ N: 3, 'N@y': 9 }) > model.requiredBytes({ N: 3 }));
});

test('a feed may name its dtype: a Uint8Array as bool or uint8', async () => {
  const model = await loadModel(wasmPath('int64_ops'));
  const run = fixtures.int64_ops.runs[0];
  const feeds = feedsOf(run.inputs);
  assert.deepEqual(mismatches(await model.run({ ...feeds, pick: { ...feeds.pick, dtype: 'bool' } }), run.expected), []);
  await assert.rejects(model.run({ ...feeds, pick: { ...feeds.pick, dtype: 'uint8' } }),
    { name: 'ModelError', status: 1, message: "input 'pick': expected dtype bool, got uint8" });
  await assert.rejects(model.run({ ...feeds, pick: { ...feeds.pick, dtype: 'float32' } }),
    { name: 'ModelError', status: 1, message: "input 'pick': dtype 'float32' with a Uint8Array is not supported (expected bool)" });
});

test('dispose destroys the context it created, once; later calls fail with a ModelError naming the model', async () => {
  // the module's own exports, with the context calls recorded
  const label = wasmPath('add_mul');
  const { exports } = (await WebAssembly.instantiate(await readFile(label))).instance;
  const metadata = await readMetadata(label);
  const created = [];
  const destroyed = [];
  const spied = { ...exports,
    sw_context_create: () => { const ctx = exports.sw_context_create(); created.push(ctx); return ctx; },
    sw_context_destroy: (ctx) => { destroyed.push(ctx); return exports.sw_context_destroy(ctx); } };
  const model = new Model({ exports: spied }, metadata, label);
  await assertRunMatches(model, fixtures.add_mul.runs[1]);
  assert.equal(created.length, 1);
  model.dispose();
  model.dispose();
  assert.deepEqual(destroyed, created);
  const disposed = { name: 'ModelError', status: STATUS.INVALID_INPUT, message: `${label}: the model was disposed` };
  await assert.rejects(model.run(feedsOf(fixtures.add_mul.runs[1].inputs)), disposed);
  assert.throws(() => model.setMemoryLimit(1000), disposed);
  assert.ok(model.requiredBytes({ n: 4 }) > 0, 'the metadata still answers');
});

test('requiredBytes says before a run what it needs: exactly that much runs, one byte less fails', async () => {
  const run = fixtures.add_mul.runs[1];
  const feeds = feedsOf(run.inputs);
  const n = feeds.x.shape[0];
  const plan = (await readMetadata(wasmPath('add_mul'))).memory;
  assert.ok(plan.blocks.length > 0 && plan.dynamic_formula.includes('n'), JSON.stringify(plan));
  assert.equal(evaluateFormula(plan.dynamic_bytes, { n: 0 }), 0);
  for (const [limit, ok] of [[0, true], [-1, false]]) {
    const model = await loadModel(wasmPath('add_mul'));
    const need = model.requiredBytes({ n });
    assert.ok(need > 4 * 10 * n * 3, `${need}`);  // x, y, z at least
    model.setMemoryLimit(need + limit);
    if (ok) await assertRunMatches(model, run);
    else await assert.rejects(model.run(feeds), { name: 'ModelError', status: STATUS.OUT_OF_MEMORY });
    model.dispose();
  }
  const model = await loadModel(wasmPath('add_mul'));
  assert.throws(() => model.requiredBytes({}), /symbol 'n' needs a value/);
  model.dispose();
});

test('bool inputs are 0 or 1 inside the module whatever bytes the Uint8Array holds', async () => {
  const run = fixtures.int64_ops.runs[1];
  const model = await loadModel(wasmPath('int64_ops'));
  const feeds = feedsOf(run.inputs);
  feeds.pick.data = feeds.pick.data.map((v) => v * 255);
  assert.ok(feeds.pick.data.includes(255));
  assert.deepEqual(mismatches(await model.run(feeds), run.expected), []);
});

test("bad inputs raise the Python host's ModelError (same message and status); the model keeps working", async () => {
  let cases = 0;
  for (const [name, fixture] of Object.entries(fixtures)) {
    const model = await loadModel(wasmPath(name));
    for (const { case: what, inputs, message, status } of fixture.errors) {
      await assert.rejects(model.run(feedsOf(inputs)), (e) => {
        assert.ok(e instanceof ModelError, `${what}: ${e}`);
        assert.equal(e.message, message, what);
        assert.equal(e.status, status, what);
        return true;
      });
      await assertRunMatches(model, fixture.runs[0]);
      cases++;
    }
  }
  assert.ok(cases >= 7, `only ${cases} error cases`);
});

test('JS-side checks (data length, shape, data type) raise a ModelError naming the input', async () => {
  const model = await loadModel(wasmPath('add_mul'));
  const run = fixtures.add_mul.runs[1];
  const good = feedsOf(run.inputs);
  const bad = {
    'data length': [{ data: good.x.data.subarray(1), shape: good.x.shape }, /input 'x': data has 39 elements but shape \[4, 10\] needs 40/],
    'a bare typed array': [good.x.data, /input 'x': expected \{data, shape\}.*got a bare Float32Array/],
    'a plain array': [{ data: [...good.x.data], shape: good.x.shape }, /input 'x': expected \{data, shape\}.*Float32Array.*got data Array/],
    'a typed array of no dtype': [{ data: new Uint8ClampedArray(40), shape: [4, 10] }, /input 'x': dtype uint8clamped is not supported \(expected float32\)/],
    'a DataView': [{ data: new DataView(good.x.data.buffer), shape: good.x.shape }, /input 'x': expected \{data, shape\}.*got data DataView/],
    'no shape': [{ data: good.x.data }, /input 'x': shape must be an array of non-negative integers, got undefined/],
    'a negative dim': [{ data: good.x.data, shape: [-4, -10] }, /input 'x': shape must be .*got \[-4,-10\]/],
    'a fractional dim': [{ data: good.x.data, shape: [2.5, 16] }, /input 'x': shape must be/],
    'rank 9': [{ data: good.x.data, shape: [4, 10, 1, 1, 1, 1, 1, 1, 1] }, /input 'x': rank 9 exceeds 8/],
  };
  for (const [what, [x, pattern]] of Object.entries(bad)) {
    await assert.rejects(model.run({ ...good, x }), (e) => {
      assert.ok(e instanceof ModelError, what);
      assert.equal(e.status, 1, what);
      assert.match(e.message, pattern, what);
      return true;
    });
    await assertRunMatches(model, run);
  }
  await assert.rejects(model.run(null), TypeError);
});

test('memory growth: a big input after a small one, then a small one again', async () => {
  const { runs, growth } = fixtures.add_mul;
  const module = await WebAssembly.compile(await readFile(wasmPath('add_mul')));
  const initial = (await WebAssembly.instantiate(module)).exports.memory.buffer.byteLength;
  assert.ok(decodeTensor(growth.inputs.x).data.byteLength > initial, 'the big input must not fit the initial memory');
  const model = await loadModel(module);
  await assertRunMatches(model, runs[1]);
  await assertRunMatches(model, growth);
  await assertRunMatches(model, runs[2]);
});

test('outputs are copies that outlive later runs', async () => {
  const { runs } = fixtures.add_mul;
  const model = await loadModel(wasmPath('add_mul'));
  const first = await model.run(feedsOf(runs[1].inputs));
  await model.run(feedsOf(runs[2].inputs));
  await model.run(feedsOf(runs[0].inputs));
  assert.deepEqual(mismatches(first, runs[1].expected), []);
});

test('setMemoryLimit: a run over the limit is status 3; raising the limit recovers', async () => {
  const model = await loadModel(wasmPath('add_mul'));
  const run = fixtures.add_mul.runs[2];
  model.setMemoryLimit(64);
  await assert.rejects(model.run(feedsOf(run.inputs)), (e) => e instanceof ModelError && e.status === 3
    && /memory limit/.test(e.message));
  model.setMemoryLimit(2n ** 31n);
  await assertRunMatches(model, run);
});

/** A copy of `bytes` with every occurrence of `old` replaced by `now` (text or bytes of the same
 * length, so the module's structure holds; the metadata is both a custom section and data). */
function rewrite(bytes, old, now) {
  const [from, to] = [old, now].map((t) => (typeof t === 'string' ? new TextEncoder().encode(t) : t));
  assert.equal(from.length, to.length);
  const out = new Uint8Array(bytes);
  let count = 0;
  for (let i = 0; i + from.length <= out.length; i++) {
    if (from.every((b, k) => out[i + k] === b)) {
      out.set(to, i);
      count++;
    }
  }
  assert.ok(count > 0, `${old} is not in the module`);
  return out;
}

/** The add_mul fixture with `old` rewritten to `now`, written beside it as `name`. */
async function damaged(name, old, now) {
  const file = path.join(dir, name);
  await writeFile(file, rewrite(await readFile(wasmPath('add_mul')), old, now));
  return file;
}

test('metadata that disagrees with its program is refused, naming the file and the first difference', async () => {
  const meta = await readMetadata(wasmPath('add_mul'));
  const swapped = (key) => [JSON.stringify(meta[key]), JSON.stringify([...meta[key]].reverse())];
  const cases = {
    inputs: "input 0 is 'x' (dtype code 1, rank 2) in the program but 'b' (float32, rank 2) in the metadata",
    outputs: "output 0 is 'y' in the program but 'z' in the metadata",
  };
  for (const [key, difference] of Object.entries(cases)) {
    const file = await damaged(`swapped_${key}.wasm`, ...swapped(key));
    const message = `${file}: the module's metadata disagrees with its program: ${difference}`;
    await assert.rejects(loadModel(file), { name: 'ModelError', status: 4, message });
    // the worker checks it too, and the error crosses over as it was
    await assert.rejects(createWorker(file), { name: 'ModelError', status: 4, message });
  }
});

test('broken metadata and truncated modules are a ModelError (status 4) naming the file', async () => {
  const cases = {
    'bad json': ['"format":"symwasm"', '"format"#"symwasm"', /its metadata is not valid JSON \(.+\)$/],
    'bad utf-8': ['"format":"symwasm"', [...new TextEncoder().encode('"format":"symw'), 0xff, ...new TextEncoder().encode('sm"')],
      /its metadata is not valid UTF-8$/],
    'no inputs list': ['"inputs":[{', '"inputz":[{', /the metadata has no list of inputs$/],
  };
  for (const [what, [old, now, reason]] of Object.entries(cases)) {
    const file = await damaged(`${what.replaceAll(' ', '_')}.wasm`, old, now);
    for (const load of [loadModel, createWorker]) {
      await assert.rejects(load(file), (e) => {
        assert.ok(e instanceof ModelError, `${what}: ${e}`);
        assert.equal(e.status, 4, what);
        assert.ok(e.message.startsWith(`${file}: cannot load the model: `), `${what}: ${e.message}`);
        assert.match(e.message, reason, what);
        return true;
      });
    }
  }
  const bytes = await readFile(wasmPath('add_mul'));
  const cut = path.join(dir, 'truncated.wasm');
  await writeFile(cut, bytes.subarray(0, bytes.length >> 1));
  await assert.rejects(loadModel(cut), {
    name: 'ModelError', status: 4, message: new RegExp(`^${cut}: cannot load the model: not a valid WebAssembly module \\(`),
  });
});

// Hand-assembled modules that claim to be symwasm modules: enough of the binary format to
// declare the ABI's functions (abi.js), each body `unreachable` unless given.
const VALTYPES = { i32: 0x7f, i64: 0x7e };
const sleb = (v) => { const b = v & 0x7f; v >>= 7; return (v === 0 && !(b & 0x40)) || (v === -1 && b & 0x40) ? [b] : [b | 0x80, ...sleb(v)]; };
const i32const = (v) => [0x41, ...sleb(v)];
const FORMAT = (FORMAT_VERSION[0] << 16) | FORMAT_VERSION[1];
const WORKING = {
  sw_format_version: i32const(FORMAT), sw_num_inputs: i32const(0), sw_num_outputs: i32const(0),
  sw_context_create: i32const(64), sw_context_status: i32const(0), sw_io_table: i32const(0),
};
const META = { format: 'symwasm', format_version: [...FORMAT_VERSION], inputs: [], outputs: [], target: 'wasm32' };

function fakeModule({ bodies = {}, omit = [], imports = false, metadata = META } = {}) {
  const leb = (n) => (n < 0x80 ? [n] : [(n & 0x7f) | 0x80, ...leb(n >> 7)]);
  const str = (s) => { const b = [...new TextEncoder().encode(s)]; return [...leb(b.length), ...b]; };
  const vec = (items) => [...leb(items.length), ...items.flat()];
  const section = (id, content) => [id, ...leb(content.length), ...content];
  const names = Object.keys(SIGNATURES).filter((n) => !omit.includes(n));
  const sigs = names.map((n) => SIGNATURES[n]);
  const types = vec(sigs.map(([p, r]) => [0x60, ...vec(p.map((t) => [VALTYPES[t]])), ...vec(r.map((t) => [VALTYPES[t]]))]));
  const base = imports ? 1 : 0; // imported functions come first in the index space
  const body = (n) => { const code = [0x00, ...(bodies[n] ?? [0x00]), 0x0b]; return [...leb(code.length), ...code]; };
  return new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    ...section(1, types),
    ...(imports ? section(2, vec([[...str('env'), ...str('log'), 0x00, ...leb(0)]])) : []),
    ...section(3, vec(names.map((_, i) => leb(i)))),
    ...section(5, vec([[0x00, 1]])),
    ...section(7, vec([[...str('memory'), 0x02, 0], ...names.map((n, i) => [...str(n), 0x00, ...leb(base + i)])])),
    ...section(10, vec(names.map(body))),
    ...(metadata ? section(0, [...str('symwasm.metadata'), ...new TextEncoder().encode(JSON.stringify(metadata))]) : []),
  ]);
}

test('a trap is an Error with context, not a ModelError', async () => {
  const model = await loadModel(fakeModule({ bodies: WORKING }));
  await assert.rejects(model.run({}), (e) => {
    assert.ok(!(e instanceof ModelError));
    assert.match(e.message, /^the module trapped in sw_run \(a symwasm bug\): .*unreachable/);
    assert.ok(e.cause instanceof WebAssembly.RuntimeError);
    return true;
  });
});

test('a context that cannot run is a ModelError at load', async () => {
  const bodies = { ...WORKING, sw_context_status: i32const(4), sw_last_error: i32const(0), sw_last_error_len: i32const(0) };
  await assert.rejects(loadModel(fakeModule({ bodies })), { name: 'ModelError', status: 4, message: 'invalid program' });
});

test('a module of another format version is refused before it is instantiated', async () => {
  const old = { ...META, format_version: [1, 1] };
  await assert.rejects(loadModel(fakeModule({ bodies: WORKING, metadata: old })), {
    name: 'ModelError', status: 4,
    message: `the given bytes: module format 1.1 cannot run on this host (it reads format ${FORMAT_VERSION[0]}.x); `
      + 'recompile the model with this symwasm',
  });
  const lying = { ...WORKING, sw_format_version: i32const(FORMAT + 1) };
  await assert.rejects(loadModel(fakeModule({ bodies: lying })), { name: 'ModelError', message: /^the given bytes: .*the file is corrupt/ });
});

test('modules that are not symwasm modules are a ModelError (status 4) at load naming the source', async () => {
  const init = WORKING;
  assert.ok(await loadModel(fakeModule({ bodies: init })) instanceof Model, 'the well-formed fake must load');
  const refused = {
    'imports': [fakeModule({ bodies: init, imports: true }),
      'the module imports ["log"]; symwasm modules import nothing'],
    'no metadata': [fakeModule({ bodies: init, metadata: null }), 'a WebAssembly module without symwasm metadata'],
    // a module of an older format lacks some of the exports
    'a missing export': [fakeModule({ bodies: init, omit: ['sw_run', 'sw_input_name'] }),
      'not a symwasm module of this format (it does not export sw_input_name, sw_run)'],
    'not wasm': [new TextEncoder().encode('\x7fELF not wasm'), 'not a WebAssembly module'],
    'bad wasm': [new Uint8Array([0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x99]), /^not a valid WebAssembly module \(.+\)$/],
    'metadata not an object': [fakeModule({ bodies: init, metadata: [1, 2] }), 'the metadata is not a JSON object'],
    'an input without a shape': [fakeModule({ bodies: init, metadata: { ...META, inputs: [{ name: 'x', dtype: 'float32' }] } }),
      'the metadata\'s inputs entry {"name":"x","dtype":"float32"} is not {name, dtype, shape}'],
    // a later minor format may add dtypes: named, not called a malformed entry
    'a dtype this loader does not know': [fakeModule({ bodies: init, metadata: { ...META, format_version: [FORMAT_VERSION[0], 99],
      outputs: [{ name: 'y', dtype: 'float6_e3m2fn', shape: [2] }] } }),
    `output 'y' has dtype float6_e3m2fn, which this host does not know (the module is format ${FORMAT_VERSION[0]}.99, `
      + `this host reads ${FORMAT_VERSION.join('.')}); load it with a newer symwasm`],
  };
  for (const [what, [bytes, reason]] of Object.entries(refused)) {
    await assert.rejects(loadModel(bytes), (e) => {
      assert.ok(e instanceof ModelError, `${what}: ${e}`);
      assert.equal(e.status, 4, what);
      const prefix = 'the given bytes: cannot load the model: ';
      assert.ok(e.message.startsWith(prefix), `${what}: ${e.message}`);
      if (typeof reason === 'string') assert.equal(e.message.slice(prefix.length), reason, what);
      else assert.match(e.message.slice(prefix.length), reason, what);
      return true;
    });
  }
  // the source cannot be read: not the module's fault, a plain Error as in the Python host
  const missing = path.join(dir, 'missing.wasm');
  await assert.rejects(loadModel(missing), { message: `no such model: ${missing}` });
  await assert.rejects(loadModel(42), TypeError);
});

test('a 3.5 module runs in one call (sw_run_io); one of format 3.4, without it, loads and runs the older way', async () => {
  // sw_run is `unreachable` in both fakes: the first run must go through sw_run_io
  const current = fakeModule({ bodies: { ...WORKING, sw_io_table: i32const(256), sw_run_io: i32const(0) } });
  assert.deepEqual(await (await loadModel(current)).run({}), {});
  const older = fakeModule({
    bodies: { ...WORKING, sw_format_version: i32const((3 << 16) | 4), sw_run: i32const(0) },
    omit: ['sw_io_table', 'sw_run_io'], metadata: { ...META, format_version: [3, 4] },
  });
  assert.deepEqual(await (await loadModel(older)).run({}), {});
  const missing = fakeModule({ bodies: WORKING, omit: ['sw_run'] });
  await assert.rejects(loadModel(missing), { message: /it does not export sw_run\)$/ });
});

test('counts that disagree with the program are refused at load', async () => {
  const bodies = { ...WORKING, sw_num_inputs: i32const(1) };
  await assert.rejects(loadModel(fakeModule({ bodies })), {
    name: 'ModelError', status: 4,
    message: "the given bytes: the module's metadata disagrees with its program: the program has 1 inputs and 0 "
      + 'outputs, the metadata 0 and 0',
  });
});

// Worker models: longFeeds() (test-support/cancel.js) makes a MatMul that takes seconds, so it
// is still running when these tests cancel it. Latencies are printed (t.diagnostic), never
// asserted.

/** Random [n, n] matrices and their product computed here, in float64. */
function randomProduct(n) {
  const random = () => Float32Array.from({ length: n * n }, () => Math.random() * 6 - 3);
  const [a, b] = [random(), random()];
  const y = new Float64Array(n * n);
  for (let i = 0; i < n; i++) {
    for (let k = 0; k < n; k++) {
      for (let j = 0; j < n; j++) y[i * n + j] += a[i * n + k] * b[k * n + j];
    }
  }
  return { feeds: { a: { data: a, shape: [n, n] }, b: { data: b, shape: [n, n] } }, y };
}

/** Fail unless `out`, a run's outputs, holds the product `y` computed by randomProduct. */
function assertProductIs(out, y) {
  const n = Math.sqrt(y.length);
  assert.deepEqual(out.y.shape, [n, n]);
  const bad = [...out.y.data].findIndex((v, i) => !(Math.abs(v - y[i]) <= 1e-4 + 1e-5 * Math.abs(y[i])));
  assert.equal(bad, -1, `y[${bad}] = ${out.y.data[bad]}, expected ${y[bad]}`);
}

/** Run a random n x n product on `model` and compare it with randomProduct's. */
async function assertProduct(model, n) {
  const { feeds, y } = randomProduct(n);
  assertProductIs(await model.run(feeds), y);
}

/** Await `pending`, which must reject with a cancelled ModelError whose message matches. */
async function assertCancelled(pending, message) {
  let error;
  await assert.rejects(pending, (e) => {
    assert.ok(e instanceof ModelError, String(e));
    assert.equal(e.status, STATUS.CANCELLED);
    assert.match(e.message, message);
    error = e;
    return true;
  });
  return error;
}

const TIMED_OUT = (ms) => new RegExp(`^the call was timed out after ${ms} ms$`);
const ABORTED = /^the call was cancelled \(its AbortSignal aborted \d+ ms after the call\)$/;

test('createWorker: the same inputs, outputs and metadata as loadModel; runs match onnx.reference', async () => {
  for (const name of ['add_mul', 'where_greater', 'matmul', 'strings']) {
    const [direct, model] = [await loadModel(wasmPath(name)), await createWorker(wasmPath(name))];
    assert.ok(model instanceof WorkerModel);
    const shown = (m) => ({ inputs: m.inputs, outputs: m.outputs, metadata: m.metadata, target: m.target });
    assert.deepEqual(shown(model), shown(direct));
    assert.ok(Object.isFrozen(model.inputs) && Object.isFrozen(model.outputs[0].shape));
    for (const run of fixtures[name].runs) await assertRunMatches(model, run);
    model.dispose();
  }
});

test('a timeout cancels a long run with a ModelError of status CANCELLED; the next runs are right', async (t) => {
  const model = await createWorker(wasmPath('matmul'));
  const start = performance.now();
  await assertCancelled(model.run(longFeeds(), { timeout: 100 }), TIMED_OUT(100));
  t.diagnostic(`timeout 100 ms: rejected ${(performance.now() - start).toFixed(1)} ms after the call`);
  await assertProduct(model, 33);
  for (const run of fixtures.matmul.runs) await assertRunMatches(model, run);
  model.dispose();
});

test('an AbortSignal cancels a long run (the latency is printed); the next runs are right', async (t) => {
  const model = await createWorker(wasmPath('matmul'));
  const feeds = longFeeds();
  const latencies = [];
  for (const n of [5, 16, 31]) {
    const controller = new AbortController();
    const pending = model.run(feeds, { signal: controller.signal });
    await sleep(150); // the worker is multiplying by now
    const reason = new Error('the user pressed stop');
    const aborted = performance.now();
    controller.abort(reason);
    const error = await assertCancelled(pending, ABORTED);
    latencies.push(performance.now() - aborted);
    assert.equal(error.cause, reason);
    await assertProduct(model, n);
  }
  t.diagnostic(`cancel latency (abort to rejection), Node: ${latencies.map((ms) => ms.toFixed(2)).join(', ')} ms`);
  // an already aborted signal refuses the run before it starts
  await assertCancelled(model.run(feeds, { signal: AbortSignal.abort() }), /^the call was cancelled \(its AbortSignal aborted 0 ms after the call\)$/);
  await assertRunMatches(model, fixtures.matmul.runs[1]);
  model.dispose();
});

test('runs take turns: one cancelled while it waits stops nothing; the one behind a cancelled run is right', async () => {
  const model = await createWorker(wasmPath('matmul'));
  const controller = new AbortController();
  const long = model.run(longFeeds(), { signal: controller.signal });
  const { feeds, y } = randomProduct(9);
  const impatient = model.run(feeds, { timeout: 20 });
  const queued = model.run(feeds);
  // the impatient run times out behind the long one, which keeps running
  await assertCancelled(impatient, TIMED_OUT(20));
  controller.abort();
  await assertCancelled(long, ABORTED);
  assertProductIs(await queued, y);
  model.dispose();
});

test('the memory limit (an option or setMemoryLimit) holds for the instance that replaces a cancelled one', async () => {
  const model = await createWorker(wasmPath('matmul'), { memoryLimit: 1000 });
  const overLimit = (e) => e instanceof ModelError && e.status === 3 && /memory limit 1000\b/.test(e.message);
  await assert.rejects(model.run(feedsOf(fixtures.matmul.runs[1].inputs)), overLimit);
  model.setMemoryLimit(100_000_000); // the long run's 75 MB fits, 3000 x 3000's 108 MB does not
  await assertCancelled(model.run(longFeeds(), { timeout: 100 }), TIMED_OUT(100));
  const big = new Float32Array(3000 * 3000);
  await assert.rejects(model.run({ a: { data: big, shape: [3000, 3000] }, b: { data: big, shape: [3000, 3000] } }),
    (e) => e instanceof ModelError && e.status === 3 && /memory limit 100000000\b/.test(e.message));
  await assertProduct(model, 12);
  model.dispose();
});

test("errors inside the worker cross over as they were: the Python host's messages, JS checks, traps", async () => {
  for (const name of ['add_mul', 'where_greater', 'matmul']) {
    const model = await createWorker(wasmPath(name));
    for (const { case: what, inputs, message, status } of fixtures[name].errors) {
      await assert.rejects(model.run(feedsOf(inputs)), (e) => {
        assert.ok(e instanceof ModelError, `${what}: ${e}`);
        assert.deepEqual({ message: e.message, status: e.status }, { message, status }, what);
        return true;
      });
      await assertRunMatches(model, fixtures[name].runs[0]);
    }
    model.dispose();
  }
  const model = await createWorker(wasmPath('add_mul'));
  const good = feedsOf(fixtures.add_mul.runs[1].inputs);
  await assert.rejects(model.run({ ...good, x: { data: good.x.data.subarray(1), shape: [4, 10] } }),
    { name: 'ModelError', status: 1, message: "input 'x': data has 39 elements but shape [4, 10] needs 40" });
  await assert.rejects(model.run(null), { name: 'TypeError', message: 'run: feeds must be an object {name: {data, shape}}' });
  await assert.rejects(model.run({ ...good, x: { data: good.x.data, shape: [4, 10], extra: () => 1 } }),
    { name: 'TypeError', message: /^run: the feeds cannot be sent to the worker/ });
  await assert.rejects(model.run(good, { timeout: 0 }),
    { name: 'ModelError', status: 1, message: 'timeout must be a positive number of milliseconds (at most 2147483647), not 0' });
  await assert.rejects(model.run(good, { timeout: '5' }), { name: 'ModelError', status: 1, message: /, not '5'$/ });
  await assert.rejects(model.run(good, { signal: 'stop' }), { name: 'ModelError', status: 1, message: 'signal must be an AbortSignal' });
  await assertRunMatches(model, fixtures.add_mul.runs[1]);
  model.dispose();

  const trapping = await createWorker(fakeModule({ bodies: WORKING }));
  await assert.rejects(trapping.run({}), (e) => {
    assert.ok(!(e instanceof ModelError));
    assert.match(e.message, /^the module trapped in sw_run \(a symwasm bug\): .*unreachable/);
    assert.ok(e.cause instanceof WebAssembly.RuntimeError);
    return true;
  });
  trapping.dispose();
});

test('dispose terminates the worker: the running run, the queued one and later ones reject with a ModelError', async () => {
  // every worker thread the model starts, recorded as its first message (the load) is posted
  const workers = new Set();
  const post = Worker.prototype.postMessage;
  Worker.prototype.postMessage = function record(...args) {
    workers.add(this);
    return post.apply(this, args);
  };
  let model;
  try {
    model = await createWorker(wasmPath('matmul'));
  } finally {
    Worker.prototype.postMessage = post;
  }
  assert.equal(workers.size, 1);
  const [worker] = workers;
  const running = model.run(longFeeds());
  const queued = model.run(feedsOf(fixtures.matmul.runs[0].inputs));
  await sleep(100);
  model.dispose();
  const disposed = { name: 'ModelError', status: STATUS.INVALID_INPUT, message: `${wasmPath('matmul')}: the model was disposed` };
  await assert.rejects(running, disposed);
  await assert.rejects(queued, disposed);
  await assert.rejects(model.run(feedsOf(fixtures.matmul.runs[0].inputs)), disposed);
  assert.throws(() => model.setMemoryLimit(1000), disposed);
  model.dispose();
  // the thread stops (threadId turns -1 before 'exit' is emitted), though its multiplication had seconds to go
  if (worker.threadId !== -1) {
    worker.ref(); // the loader unrefs an idle worker: keep this process up to hear it exit
    await once(worker, 'exit');
  }
  assert.equal(worker.threadId, -1);
});

test('an idle WorkerModel does not keep Node running (run as `node --input-type=module -e`)', async () => {
  const script = `const { createWorker } = await import(${JSON.stringify(pathToFileURL(path.join(LOADER_DIR, 'index.js')).href)});
    const model = await createWorker(${JSON.stringify(wasmPath('add_mul'))});
    console.log(model.inputs.length);`;
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], { timeout: 60_000 });
  assert.equal(stdout, '2\n');
});

test('variants: a --relaxed-simd model runs the best variant the engine validates, or the one asked for', async () => {
  assert.deepEqual(fixtures.dense.variants, { baseline: 'dense.wasm', 'relaxed-simd': 'dense.relaxed.wasm' });
  assert.ok(supportedVariants().includes('baseline'), 'Node validates every feature probe but relaxed SIMD\'s');
  const relaxedHere = supportedVariants().includes('relaxed-simd');
  const auto = await loadModel(wasmPath('dense'));
  assert.equal(auto.variant, relaxedHere ? 'relaxed-simd' : 'baseline');
  for (const run of fixtures.dense.runs) await assertRunMatches(auto, run);
  // the relaxed file named, the baseline asked for: its sibling
  const base = await loadModel(path.join(dir, 'dense.relaxed.wasm'), { variant: 'baseline' });
  assert.equal(base.variant, 'baseline');
  for (const run of fixtures.dense.runs) await assertRunMatches(base, run);
  if (!relaxedHere) {
    await assert.rejects(loadModel(wasmPath('dense'), { variant: 'relaxed-simd' }), { name: 'ModelError',
      status: STATUS.INVALID_PROGRAM, message: `${wasmPath('dense')}: cannot run the relaxed-simd variant: this engine lacks relaxed-simd` });
  }
  await assert.rejects(loadModel(await readFile(wasmPath('dense')), { variant: 'relaxed-simd' }), { name: 'ModelError',
    status: STATUS.INVALID_PROGRAM, message: 'the given bytes: cannot run the relaxed-simd variant: it is the baseline variant' });
  await assert.rejects(loadModel(wasmPath('dense'), { variant: 'fast' }), /unknown variant 'fast'/);
  // bytes run as given, and say which file they are
  assert.equal((await loadModel(await readFile(wasmPath('dense')))).variant, 'baseline');
  const worker = await createWorker(wasmPath('dense'), { variant: 'baseline' });
  assert.equal(worker.variant, 'baseline');
  await assertRunMatches(worker, fixtures.dense.runs[1]);
  worker.dispose();
});

test('variants: where relaxed SIMD validates (Node 20 with its flag), auto runs dense.relaxed.wasm, which matches '
  + 'onnx.reference; a .relaxed.wasm beside a model whose metadata does not list it is ignored', async () => {
  // a stray pair: add_mul's baseline beside dense's relaxed file
  await writeFile(path.join(dir, 'stray.wasm'), await readFile(wasmPath('add_mul')));
  await writeFile(path.join(dir, 'stray.relaxed.wasm'), await readFile(path.join(dir, 'dense.relaxed.wasm')));
  const script = path.join(dir, 'relaxed_child.mjs');
  await writeFile(script, `
    import { loadModel, supportedVariants } from ${JSON.stringify(pathToFileURL(path.join(LOADER_DIR, 'index.js')).href)};
    import { feedsOf, mismatches } from ${JSON.stringify(pathToFileURL(path.join(LOADER_DIR, 'test-support/fixtures.js')).href)};
    const fixtures = ${JSON.stringify({ dense: fixtures.dense })};
    const model = await loadModel(${JSON.stringify(wasmPath('dense'))});
    const problems = [];
    for (const run of fixtures.dense.runs) problems.push(...mismatches(await model.run(feedsOf(run.inputs)), run.expected));
    const stray = await loadModel(${JSON.stringify(path.join(dir, 'stray.wasm'))});
    console.log(JSON.stringify({ supported: supportedVariants(), variant: model.variant, problems, stray: stray.variant,
      strayInputs: stray.inputs.map((i) => i.name) }));
  `);
  const { stdout } = await promisify(execFile)(process.execPath, ['--experimental-wasm-relaxed-simd', script]);
  // Node has shared memory: the threads variants run too (threads.test.js)
  assert.deepEqual(JSON.parse(stdout), { supported: ['relaxed-simd+threads', 'threads', 'relaxed-simd', 'baseline'],
    variant: 'relaxed-simd', problems: [], stray: 'baseline', strayInputs: ['x', 'b'] });
});

/**
 * Run `body` (the text of an ES module that may import the loader as LOADER and print JSON)
 * in a Node whose engine simulated_engine.mjs strips of features (`mode`).
 */
async function inSimulatedEngine(mode, body) {
  const script = path.join(dir, `simulated_${mode}.mjs`);
  await writeFile(script, `import * as LOADER from ${JSON.stringify(pathToFileURL(path.join(LOADER_DIR, 'index.js')).href)};\n${body}`);
  const preload = pathToFileURL(path.join(LOADER_DIR, 'test-support/simulated_engine.mjs')).href;
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', preload, script],
    { env: { ...process.env, SYMWASM_SIMULATE: mode } });
  return JSON.parse(stdout);
}

/** What loading `source` (JS source text) with LOADER[how] threw: {name, status, message}. */
const LOAD_FAILURE = `async function failure(how, source, options) {
  try {
    (await LOADER[how](source, options)).dispose();
    return 'loaded';
  } catch (e) {
    return { name: e.name, status: e.status, message: e.message };
  }
}`;

test('an engine without WebAssembly SIMD runs no variant: loadModel and createWorker refuse by name what it lacks', async () => {
  const [dense, relaxed, addMul] = [wasmPath('dense'), path.join(dir, 'dense.relaxed.wasm'), wasmPath('add_mul')];
  const report = await inSimulatedEngine('no-simd', `${LOAD_FAILURE}
    import { readFile } from 'node:fs/promises';
    console.log(JSON.stringify({
      supported: LOADER.supportedVariants(),
      dense: await failure('loadModel', ${JSON.stringify(dense)}),
      denseWorker: await failure('createWorker', ${JSON.stringify(dense)}),
      baseline: await failure('loadModel', ${JSON.stringify(relaxed)}, { variant: 'baseline' }),
      addMul: await failure('loadModel', ${JSON.stringify(addMul)}),
      relaxedBytes: await failure('loadModel', await readFile(${JSON.stringify(relaxed)})),
      // the simulation refuses SIMD modules itself: without the loader's check this is a CompileError
      compile: await WebAssembly.compile(await readFile(${JSON.stringify(addMul)})).then(() => 'compiled', (e) => e.name),
    }));`);
  const refused = (message) => ({ name: 'ModelError', status: STATUS.INVALID_PROGRAM, message });
  const neither = `${dense}: cannot load the model: no variant of it runs on this engine `
    + '(relaxed-simd: this engine lacks simd128, relaxed-simd; baseline: this engine lacks simd128)';
  assert.deepEqual(report, {
    supported: [],
    dense: refused(neither),
    denseWorker: refused(neither),
    baseline: refused(`${relaxed}: cannot run the baseline variant: this engine lacks simd128`),
    addMul: refused(`${addMul}: cannot load the model: this engine lacks simd128`),
    relaxedBytes: refused('the given bytes: cannot load the model: this engine lacks simd128, relaxed-simd'),
    compile: 'CompileError',
  });
});

test('every WebAssembly feature a model lists has a probe: an engine that validates nothing is told each one', async () => {
  const { variants } = await readMetadata(wasmPath('dense'));
  const report = await inSimulatedEngine('nothing', `${LOAD_FAILURE}
    console.log(JSON.stringify({ supported: LOADER.supportedVariants(), dense: await failure('loadModel', ${JSON.stringify(wasmPath('dense'))}) }));`);
  const lacks = (name) => `${name}: this engine lacks ${variants[name].features.join(', ')}`;
  assert.deepEqual(report, { supported: [], dense: { name: 'ModelError', status: STATUS.INVALID_PROGRAM,
    message: `${wasmPath('dense')}: cannot load the model: no variant of it runs on this engine (${lacks('relaxed-simd')}; ${lacks('baseline')})` } });
  assert.ok(variants.baseline.features.includes('simd128') && variants['relaxed-simd'].features.includes('relaxed-simd'));
});
