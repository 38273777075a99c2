// Threads in Node: a model's threads variant runs a call's split kernels on several threads
// (workers running thread.js over the one shared memory) with the same bits as one thread;
// the variant each count picks, the notes when fewer run than asked, setThreads, dispose
// ending the workers, cancelling a call that runs on threads, and createWorker's threads;
// in Chromium, a cross-origin isolated page's workers run on threads, its main thread and a
// page that is not isolated fall back to one thread with a note.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';

import { createWorker, loadModel, ModelError, STATUS, supportedVariants } from '../index.js';
import { buildFixtures, launchChromium, LOADER_DIR } from '../test-support/harness.js';
import { longFeeds } from '../test-support/cancel.js';
import { describeRun, feedsOf, mismatches } from '../test-support/fixtures.js';

let dir;
let fixtures;
let cleanup;

before(async () => {
  ({ dir, fixtures, cleanup } = await buildFixtures('matmul_softmax', 'matmul_threads', 'add_mul'));
});
after(() => cleanup?.());

const wasmPath = (name) => path.join(dir, fixtures[name].wasm);
// Node 20 validates relaxed SIMD only behind a flag (the last test gives it)
const relaxed = supportedVariants().includes('relaxed-simd');

/** Every run of the fixture on `model`: its outputs, each checked against onnx.reference. */
async function runAll(model, name) {
  const outputs = [];
  for (const run of fixtures[name].runs) {
    const got = await model.run(feedsOf(run.inputs));
    const problems = mismatches(got, run.expected);
    assert.deepEqual(problems, [], `${name} ${describeRun(run)} at ${model.threads} threads: ${problems.join('; ')}`);
    outputs.push(got);
  }
  return outputs;
}

/** Outputs as their bytes, to compare bit for bit. */
const bits = (outputs) => outputs.map((o) => Object.fromEntries(Object.entries(o).map(([k, t]) => [k, Buffer.from(t.data.buffer)])));

test('a threads variant runs on 2 and 3 threads with the same bits as on 1, which match onnx.reference', async () => {
  assert.ok(supportedVariants().includes('threads'), 'Node has shared memory');
  const one = await loadModel(wasmPath('matmul_softmax'), { threads: 1 });
  assert.deepEqual({ variant: one.variant, threads: one.threads, note: one.threadsNote },
    { variant: relaxed ? 'relaxed-simd' : 'baseline', threads: 1, note: '' });
  const reference = bits(await runAll(one, 'matmul_softmax'));
  one.dispose();
  for (const threads of [2, 3]) {
    const model = await loadModel(wasmPath('matmul_softmax'), { threads });
    assert.deepEqual({ variant: model.variant, threads: model.threads, note: model.threadsNote },
      { variant: relaxed ? 'relaxed-simd+threads' : 'threads', threads, note: '' });
    assert.deepEqual(bits(await runAll(model, 'matmul_softmax')), reference, `${threads} threads`);
    model.dispose();
  }
});

test('setThreads changes the pool within the loaded variant; bad counts are refused as in the Python host', async () => {
  const model = await loadModel(wasmPath('matmul_softmax'), { threads: 2 });
  const reference = bits(await runAll(model, 'matmul_softmax'));
  for (const n of [3, 1, 2, 2]) { // the same count twice: a new pool
    assert.equal(await model.setThreads(n), n);
    assert.deepEqual({ threads: model.threads, note: model.threadsNote, variant: model.variant },
      { threads: n, note: '', variant: relaxed ? 'relaxed-simd+threads' : 'threads' });
    assert.deepEqual(bits(await runAll(model, 'matmul_softmax')), reference, `after setThreads(${n})`);
  }
  for (const bad of [0, 1.5, '2', -1]) {
    assert.throws(() => model.setThreads(bad), { name: 'ModelError', status: STATUS.INVALID_INPUT,
      message: `threads must be a whole number of threads (1 or more), not ${typeof bad === 'string' ? `'${bad}'` : bad}` });
  }
  await assert.rejects(loadModel(wasmPath('matmul_softmax'), { threads: 0 }), { name: 'ModelError', status: STATUS.INVALID_INPUT });
  model.dispose();
  assert.throws(() => model.setThreads(2), { name: 'ModelError', message: /the model was disposed/ });
});

