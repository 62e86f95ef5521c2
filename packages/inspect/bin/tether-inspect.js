#!/usr/bin/env node
// Committed shim so `npx tether-inspect` links on install, before `tsc -b` has built dist/.
import('../dist/inspect-main.js').catch((err) => {
  if (err && err.code === 'ERR_MODULE_NOT_FOUND' && String(err.message).includes('dist/inspect-main.js')) {
    process.stderr.write('tether-inspect: not built yet; run `npm run build` (tsc -b) first\n');
    process.exit(1);
  }
  throw err;
});
