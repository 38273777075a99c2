// What a load downloads. A model compiled with --relaxed-simd is two files, each led by its
// metadata and variant sections (toolkit/link.py). Given a URL or path, the loader reads the
// given file only as far as those, picks the variant, then reads on or leaves the file for
// the other variant's. A local server counts what it sends of each file (harness.js: serve)
// and stalls the file the loader should leave after its first 64 KiB, as a slow link would:
// a loader that needed more would wait out the stall and be counted the whole file. A file
// in the old layout, the sections at its end (made here by moving them), is read whole and
// still loads. The `wide` fixture's files are 16 MiB, its metadata a few kB.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';

import { loadModel } from '../index.js';
import { buildFixtures, launchChromium, LOADER_DIR, serve } from '../test-support/harness.js';
import { feedsOf, mismatches } from '../test-support/fixtures.js';

/** How much of a stalled file the server sends before it waits: the head and far more. */
const STALL_BYTES = 1 << 16;
const [BASE, RELAXED] = ['wide.wasm', 'wide.relaxed.wasm'];

let built;
let server;
let browser;
let page;
let size;

before(async () => {
  built = await buildFixtures('wide');
  await mkdir(path.join(built.dir, 'old'));
  for (const file of [BASE, RELAXED]) {
    await writeFile(path.join(built.dir, 'old', file), sectionsAtTheEnd(await readFile(path.join(built.dir, file))));
  }
  size = {};
  for (const file of [BASE, RELAXED]) size[file] = (await stat(path.join(built.dir, file))).size;
  server = await serve([{ prefix: '/fixtures/', dir: built.dir }, { prefix: '/', dir: LOADER_DIR }]);
}, { timeout: 120_000 });

after(async () => {
  await browser?.close();
  await server?.close();
  await built?.cleanup();
});

/** A module's sections in order: {id, name (of a custom section), start, end}, from the id's byte. */
function sectionsOf(bytes) {
  const u32 = (at) => {
    let value = 0;
    for (let shift = 0; ; shift += 7) {
      const byte = bytes[at++];
      value += (byte & 0x7f) * 2 ** shift;
      if (!(byte & 0x80)) return [value, at];
    }
  };
  const out = [];
  for (let pos = 8; pos < bytes.length;) {
    const [length, content] = u32(pos + 1);
    const [n, name] = bytes[pos] === 0 ? u32(content) : [0, null];
    out.push({ id: bytes[pos], name: name === null ? null : new TextDecoder().decode(bytes.subarray(name, name + n)),
      start: pos, end: content + length });
    pos = content + length;
  }
  return out;
}

/** `bytes` with its custom sections moved to its end, where symwasm wrote them before. */
function sectionsAtTheEnd(bytes) {
  const sections = sectionsOf(bytes);
  const order = [...sections.filter((s) => s.id !== 0), ...sections.filter((s) => s.id === 0)];
  return Buffer.concat([bytes.subarray(0, 8), ...order.map((s) => bytes.subarray(s.start, s.end))]);
}

/** What the server sent of each fixture file since the last call: {file: {requests, bytes, hangUps}}. */
async function sent() {
  await server.idle();
  const out = Object.fromEntries([...server.served].filter(([p]) => p.endsWith('.wasm'))
    .map(([p, count]) => [p.slice('/fixtures/'.length), { ...count }]));
  server.served.clear();
  server.stalls.clear();
  return out;
}

const whole = (file) => ({ requests: 1, bytes: size[file], hangUps: 0 });
/** The count of a file of which the client read the head and hung up. */
function assertHeadOnly(count, file) {
  assert.ok(count, `${file} was not requested`);
  assert.equal(count.requests, 1, `${file} was requested ${count.requests} times`);
  assert.ok(count.bytes <= STALL_BYTES, `${file}: ${count.bytes} of its ${size[file]} bytes were sent, `
    + `more than the ${STALL_BYTES} sent before the stall`);
  assert.equal(count.hangUps, 1, `${file}: the loader did not cancel its download`);
}

