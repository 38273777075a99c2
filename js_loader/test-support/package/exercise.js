/**
 * What a fresh project does with the installed package, shared by its Node script (run.mjs)
 * and its page (index.html): import 'symwasm' by name (from node_modules, or through the
 * page's import map), load each fixture with loadModel and with createWorker, run it at
 * every binding the fixture has, and dispose it.
 */
import { createWorker, loadModel, ModelError, supportedVariants } from 'symwasm';

/**
 * @param {object} fixtures make_fixtures.py's index (fixtures.json)
 * @param {(file: string) => string | URL} locate a fixture file's path or URL
 * @param {{feedsOf: Function, mismatches: Function}} helpers test-support/fixtures.js
 * @returns {Promise<{supported: string[], models: Record<string, {variant: string, runs: number,
 *   problems: string[], afterDispose: object | string}>}>} per fixture and loader, the variant
 *   that ran, the runs' differences from onnx.reference and what a run after dispose() threw
 */
export async function exercise(fixtures, locate, { feedsOf, mismatches }) {
  const report = { supported: supportedVariants(), models: {} };
  for (const [name, fixture] of Object.entries(fixtures)) {
    for (const [how, load] of Object.entries({ loadModel, createWorker })) {
      const model = await load(locate(fixture.wasm));
      const problems = [];
      for (const run of fixture.runs) problems.push(...mismatches(await model.run(feedsOf(run.inputs)), run.expected));
      model.dispose();
      model.dispose();
      let afterDispose = 'it ran';
      try {
        await model.run(feedsOf(fixture.runs[0].inputs));
      } catch (e) {
        afterDispose = { isModelError: e instanceof ModelError, status: e.status, message: e.message };
      }
      report.models[`${name} ${how}`] = { variant: model.variant, runs: fixture.runs.length, problems, afterDispose };
    }
  }
  return report;
}
