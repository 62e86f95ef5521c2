#!/usr/bin/env node
// Committed shim so the command stays executable: tsc does not keep file modes,
// and npm links bins at install time, before the first build.
import '../dist/bin.js';