test('fewer threads than asked say why: a model without the threads variant, bytes of another variant', async () => {
  const plain = await loadModel(wasmPath('add_mul'), { threads: 2 });
  assert.deepEqual({ variant: plain.variant, threads: plain.threads, note: plain.threadsNote }, { variant: 'baseline', threads: 1,
    note: '1 of 2 threads: the model has no threads variant (compile with --threads)' });
  assert.equal(await plain.setThreads(3), 1);
  assert.equal(plain.threadsNote, '1 of 3 threads: the model has no threads variant (compile with --threads)');
  assert.equal(await plain.setThreads(1), 1);
  assert.equal(plain.threadsNote, '');
  plain.dispose();
  // bytes run as the variant they are
  const bytes = await loadModel(await readFile(wasmPath('matmul_softmax')), { threads: 2 });
  assert.deepEqual({ variant: bytes.variant, threads: bytes.threads, note: bytes.threadsNote }, { variant: 'baseline', threads: 1,
    note: '1 of 2 threads: it is the baseline variant, which has no threads (give the threads variant\'s bytes, or load '
      + 'the model by path or URL)' });
  bytes.dispose();
  const threadedBytes = await loadModel(await readFile(path.join(dir, 'matmul_softmax.threads.wasm')), { threads: 2 });
  assert.deepEqual({ variant: threadedBytes.variant, threads: threadedBytes.threads }, { variant: 'threads', threads: 2 });
  await runAll(threadedBytes, 'matmul_softmax');
  threadedBytes.dispose();
  // a variant named runs, on the threads it has
  const named = await loadModel(wasmPath('matmul_softmax'), { variant: 'baseline', threads: 2 });
  assert.deepEqual({ variant: named.variant, threads: named.threads, note: named.threadsNote }, { variant: 'baseline', threads: 1,
    note: '1 of 2 threads: it is the baseline variant, which has no threads' });
  named.dispose();
  const single = await loadModel(wasmPath('matmul_softmax'), { variant: 'threads', threads: 1 });
  assert.deepEqual({ variant: single.variant, threads: single.threads, note: single.threadsNote }, { variant: 'threads', threads: 1, note: '' });
  await runAll(single, 'matmul_softmax');
  single.dispose();
  // a compiled threads variant comes without the bytes its memory's size is read from
  const module = await WebAssembly.compile(await readFile(path.join(dir, 'matmul_softmax.threads.wasm')));
  await assert.rejects(loadModel(module, { threads: 2 }), { name: 'ModelError', status: STATUS.INVALID_PROGRAM,
    message: 'the given module: cannot load the model: it is the threads variant, whose memory\'s size this loader reads '
      + 'from the module\'s bytes: give its bytes, path or URL rather than a WebAssembly.Module' });
});

/** Run `body` (an ES module's text that may use loadModel, createWorker and the fixtures'
 * paths) in a child Node with `flags`: its stdout, once it has exited by itself. */
async function inChild(body, flags = []) {
  const script = path.join(dir, `child_${Math.random().toString(36).slice(2)}.mjs`);
  await writeFile(script, `import { createWorker, loadModel } from ${JSON.stringify(pathToFileURL(path.join(LOADER_DIR, 'index.js')).href)};
    import { feedsOf, mismatches } from ${JSON.stringify(pathToFileURL(path.join(LOADER_DIR, 'test-support/fixtures.js')).href)};
    const fixtures = ${JSON.stringify(fixtures)};
    const wasmPath = (name) => ${JSON.stringify(dir)} + '/' + fixtures[name].wasm;
    ${body}`);
  const { stdout } = await promisify(execFile)(process.execPath, [...flags, script], { timeout: 60_000 });
  return stdout;
}

