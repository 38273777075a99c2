// The loader in Chromium: the page test-support/browser.html imports index.js over HTTP,
// runs fixture models with several bindings of their symbolic dims and compares the outputs
// with onnx.reference's; it also cancels long runs of a model in a worker. Needs Debian's
// Chromium at /usr/bin/chromium: without it these tests fail (CI installs it); they never skip.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { STATUS } from '../abi.js';
import { buildFixtures, launchChromium, LOADER_DIR, serve } from '../test-support/harness.js';

let built;
let server;
let browser;
let page;
const pageErrors = [];

before(async () => {
  built = await buildFixtures('add_mul', 'where_greater', 'matmul', 'strings', 'dense');
  server = await serve([{ prefix: '/fixtures/', dir: built.dir }, { prefix: '/', dir: LOADER_DIR }]);
  browser = await launchChromium();
  page = await browser.newPage();
  // a failing import or top-level await in the page shows up here, not as a rejection
  page.on('pageerror', (e) => pageErrors.push(e.message));
  page.on('console', (m) => m.type() === 'error' && pageErrors.push(m.text()));
  await page.goto(`${server.url}/test-support/browser.html`);
  try {
    await page.waitForFunction(() => globalThis.symwasmTest, null, { timeout: 30_000 });
  } catch (e) {
    throw new Error(`the test page did not start: ${pageErrors.join('; ') || e.message}`, { cause: e });
  }
}, { timeout: 120_000 });

after(async () => {
  await browser?.close();
  await server?.close();
  await built?.cleanup();
});

/** Run fixture runs in the page and fail with every mismatch, naming each binding. */
async function assertRunsMatch(name, picks, how) {
  const report = await page.evaluate(([n, p, h]) => globalThis.symwasmTest.runFixture(n, p, h), [name, picks, how]);
  assert.equal(report.length, picks.length);
  const problems = report.filter((r) => r.mismatches.length).map((r) => `${r.run}: ${r.mismatches.join('; ')}`);
  assert.deepEqual(problems, [], problems.join('\n'));
  return report;
}

test('Chromium: add_mul, one module fetched by URL, four bindings of n match onnx.reference', async () => {
  const report = await assertRunsMatch('add_mul', [0, 1, 2, 3], 'url');
  assert.equal(new Set(report.map((r) => r.run)).size, 4);
});

test('Chromium: a --relaxed-simd model runs dense.relaxed.wasm (Chromium validates relaxed SIMD) and, asked for, '
  + 'the baseline; both match onnx.reference at three bindings', async () => {
  const report = await page.evaluate((n) => globalThis.symwasmTest.variantRuns(n), 'dense');
  assert.deepEqual(report, { supported: ['relaxed-simd', 'baseline'], auto: { variant: 'relaxed-simd', problems: [] },
    baseline: { variant: 'baseline', problems: [] } });
});

test('Chromium: where_greater, two symbols and a bool output, three bindings match', async () => {
  await assertRunsMatch('where_greater', [0, 1, 2], 'url');
});

test('Chromium: strings cross the ABI as Arrays of strings; three bindings match', async () => {
  await assertRunsMatch('strings', [0, 1, 2], 'url');
});

test('Chromium: loads from an ArrayBuffer and from a WebAssembly.Module', async () => {
  await assertRunsMatch('where_greater', [2, 0], 'bytes');
  await assertRunsMatch('add_mul', [1, 2], 'module');
});

test('Chromium: memory growth, a big input between small ones', async () => {
  await assertRunsMatch('add_mul', [1, 'growth', 2], 'url');
});

test("Chromium: bad inputs raise ModelErrors with the Python host's messages; the model keeps working", async () => {
  for (const name of ['add_mul', 'where_greater']) {
    const report = await page.evaluate((n) => globalThis.symwasmTest.errorCases(n), name);
    assert.ok(report.length >= 1);
    for (const r of report) {
      assert.deepEqual({ isModelError: r.isModelError, message: r.message, status: r.status },
        { isModelError: true, ...r.expected }, r.case);
      assert.deepEqual(r.after, [], `${r.case}: the next run`);
    }
  }
});

test('Chromium: a worker model cancels long runs (AbortSignal, timeout) and then runs correctly', async (t) => {
  const { aborts, timeout } = await page.evaluate(() => globalThis.symwasmTest.cancelThenRun(3));
  assert.equal(aborts.length, 3);
  for (const [i, r] of aborts.entries()) {
    assert.ok(r.cancelled, `cancel ${i}: ${r.message}`);
    assert.match(r.message, /^the call was cancelled \(its AbortSignal aborted \d+ ms after the call\)$/);
    assert.deepEqual(r.mismatches, [], `the run after cancel ${i}`);
  }
  assert.deepEqual({ isModelError: timeout.isModelError, status: timeout.status, message: timeout.message },
    { isModelError: true, status: STATUS.CANCELLED, message: 'the call was timed out after 100 ms' });
  assert.deepEqual(timeout.mismatches, [], 'the run after the timeout');
  const ms = (key) => aborts.map((r) => r[key].toFixed(2)).join(', ');
  t.diagnostic(`cancel latency (abort to rejection), Chromium: ${ms('latencyMs')} ms; to the next run's result: ${ms('recoveryMs')} ms`);
});

test('Chromium: the page loaded and raised no errors', () => {
  assert.ok(page, 'the page never loaded');
  assert.deepEqual(pageErrors, []);
});