const stall = (file) => server.stalls.set(`/fixtures/${file}`, STALL_BYTES);
const urlOf = (file) => `${server.url}/fixtures/${file}`;
const runs = () => built.fixtures.wide.runs;

test('each file is led by its metadata and variant sections; moved to the end they make an old-layout file', async () => {
  for (const file of [BASE, RELAXED]) {
    const front = sectionsOf(await readFile(path.join(built.dir, file)));
    assert.deepEqual(front.slice(0, 3).map((s) => s.name ?? s.id), ['symwasm.metadata', 'symwasm.variant', 1], file);
    assert.ok(front[1].end < STALL_BYTES / 4, `${file}: the sections end at byte ${front[1].end}`);
    const old = sectionsOf(await readFile(path.join(built.dir, 'old', file)));
    assert.deepEqual(old.slice(-2).map((s) => s.name), ['symwasm.metadata', 'symwasm.variant'], file);
    assert.equal(old[0].id, 1);
  }
  assert.ok(size[BASE] > 16e6 && size[RELAXED] > 16e6);
});

/**
 * Load `source` with `variant` in a child Node that validates relaxed SIMD (Node 20 needs
 * the flag): {variant, problems (the fixture's runs against onnx.reference), read (the bytes
 * the process read from files and pipes during the load: /proc/self/io's rchar)}.
 */
async function loadInRelaxedNode(source, variant = 'auto') {
  const script = path.join(built.dir, 'load_child.mjs');
  await writeFile(script, `
    import { readFile } from 'node:fs/promises';
    import { loadModel } from ${JSON.stringify(pathToFileURL(path.join(LOADER_DIR, 'index.js')).href)};
    import { feedsOf, mismatches } from ${JSON.stringify(pathToFileURL(path.join(LOADER_DIR, 'test-support', 'fixtures.js')).href)};
    const { runs } = JSON.parse(await readFile(${JSON.stringify(path.join(built.dir, 'fixtures.json'))}, 'utf8')).wide;
    const rchar = async () => Number(/rchar: (\\d+)/.exec(await readFile('/proc/self/io', 'utf8'))[1]);
    const before = await rchar();
    const model = await loadModel(process.argv[2], { variant: process.argv[3] });
    const read = (await rchar()) - before;
    const problems = [];
    for (const run of runs) problems.push(...mismatches(await model.run(feedsOf(run.inputs)), run.expected));
    console.log(JSON.stringify({ variant: model.variant, problems, read }));
  `);
  const { stdout } = await promisify(execFile)(process.execPath,
    ['--experimental-wasm-relaxed-simd', script, source, variant], { maxBuffer: 1 << 20 });
  return JSON.parse(stdout);
}

test('Node, relaxed SIMD chosen, by URL: the baseline file is sent only as far as the stall, the relaxed file '
  + 'once, whole', { timeout: 120_000 }, async () => {
  stall(BASE);
  const { variant, problems } = await loadInRelaxedNode(urlOf(BASE));
  assert.deepEqual({ variant, problems }, { variant: 'relaxed-simd', problems: [] });
  const counts = await sent();
  assertHeadOnly(counts[BASE], BASE);
  assert.deepEqual(counts[RELAXED], whole(RELAXED));
});

test('Node, relaxed SIMD chosen, by path: the process reads the baseline file\'s head and the relaxed file', async () => {
  const { variant, problems, read } = await loadInRelaxedNode(path.join(built.dir, BASE));
  assert.deepEqual({ variant, problems }, { variant: 'relaxed-simd', problems: [] });
  assert.ok(read >= size[RELAXED], `${read} bytes read, less than the relaxed file's ${size[RELAXED]}`);
  assert.ok(read - size[RELAXED] < 1 << 20, `${read - size[RELAXED]} bytes read besides the relaxed file: `
    + `more than a head of the baseline file's ${size[BASE]}`);
});

