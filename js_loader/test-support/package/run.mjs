// The Node side of test/package.test.js, run in the fresh project the packed package was
// installed into: node run.mjs FIXTURES_DIR HELPERS_URL (test-support/fixtures.js). Prints
// where 'symwasm' resolved and exercise()'s report, as JSON.
import { readFile } from 'node:fs/promises';
import path from 'node:path';

import { exercise } from './exercise.js';

const [dir, helpers] = process.argv.slice(2);
const fixtures = JSON.parse(await readFile(path.join(dir, 'fixtures.json'), 'utf8'));
const report = await exercise(fixtures, (file) => path.join(dir, file), await import(helpers));
console.log(JSON.stringify({ resolved: import.meta.resolve('symwasm'), ...report }));
