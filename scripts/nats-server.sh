#!/usr/bin/env bash
# Finds the nats-server Tether runs on, fetching a current one when it is
# missing, and prints its path. Tether needs 2.11 or later (issue 24: a
# 2.9.10 cluster lost acknowledged events, docs/reliability.md finding 5), so
# nothing older is ever printed: without one, this says what it found and how
# to get one, and exits 1. Never touches the system's apt sources or its
# nats-server.
#
#   scripts/nats-server.sh current   path of the newest server >= 2.11 it can get
#   scripts/nats-server.sh report    the same, with its version (stderr)
#
# In order: NATS_SERVER_BIN (refused if older than 2.11), the newest binary
# cached in .tether/nats-server/<version>/, a system nats-server if it is
# already 2.11+, else Debian unstable's `nats-server` package (a static Go
# binary that runs on Debian 12), fetched with `apt-get download` against a
# temporary sources list derived from the system's own first entry and
# unpacked with `dpkg-deb -x` into .tether/nats-server/<version>/. Unstable
# moves, so the version is read from the binary, never assumed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="$root/.tether/nats-server"
mode="${1:-report}"
MIN=2.11.0
MIN_SHOWN=2.11

say() { echo "[nats-server] $*" >&2; }
# Empty when the binary is missing or prints no version.
version_of() { { "$1" --version 2>/dev/null || true; } | sed -nE 's/.*v([0-9]+\.[0-9]+\.[0-9]+).*/\1/p'; }
# Whether version $1 is at least $MIN (an empty version is not).
recent() { [ -n "$1" ] && [ "$(printf '%s\n%s\n' "$1" "$MIN" | sort -V | head -n 1)" = "$MIN" ]; }
how_to_get() {
  say "  get one: rerun this where Debian's package archive is reachable (it fetches unstable's package into .tether/nats-server/),"
  say "  or download a release from https://github.com/nats-io/nats-server/releases and set NATS_SERVER_BIN=/path/to/nats-server"
}

system_bin() {
  local dir
  for dir in $(tr ':' ' ' <<<"${PATH:-}") /usr/sbin /usr/local/sbin /usr/local/bin; do
    case "$dir" in "$cache"*) continue ;; esac
    if [ -x "$dir/nats-server" ]; then echo "$dir/nats-server"; return 0; fi
  done
  return 1
}

# The newest cached binary, by version (sort -V).
cached_bin() {
  local newest
  newest=$(ls -1 "$cache" 2>/dev/null | grep -E '^[0-9]+\.[0-9]+\.[0-9]+$' | sort -V | tail -n 1 || true)
  [ -n "$newest" ] && [ -x "$cache/$newest/nats-server" ] && echo "$cache/$newest/nats-server"
}

fetch_current() {
  command -v apt-get >/dev/null 2>&1 && command -v dpkg-deb >/dev/null 2>&1 || { say "apt-get/dpkg-deb missing: cannot fetch a current server"; return 1; }
  local src=/etc/apt/sources.list.d/debian.sources work="$cache/apt"
  [ -r "$src" ] || { say "$src missing: cannot derive a sid sources list"; return 1; }
  rm -rf "$work"
  mkdir -p "$work/lists/partial" "$work/archives/partial"
  # The system's own first entry with the suite changed: no host written here.
  awk 'BEGIN{RS="";ORS="\n\n"} NR==1' "$src" | sed 's/^Suites:.*/Suites: sid/' >"$work/sid.sources"
  local o=(-o "Dir::Etc::sourcelist=$work/sid.sources" -o Dir::Etc::sourceparts=- -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work" -o Debug::NoLocking=1)
  say "fetching Debian unstable's nats-server package (apt-get download, private sources list)"
  apt-get "${o[@]}" update -qq >&2 || { say "apt-get update against sid failed"; return 1; }
  (cd "$work" && apt-get "${o[@]}" download nats-server >&2 2>/dev/null) || { say "apt-get download nats-server failed"; return 1; }
  local deb
  deb=$(ls -1 "$work"/nats-server_*.deb | head -n 1)
  dpkg-deb -x "$deb" "$work/x"
  local bin="$work/x/usr/sbin/nats-server" version
  version=$(version_of "$bin")
  [ -n "$version" ] || { say "the fetched binary does not run"; return 1; }
  rm -rf "${cache:?}/$version"
  mkdir -p "$cache/$version"
  cp "$bin" "$cache/$version/nats-server"
  rm -rf "$work"
  say "fetched nats-server $version into .tether/nats-server/$version/"
}

current() {
  if [ -n "${NATS_SERVER_BIN:-}" ]; then
    local v
    v=$(version_of "$NATS_SERVER_BIN")
    if recent "$v"; then echo "$NATS_SERVER_BIN"; return 0; fi
    say "NATS_SERVER_BIN=$NATS_SERVER_BIN is $([ -n "$v" ] && echo "nats-server $v" || echo "no nats-server that reports a version"): Tether needs $MIN_SHOWN or later"
    say "  unset NATS_SERVER_BIN to have this script find or fetch a current one, or point it at one"
    how_to_get
    return 1
  fi
  local bin sys
  bin=$(cached_bin || true)
  recent "$(version_of "${bin:-/nonexistent}")" && { echo "$bin"; return 0; }
  sys=$(system_bin || true)
  if [ -n "$sys" ] && recent "$(version_of "$sys")"; then echo "$sys"; return 0; fi
  # One fetch at a time: test workers that start together share the result.
  mkdir -p "$cache"
  exec 9>"$cache/.lock"
  flock 9
  bin=$(cached_bin || true)
  if ! recent "$(version_of "${bin:-/nonexistent}")"; then
    fetch_current || true
    bin=$(cached_bin || true)
  fi
  exec 9>&-
  if recent "$(version_of "${bin:-/nonexistent}")"; then echo "$bin"; return 0; fi
  say "no nats-server $MIN_SHOWN or later could be found or fetched${bin:+ (the newest cached, $bin, is $(version_of "$bin"))}"
  [ -n "$sys" ] && say "  the system's $sys is $(version_of "$sys"), too old: Tether never runs on it"
  how_to_get
  return 1
}

case "$mode" in
  current) current ;;
  report) c=$(current) && say "current: $(version_of "$c") at $c" ;;
  *) say "usage: scripts/nats-server.sh current|report"; exit 2 ;;
esac
