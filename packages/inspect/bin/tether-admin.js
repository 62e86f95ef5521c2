#!/usr/bin/env node
// Committed shim so `npx tether-admin` links on install, before `tsc -b` has built dist/.
import('../dist/admin-main.js').catch((err) => {
  if (err && err.code === 'ERR_MODULE_NOT_FOUND' && String(err.message).includes('dist/admin-main.js')) {
    process.stderr.write('tether-admin: not built yet; run `npm run build` (tsc -b) first\n');
    process.exit(1);
  }
  throw err;
});
