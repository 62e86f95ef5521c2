import fc from 'fast-check';
import { storeProgram } from './sdk-arbitraries.js';
import { startSdkStack } from './sdk-stack.js';
import { runStoreCase } from './sdk-store-model.js';
const path = process.env['P']!;
const stack = await startSdkStack();
let printed = false;
try {
  await fc.assert(fc.asyncProperty(storeProgram, async (program) => {
    if (!printed) { console.log(JSON.stringify(program, null, 0)); printed = true; }
    const { problems } = await runStoreCase(stack, program, { afterBad: async () => {}, answerMs: 5000 });
    if (problems.length > 0) { console.log(problems.join('\n')); throw new Error('fail'); }
  }), { seed: 20261201, path, numRuns: 1, endOnFailure: true });
  console.log('PASSED');
} catch (e) { console.log('FAILED', (e as Error).message.slice(0, 200)); }
await stack.stop();
process.exit(0);
