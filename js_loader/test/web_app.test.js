// The web app (samples/web/) in Chromium: test digits drawn on its pad stroke by stroke with
// the mouse, classified in a Web Worker and on the main thread; each prediction must equal the
// true label and the Python host's prediction on the very pixels the page fed its model.
// The app's model is built into a temporary directory served where `make demo` puts it.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';

import { launchChromium, LOADER_DIR, serve } from '../test-support/harness.js';

const REPO = path.resolve(LOADER_DIR, '..');
const PYTHON = path.join(REPO, '.venv/bin/python');
const HOST = path.join(LOADER_DIR, 'test/digits_host.py');
const SCREENSHOT = path.join(REPO, 'build/test-screenshots/web_app.png');
const DIGITS = 3;
// a test image's cell is drawn as ink when at least half full (8 of 16)
const INKED = 8;

let built;
let server;
let browser;
let page;
let digits;
const pageErrors = [];

async function python(args, input) {
  const run = promisify(execFile)(PYTHON, args, { cwd: REPO, maxBuffer: 64 << 20 });
  if (input !== undefined) run.child.stdin.end(input);
  try {
    return (await run).stdout;
  } catch (e) {
    throw new Error(`${args.join(' ')} failed:\n${e.stderr || e.message}`, { cause: e });
  }
}

before(async () => {
  built = await mkdtemp(path.join(tmpdir(), 'symwasm-web-'));
  await python(['samples/build_samples.py', '--out', built, '--only', 'digits']);
  digits = JSON.parse(await python([HOST, 'images', String(DIGITS)]));
  server = await serve([{ prefix: '/build/samples/', dir: built }, { prefix: '/', dir: REPO }]);
  browser = await launchChromium();
  page = await browser.newPage({ viewport: { width: 1240, height: 900 } });
  page.on('pageerror', (e) => pageErrors.push(e.message));
  page.on('console', (m) => m.type() === 'error' && pageErrors.push(m.text()));
  await page.goto(`${server.url}/samples/web/index.html`);
  await page.evaluate(() => globalThis.digitsApp.started);
}, { timeout: 180_000 });

after(async () => {
  await browser?.close();
  await server?.close();
  if (built) await rm(built, { recursive: true, force: true });
});

/**
 * Draw an 8x8 test image on the pad as a person would, with the app's pen: each row's runs of
 * inked cells as one stroke (pointer down, moves, up), cells as wide as the pen.
 */
async function draw(pixels) {
  await page.click('#clear');
  const pad = await page.locator('#canvas').boundingBox();
  const cell = await page.evaluate(() => globalThis.digitsApp.pen);
  const x0 = pad.x + (pad.width - 8 * cell) / 2 + cell / 2;
  const y0 = pad.y + (pad.height - 8 * cell) / 2 + cell / 2;
  for (let r = 0; r < 8; r++) {
    for (let c = 0; c < 8; c++) {
      if (pixels[8 * r + c] < INKED || (c > 0 && pixels[8 * r + c - 1] >= INKED)) continue;
      let end = c;
      while (end < 7 && pixels[8 * r + end + 1] >= INKED) end++;
      await page.mouse.move(x0 + c * cell, y0 + r * cell);
      await page.mouse.down();
      if (end > c) await page.mouse.move(x0 + end * cell, y0 + r * cell, { steps: 2 * (end - c) });
      await page.mouse.up();
    }
  }
  return page.evaluate(() => globalThis.digitsApp.idle());
}

/** The Python host's predictions (wasm_runtime, the module make demo builds) on the runs' pixels. */
async function hostPredictions(runs) {
  const input = JSON.stringify(runs.map(({ shape, pixels }) => ({ shape, pixels })));
  return JSON.parse(await python([HOST, 'predict', path.join(built, 'digits.wasm')], input));
}

async function drawAndCheck(t, mode) {
  const runs = [];
  for (const { pixels } of digits) runs.push(await draw(pixels));
  const host = await hostPredictions(runs);
  for (const [i, { index, label }] of digits.entries()) {
    const run = runs[i];
    assert.equal(run.mode, mode);
    assert.deepEqual(run.shape, [280, 280], 'the pad is fed at its size (device pixel ratio 1)');
    assert.equal(run.predicted, host[i].predicted, `test image ${index}: the page and the Python host disagree`);
    assert.equal(run.predicted, label, `test image ${index} (a ${label}) was read as ${run.predicted}`);
    run.probs.forEach((p, d) => assert.ok(Math.abs(p - host[i].probs[d]) <= 1e-5, `image ${index} p(${d}): ${p} vs ${host[i].probs[d]}`));
    t.diagnostic(`test image ${index} (${label}): crop [${run.crop}], ${run.nInk} ink pixels, p = ${run.probs[label].toFixed(4)}, `
      + `${run.ms.toFixed(2)} ms`);
  }
}

test('Chromium app: three test digits drawn stroke by stroke, classified in the Web Worker, equal the Python host '
  + 'on the same pixels and the true labels', async (t) => {
  const variant = await page.locator('#variant').textContent();
  assert.equal(variant, 'relaxed SIMD', 'Chromium validates relaxed SIMD: the app runs digits.relaxed.wasm');
  await drawAndCheck(t, 'worker');
  await mkdir(path.dirname(SCREENSHOT), { recursive: true });
  await page.screenshot({ path: SCREENSHOT });
  t.diagnostic(`screenshot: ${SCREENSHOT}`);
});

test('Chromium app: the same three digits on the main thread', async (t) => {
  await page.click('.toggle button[data-mode="main"]');
  await drawAndCheck(t, 'main');
  await page.click('.toggle button[data-mode="worker"]');
});

test('Chromium app: a test image picked from the gallery is classified as its label', async () => {
  const button = page.locator('#gallery button').nth(5);
  const label = Number(await button.textContent());
  await button.click();
  const run = await page.evaluate(() => globalThis.digitsApp.idle());
  const [host] = await hostPredictions([run]);
  assert.deepEqual([run.predicted, host.predicted], [label, label]);
});

test('Chromium app: a cleared pad is "nothing drawn": a 0 x 0 crop, no prediction, no error', async () => {
  await draw(digits[0].pixels);
  await page.click('#clear');
  const run = await page.evaluate(() => globalThis.digitsApp.idle());
  assert.deepEqual({ predicted: run.predicted, crop: run.crop, nInk: run.nInk }, { predicted: null, crop: [0, 0], nInk: 0 });
  assert.deepEqual(run.probs, new Array(10).fill(0));
  assert.equal(await page.locator('#confidence').textContent(), 'Nothing drawn');
  assert.equal(await page.locator('#status').textContent(), '');
  const [host] = await hostPredictions([run]);
  assert.equal(host.predicted, null);
});

test('Chromium app: the page raised no errors', () => {
  assert.deepEqual(pageErrors, []);
});
