#!/usr/bin/env node
// The `tether-probe` command: the package's only module with side effects.
import { main } from './cli.js';

process.exitCode = await main(process.argv.slice(2), {
  out: (s) => void process.stdout.write(s),
  err: (s) => void process.stderr.write(s),
});
