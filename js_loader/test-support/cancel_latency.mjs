/**
 * How quickly a worker model gives up a long call: the median, over 10 cancels of a long
 * MatMul (test-support/cancel.js), of the time from AbortController.abort() to the run's
 * rejection, and to the result of the next (small) run on the fresh instance that replaces
 * the stopped one. In Node, then in Chromium when /usr/bin/chromium is there.
 *
 *     node test-support/cancel_latency.mjs [TIMES]
 */
import { existsSync } from 'node:fs';

import { createWorker } from '../index.js';
import { cancelRepeatedly, median } from './cancel.js';
import { buildFixtures, CHROMIUM, launchChromium, LOADER_DIR, serve } from './harness.js';

const times = Number(process.argv[2] ?? 10);

function summarize(where, report) {
  const failed = report.filter((r) => !r.cancelled || r.mismatches.length);
  if (failed.length) throw new Error(`${where}: ${JSON.stringify(failed)}`);
  const ms = (key) => median(report.map((r) => r[key])).toFixed(2);
  console.log(`${where}: median over ${report.length} cancels: abort to rejection ${ms('latencyMs')} ms, `
    + `abort to the next run's result ${ms('recoveryMs')} ms`);
}

const built = await buildFixtures('matmul');
try {
  const model = await createWorker(`${built.dir}/${built.fixtures.matmul.wasm}`);
  summarize('Node', await cancelRepeatedly(model, built.fixtures.matmul.runs[1], { times }));
  model.dispose();

  if (!existsSync(CHROMIUM)) {
    console.log(`Chromium: not measured (${CHROMIUM} is missing)`);
  } else {
    const server = await serve([{ prefix: '/fixtures/', dir: built.dir }, { prefix: '/', dir: LOADER_DIR }]);
    const browser = await launchChromium();
    try {
      const page = await browser.newPage();
      await page.goto(`${server.url}/test-support/browser.html`);
      await page.waitForFunction(() => globalThis.symwasmTest, null, { timeout: 30_000 });
      const { aborts } = await page.evaluate((n) => globalThis.symwasmTest.cancelThenRun(n), times);
      summarize('Chromium', aborts);
    } finally {
      await browser.close();
      await server.close();
    }
  }
} finally {
  await built.cleanup();
}
