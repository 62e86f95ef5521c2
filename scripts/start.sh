#!/usr/bin/env bash
# `npm start`: runs scripts/start.ts on Node 24, the runtime Tether is built
# for, whatever the machine's own `node` is (scripts/tsx.sh: scripts/node.sh
# 24 finds it or installs it from the npm registry into .tether/node24/ in
# seconds; with none to be had, a Node >= 22 on PATH runs it with a warning,
# older ones are refused, saying how to get Node 24). exec all the way down:
# the Node process keeps this script's pid, so Ctrl-C and a signal to the
# process group reach the stack directly. Every process the stack starts
# (the gateways, the session-log service) runs on the same binary.
set -euo pipefail
cd "$(dirname "$0")/.."
exec bash scripts/tsx.sh scripts/start.ts "$@"