test('Node, the baseline chosen: by URL each file it reads is sent once; the relaxed file given, only its head',
  { timeout: 120_000 }, async () => {
    // this Node has no relaxed SIMD without its flag: auto runs the baseline
    for (const [source, options] of [[BASE, {}], [RELAXED, { variant: 'baseline' }]]) {
      stall(RELAXED);
      const model = await loadModel(urlOf(source), options);
      assert.equal(model.variant, 'baseline');
      for (const run of runs()) assert.deepEqual(mismatches(await model.run(feedsOf(run.inputs)), run.expected), []);
      model.dispose();
      const counts = await sent();
      assert.deepEqual(counts[BASE], whole(BASE), source);
      if (source === BASE) assert.equal(counts[RELAXED], undefined, 'the relaxed file was requested');
      else assertHeadOnly(counts[RELAXED], RELAXED);
    }
  });

test('Node: files in the old layout (the sections at the end) are read whole and load, by URL and by path, '
  + 'either variant', { timeout: 120_000 }, async () => {
  const oldPath = path.join(built.dir, 'old', BASE);
  for (const source of [urlOf(`old/${BASE}`), oldPath]) {
    assert.deepEqual(await loadInRelaxedNode(source).then(({ variant, problems }) => ({ variant, problems })),
      { variant: 'relaxed-simd', problems: [] }, source);
    const model = await loadModel(source);
    assert.equal(model.variant, 'baseline');
    for (const run of runs()) assert.deepEqual(mismatches(await model.run(feedsOf(run.inputs)), run.expected), []);
    model.dispose();
  }
  const counts = await sent();
  assert.deepEqual(counts[`old/${BASE}`], { requests: 2, bytes: 2 * size[BASE], hangUps: 0 });
  assert.deepEqual(counts[`old/${RELAXED}`], whole(RELAXED));
});

async function chromiumPage() {
  if (!page) {
    browser = await launchChromium();
    page = await browser.newPage();
    await page.goto(`${server.url}/test-support/browser.html`);
    await page.waitForFunction(() => globalThis.symwasmTest, null, { timeout: 30_000 });
  }
  return page;
}

/** Load fixtures/`file` in Chromium by URL, with loadModel ('main') or createWorker ('worker'). */
async function loadInChromium(file, how, variant = 'auto') {
  const p = await chromiumPage();
  return p.evaluate((args) => globalThis.symwasmTest.loadByUrl(...args), ['wide', file, how, variant]);
}

test('Chromium, relaxed SIMD chosen: the baseline file is sent only as far as the stall, then cancelled; '
  + 'the relaxed file once, whole (loadModel and createWorker)', { timeout: 120_000 }, async () => {
  for (const how of ['main', 'worker']) {
    stall(BASE);
    assert.deepEqual(await loadInChromium(BASE, how), { variant: 'relaxed-simd', problems: [] }, how);
    const counts = await sent();
    assertHeadOnly(counts[BASE], BASE);
    assert.deepEqual(counts[RELAXED], whole(RELAXED), how);
  }
});

test('Chromium, the baseline asked for: the baseline file is sent once, the relaxed file not at all',
  { timeout: 120_000 }, async () => {
    assert.deepEqual(await loadInChromium(BASE, 'main', 'baseline'), { variant: 'baseline', problems: [] });
    assert.deepEqual(await sent(), { [BASE]: whole(BASE) });
  });

test('Chromium: a model in the old layout is read whole and runs its relaxed file', { timeout: 120_000 }, async () => {
  assert.deepEqual(await loadInChromium(`old/${BASE}`, 'main'), { variant: 'relaxed-simd', problems: [] });
  assert.deepEqual(await sent(), { [`old/${BASE}`]: whole(BASE), [`old/${RELAXED}`]: whole(RELAXED) });
});
