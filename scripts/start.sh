#!/usr/bin/env bash
# `npm start`: runs scripts/start.ts on Node 24, the runtime Tether is built
# for, whatever the machine's own `node` is: scripts/node.sh 24 finds it or
# installs it from the npm registry into .tether/node24/ (seconds), then this
# script becomes that Node (exec: same pid, so Ctrl-C and a signal to the
# process group reach the stack directly). Every process the stack starts
# (the gateways, the session-log service) runs on the same binary.
#
# When no Node 24 can be had (not Linux x64 and none on PATH or in
# TETHER_NODE24), a Node >= 22 on PATH runs it with a warning; older ones
# are refused, saying how to get Node 24.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! node=$(bash scripts/node.sh 24); then
  here=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
  if [ "$here" -lt 22 ]; then
    echo "[tether] failed to start: no Node 24 (scripts/node.sh said why above) and this node is $(node --version 2>/dev/null || echo missing); set TETHER_NODE24=/path/to/node" >&2
    exit 1
  fi
  echo "[tether] WARNING: no Node 24 (scripts/node.sh said why above): running on this node, $(node --version)" >&2
  node=$(command -v node)
fi
# tsx as a loader of this Node, not its CLI: the CLI would start a second process.
exec "$node" --import tsx scripts/start.ts "$@"
