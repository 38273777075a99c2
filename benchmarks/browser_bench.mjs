// Runs samples/web/bench.html in headless Chromium for browser_bench.py:
//   node browser_bench.mjs DIR QUERY
// serves the repository at / and DIR (the page's manifest, models, inputs and reference
// outputs) at /browser_bench/, cross-origin isolated (the N-thread peers need shared memory),
// opens the page with QUERY (warmup, time, repeat, threads), runs it and prints its results
// as JSON on stdout; the page's progress goes to stderr.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { launchChromium, serve } from '../js_loader/test-support/harness.js';

const REPO = path.resolve(fileURLToPath(new URL('..', import.meta.url)));
const [dir, query = ''] = process.argv.slice(2);
if (!dir) throw new Error('usage: node browser_bench.mjs DIR [QUERY]');

const ISOLATION = { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' };
const server = await serve([{ prefix: '/browser_bench/', dir }, { prefix: '/', dir: REPO }], { headers: ISOLATION });
const browser = await launchChromium();
try {
  const page = await browser.newPage({ viewport: { width: 2000, height: 1000 } });
  const problems = [];
  page.on('console', (m) => (m.type() === 'error' ? problems.push(m.text()) : process.stderr.write(`  ${m.text()}\n`)));
  page.on('pageerror', (e) => problems.push(e.stack || String(e)));
  await page.goto(`${server.url}/samples/web/bench.html?manifest=/browser_bench/manifest.json&${query}`);
  const result = await page.evaluate(() => globalThis.bench.ready.then(() => globalThis.bench.run()));
  if (problems.length) throw new Error(`the page reported errors:\n${problems.join('\n')}`);
  await page.screenshot({ path: path.join(dir, 'bench.png'), fullPage: true });
  process.stdout.write(JSON.stringify(result));
} finally {
  await browser.close();
  await server.close();
}
