#!/usr/bin/env bash
# scripts/tsx.sh FILE [ARGS...]: runs a TypeScript entry point (the chaos
# run, the benchmarks) on Node 24, the runtime of `npm start` and of the
# main test run, whatever the machine's own `node` is. scripts/node.sh 24
# finds it or installs it into .tether/node24/ (seconds). Everything the
# entry point spawns with process.execPath (gateways, session-log services,
# SDK servers, upstreams, the chaos clients' host) runs on the same binary,
# so figures and chaos results are Node 24's. `npm start` goes through it
# too (scripts/start.sh). With no Node 24 to be had, a Node >= 22 on PATH
# runs it with a warning; older ones are refused.
set -euo pipefail
here_dir=$(cd "$(dirname "$0")" && pwd)
if ! node=$(bash "$here_dir/node.sh" 24); then
  here=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
  if [ "$here" -lt 22 ]; then
    echo "[tether] failed to start: no Node 24 (scripts/node.sh said why above) and this node is $(node --version 2>/dev/null || echo missing); set TETHER_NODE24=/path/to/node" >&2
    exit 1
  fi
  echo "[tether] WARNING: no Node 24 (scripts/node.sh said why above): running on this node, $(node --version)" >&2
  node=$(command -v node)
fi
# tsx as a loader of this Node, not its CLI: the CLI would start a second process.
exec "$node" --import tsx "$@"
