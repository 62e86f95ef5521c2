/** tether-admin: the only file of the command line with side effects. */
import { runAdmin } from './admin-cli.js';

runAdmin(process.argv.slice(2), {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  env: process.env,
}).then(
  (status) => {
    process.exitCode = status;
  },
  (err: unknown) => {
    process.stderr.write(`tether-admin: ${String(err)}\n`);
    process.exitCode = 1;
  },
);
