#!/usr/bin/env node
// Committed shim so `npx tether-gateway` links on install, before `tsc -b` has built dist/.
import('../dist/main.js').catch((err) => {
  if (err && err.code === 'ERR_MODULE_NOT_FOUND') {
    process.stderr.write('tether-gateway: not built yet; run `npm run build` (tsc -b) first\n');
    process.exit(1);
  }
  throw err;
});