test('the workers of a model\'s threads do not keep Node running, disposed or not', async () => {
  const body = (dispose) => `const model = await loadModel(wasmPath('matmul_softmax'), { threads: 3 });
    const { inputs, expected } = fixtures.matmul_softmax.runs[2];
    const problems = mismatches(await model.run(feedsOf(inputs)), expected);
    ${dispose ? 'model.dispose();' : ''}
    console.log(JSON.stringify({ threads: model.threads, problems }));`;
  for (const dispose of [true, false]) {
    const started = performance.now();
    const stdout = await inChild(body(dispose));
    assert.deepEqual(JSON.parse(stdout), { threads: 3, problems: [] }, `disposed: ${dispose}`);
    assert.ok(performance.now() - started < 30_000, `disposed: ${dispose}: the process took ${performance.now() - started} ms`);
  }
});

test('a WorkerModel runs on threads, and a timeout stops a long call on 2 threads; the next run is right', async () => {
  const worker = await createWorker(wasmPath('matmul_threads'), { threads: 2 });
  assert.deepEqual({ variant: worker.variant, threads: worker.threads, note: worker.threadsNote },
    { variant: 'threads', threads: 2, note: '' });
  for (const run of fixtures.matmul_threads.runs) {
    assert.deepEqual(mismatches(await worker.run(feedsOf(run.inputs)), run.expected), [], describeRun(run));
  }
  const started = performance.now();
  await assert.rejects(worker.run(longFeeds(), { timeout: 200 }), (e) => e instanceof ModelError
    && e.status === STATUS.CANCELLED && e.message === 'the call was timed out after 200 ms');
  assert.ok(performance.now() - started < 5_000, `cancelled after ${performance.now() - started} ms`);
  const run = fixtures.matmul_threads.runs[1];
  assert.deepEqual(mismatches(await worker.run(feedsOf(run.inputs)), run.expected), []);
  // the fresh instance has the threads asked for
  assert.deepEqual({ threads: worker.threads, note: worker.threadsNote }, { threads: 2, note: '' });
  assert.equal(await worker.setThreads(3), 3);
  assert.deepEqual(mismatches(await worker.run(feedsOf(run.inputs)), run.expected), []);
  worker.dispose();

  const plain = await createWorker(wasmPath('add_mul'), { threads: 2 });
  assert.deepEqual({ threads: plain.threads, note: plain.threadsNote },
    { threads: 1, note: '1 of 2 threads: the model has no threads variant (compile with --threads)' });
  plain.dispose();
});

test('a WorkerModel on threads gives the same bits as a Model on one', async () => {
  const one = await loadModel(wasmPath('matmul_softmax'), { threads: 1, variant: 'baseline' });
  const reference = bits(await runAll(one, 'matmul_softmax'));
  one.dispose();
  const worker = await createWorker(wasmPath('matmul_softmax'), { threads: 2, variant: 'threads' });
  assert.equal(worker.threads, 2);
  assert.deepEqual(bits(await runAll(worker, 'matmul_softmax')), reference);
  worker.dispose();
});

test('where relaxed SIMD validates (Node 20 with its flag), auto picks relaxed-simd+threads on 2 threads and '
  + 'relaxed-simd on 1, with the same bits', async () => {
  const stdout = await inChild(`const report = {};
    const bits = [];
    for (const threads of [1, 2]) {
      const model = await loadModel(wasmPath('matmul_softmax'), { threads });
      const { inputs, expected } = fixtures.matmul_softmax.runs[2];
      const { y } = await model.run(feedsOf(inputs));
      report[threads] = { variant: model.variant, threads: model.threads, problems: mismatches({ y }, expected) };
      bits.push(Buffer.from(y.data.buffer).toString('base64'));
      model.dispose();
    }
    console.log(JSON.stringify({ report, same: bits[0] === bits[1] }));`, ['--experimental-wasm-relaxed-simd']);
  assert.deepEqual(JSON.parse(stdout), { report: { 1: { variant: 'relaxed-simd', threads: 1, problems: [] },
    2: { variant: 'relaxed-simd+threads', threads: 2, problems: [] } }, same: true });
});

