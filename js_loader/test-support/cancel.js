/**
 * Cancelling long calls of the matmul fixture (make_fixtures.py) on a WorkerModel, shared by
 * the Node tests, the browser page and cancel_latency.mjs. Plain ES module with no Node
 * imports, so browsers load it as is.
 */
import { ModelError, STATUS } from '../index.js';
import { feedsOf, mismatches } from './fixtures.js';

/** A MatMul of [LONG_N, LONG_N] matrices takes seconds: still running whenever it is cancelled. */
export const LONG_N = 2500;

export function longFeeds() {
  const data = new Float32Array(LONG_N * LONG_N).fill(1);
  return { a: { data, shape: [LONG_N, LONG_N] }, b: { data, shape: [LONG_N, LONG_N] } };
}

/**
 * `times` times: start a long run, abort it after `waitMs`, then run the fixture run `check`
 * on the fresh instance and compare its outputs with the expected ones.
 * @returns {Promise<{cancelled: boolean, message: string, latencyMs: number, recoveryMs: number,
 *   mismatches: string[]}[]>} per cancel: whether the run was rejected as cancelled, with
 *   what message, the time from abort() to the rejection and to the next run's result
 */
export async function cancelRepeatedly(model, check, { times = 10, waitMs = 150 } = {}) {
  const feeds = longFeeds();
  const report = [];
  for (let i = 0; i < times; i++) {
    const controller = new AbortController();
    const pending = model.run(feeds, { signal: controller.signal });
    await new Promise((resolve) => setTimeout(resolve, waitMs));
    const aborted = performance.now();
    controller.abort();
    const entry = {};
    try {
      await pending;
      Object.assign(entry, { cancelled: false, message: 'the run finished' });
    } catch (e) {
      entry.latencyMs = performance.now() - aborted;
      Object.assign(entry, { cancelled: e instanceof ModelError && e.status === STATUS.CANCELLED, message: e.message });
    }
    entry.mismatches = mismatches(await model.run(feedsOf(check.inputs)), check.expected);
    entry.recoveryMs = performance.now() - aborted;
    report.push(entry);
  }
  return report;
}

export function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}
