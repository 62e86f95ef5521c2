#!/usr/bin/env bash
# Finds the nats-server binaries Tether runs on, fetching the current one when
# it is missing, and prints what it found. Never touches the system's apt
# sources or its nats-server.
#
#   scripts/nats-server.sh current   path of the newest server it can get
#   scripts/nats-server.sh floor     path of the 2.9 floor (the system's, Debian 12)
#   scripts/nats-server.sh report    both, with their versions (stderr)
#
# The current server is Debian unstable's `nats-server` package (a static Go
# binary that runs on Debian 12), fetched with `apt-get download` against a
# temporary sources list derived from the system's own first entry, unpacked
# with `dpkg-deb -x` into .tether/nats-server/<version>/. Unstable moves, so
# the version is read from the binary, never assumed. With NATS_SERVER_BIN set,
# `current` is that binary. When nothing newer can be had, `current` falls back
# to the system's server and says so loudly on stderr (exit status 0), so a
# caller decides whether that is acceptable (CI: it is not; TETHER_REQUIRE_CURRENT=1).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="$root/.tether/nats-server"
mode="${1:-report}"

say() { echo "[nats-server] $*" >&2; }
version_of() { "$1" --version 2>/dev/null | sed -nE 's/.*v([0-9]+\.[0-9]+\.[0-9]+).*/\1/p'; }

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
  if [ -n "${NATS_SERVER_BIN:-}" ]; then echo "$NATS_SERVER_BIN"; return 0; fi
  local bin sys
  bin=$(cached_bin || true)
  sys=$(system_bin || true)
  # Fetch when nothing newer than 2.10 is cached (the system's is 2.9 on Debian 12).
  if [ -z "$bin" ]; then
    if [ -n "$sys" ] && [ "$(printf '%s\n2.11.0\n' "$(version_of "$sys")" | sort -V | head -n 1)" = "2.11.0" ]; then
      echo "$sys"; return 0
    fi
    fetch_current || true
    bin=$(cached_bin || true)
  fi
  if [ -n "$bin" ]; then echo "$bin"; return 0; fi
  if [ -n "$sys" ]; then
    say "WARNING: no current nats-server could be fetched; using the system's $(version_of "$sys") at $sys"
    if [ "${TETHER_REQUIRE_CURRENT:-}" = "1" ]; then return 1; fi
    echo "$sys"; return 0
  fi
  say "no nats-server at all: install Debian's (apt-get install -y nats-server) or set NATS_SERVER_BIN"
  return 1
}

floor() {
  if [ -n "${TETHER_NATS_FLOOR_BIN:-}" ]; then echo "$TETHER_NATS_FLOOR_BIN"; return 0; fi
  local sys
  sys=$(system_bin || true)
  if [ -n "$sys" ]; then echo "$sys"; return 0; fi
  say "no floor nats-server: install Debian 12's (apt-get install -y nats-server, 2.9.10) or set TETHER_NATS_FLOOR_BIN"
  return 1
}

case "$mode" in
  current) current ;;
  floor) floor ;;
  report)
    c=$(current) && say "current: $(version_of "$c") at $c"
    f=$(floor) && say "floor:   $(version_of "$f") at $f"
    ;;
  *) say "usage: scripts/nats-server.sh current|floor|report"; exit 2 ;;
esac