test('memory that grows while a call runs on threads: the views are made again, the outputs right', async () => {
  const model = await loadModel(wasmPath('matmul_threads'), { threads: 2 });
  assert.equal(model.variant, 'threads');
  for (const n of [3, 700, 5]) {
    const { y } = await model.run({ a: { data: new Float32Array(n * n).fill(1), shape: [n, n] },
      b: { data: new Float32Array(n * n).fill(2), shape: [n, n] } });
    assert.ok(y.data.every((v) => v === 2 * n), `n = ${n}`);
  }
  await runAll(model, 'matmul_threads');
  model.dispose();
});

/**
 * Serve the loader at /LOADER/ and the fixtures at /fixtures/, under /isolated/ with the two
 * headers that make a page cross-origin isolated and under /plain/ without, and an empty page
 * at page.html under each.
 */
async function serveIsolated() {
  const types = { '.js': 'text/javascript', '.wasm': 'application/wasm', '.json': 'application/json', '.html': 'text/html' };
  const server = createServer(async (req, res) => {
    const [, mode, mount, ...rest] = new URL(req.url, 'http://localhost').pathname.split('/');
    const headers = mode === 'isolated'
      ? { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' } : {};
    const root = { loader: LOADER_DIR, fixtures: dir }[mount];
    const file = root && path.join(root, ...rest);
    const body = mount === 'page.html' ? '<!doctype html><title>threads</title>'
      : file?.startsWith(root) && await readFile(file).catch(() => null);
    if (!body) return void res.writeHead(404).end();
    res.writeHead(200, { ...headers, 'content-type': types[path.extname(file ?? mount)] ?? 'application/octet-stream' });
    res.end(body);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((resolve) => server.close(resolve)) };
}

/** In the page: matmul_softmax's largest run on 2 threads with loadModel and createWorker:
 * each one's variant, threads, note and differences from onnx.reference. */
async function threadsInPage() {
  const { loadModel, createWorker, supportedVariants } = await import('./loader/index.js');
  const { feedsOf, mismatches } = await import('./loader/test-support/fixtures.js');
  const fixtures = await (await fetch('./fixtures/fixtures.json')).json();
  const { inputs, expected } = fixtures.matmul_softmax.runs[2];
  const report = { isolated: globalThis.crossOriginIsolated, supported: supportedVariants() };
  for (const [how, load] of [['main', loadModel], ['worker', createWorker]]) {
    const model = await load(new URL(`./fixtures/${fixtures.matmul_softmax.wasm}`, location.href), { threads: 2 });
    report[how] = { variant: model.variant, threads: model.threads, note: model.threadsNote,
      problems: mismatches(await model.run(feedsOf(inputs)), expected) };
    model.dispose();
  }
  return report;
}

test('Chromium: an isolated page\'s worker runs a model on 2 threads; its main thread, and a page that is not '
  + 'isolated, run one and say why', { timeout: 120_000 }, async () => {
  const server = await serveIsolated();
  const browser = await launchChromium();
  try {
    const page = await browser.newPage();
    const reports = {};
    for (const mode of ['isolated', 'plain']) {
      await page.goto(`${server.url}/${mode}/page.html`);
      reports[mode] = await page.evaluate(threadsInPage);
    }
    const one = (why) => ({ variant: 'relaxed-simd', threads: 1, note: `1 of 2 threads: ${why}`, problems: [] });
    const isolation = 'the page is not cross-origin isolated, which shared memory needs (serve it with '
      + 'Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp)';
    assert.deepEqual(reports, {
      isolated: { isolated: true, supported: ['relaxed-simd+threads', 'threads', 'relaxed-simd', 'baseline'],
        main: one('a browser\'s main thread may not wait for other threads (run the model with createWorker to use threads)'),
        worker: { variant: 'relaxed-simd+threads', threads: 2, note: '', problems: [] } },
      plain: { isolated: false, supported: ['relaxed-simd', 'baseline'], main: one(isolation), worker: one(isolation) },
    });
  } finally {
    await browser.close();
    await server.close();
  }
});
