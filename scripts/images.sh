#!/usr/bin/env bash
# `npm run images [-- NAME...]`: builds deploy/docker's images with buildah and
# starts each one's entry point against a real nats-server, where no Docker
# engine runs and no registry image can be pulled. Root only.
#
#   1. Bases: scripts/image-base.sh makes (or reuses) the local stand-ins for
#      distroless Node 24 and node:24-bookworm-slim from Debian's archive and
#      the npm registry, cached in buildah's store and .tether/images/.
#   2. Builds every image, one at a time, with `buildah bud --isolation chroot
#      --format docker` (docker format keeps HEALTHCHECK) and the bases as
#      --build-arg BASE / BUILD_BASE, the Dockerfiles unchanged otherwise.
#      npm's cache is a volume of the builds (.tether/images/npm-cache), so
#      the registry is asked once and no layer holds it. Then looks inside each: no shell, no npm, no npm cache, no compiler,
#      none of the repository's dev tools in /app/node_modules. Prints sizes.
#   3. Starts each image, one at a time, in a network namespace of its own
#      run (`unshare -n`: loopback only) beside a current nats-server
#      (scripts/nats-server.sh current, temp store) on 127.0.0.1:4222: the
#      image's ENTRYPOINT, ENV, WORKDIR and USER exactly as built (`buildah
#      run --isolation chroot`), so it listens on its own default port
#      (8080, 50051, 8090, 3000, 3001) without meeting anything else on the
#      machine, and its HEALTHCHECK command runs verbatim. Checks: health
#      from outside (GET /healthz, or grpc.health.v1.Health/Check for the
#      session-log service), the image's own HEALTHCHECK inside it, the
#      process's uid (65532), then SIGTERM to the process (what `docker
#      stop` sends) and a clean exit 0.
#   4. Removes its containers and stops what it started, whatever happened.
# Exits 1 naming every image and step that failed. Build logs and each run's
# output are kept in .tether/images/logs/.
#
#   NAME...                 only these images (default: all; always started in
#                           the order below, and inspect brings session-log: it
#                           needs a log on NATS that another image has made)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
self="$root/scripts/images.sh"
cd "$root"
cache="$root/.tether/images"
logs="$cache/logs"
ALL=(gateway session-log inspect sdk-example demo-upstream)
# Dev tools of the repository that must never reach an image's /app/node_modules.
DEV_TOOLS=(typescript vitest vite tsx esbuild fast-check @bufbuild/buf redis playwright-core @modelcontextprotocol/conformance @modelcontextprotocol/server-everything)
READY_S=60   # from start to healthy
STOP_S=20    # from SIGTERM to exit (the gateway drains within 10 s)

b() { buildah --storage-driver vfs "$@"; }
say() { echo "[images] $*" >&2; }
image_of() { echo "localhost/tether-$1:local"; }
# The image's config (OCI and Docker views merged), as JSON.
config_of() { b inspect --type image "$1" | "$NODE" -e 'const d = JSON.parse(require("fs").readFileSync(0, "utf8")); process.stdout.write(JSON.stringify({ ...d.OCIv1.config, Healthcheck: d.Docker.config?.Healthcheck }))'; }
# field JSON EXPR: one value of the config, arrays one element a line.
field() { "$NODE" -e 'const c = JSON.parse(process.argv[1]); const v = new Function("c", `return ${process.argv[2]}`)(c); if (v !== undefined && v !== null) process.stdout.write(Array.isArray(v) ? v.join("\n") + "\n" : `${v}\n`)' "$1" "$2"; }

# ---------------------------------------------------------------------------
# Inside the network namespace: start and check one image after another.
# ---------------------------------------------------------------------------
# What this process started, for its EXIT trap: buildah run process groups, containers, nats-server.
started=()
ctrs=()
nats_pid=""
stop_all() {
  local pid c
  for pid in "${started[@]}"; do kill -KILL -- "-$pid" 2>/dev/null || true; done
  for c in "${ctrs[@]}"; do b rm "$c" >/dev/null 2>&1 || true; done
  if [ -n "$nats_pid" ]; then
    kill "$nats_pid" 2>/dev/null || true
    wait "$nats_pid" 2>/dev/null || true
  fi
}

run_in_netns() {
  local work=$1
  shift
  local failed=() name
  trap stop_all EXIT
  # Bash runs no EXIT trap when a signal kills it: exit instead, so stop_all runs.
  trap 'exit 130' INT
  trap 'exit 143' TERM
  ip link set lo up
  "$NATS_BIN" -js -a 127.0.0.1 -p 4222 -sd "$work/nats" >"$logs/nats-server.log" 2>&1 &
  nats_pid=$!
  local i
  for i in $(seq 1 100); do (exec 3<>/dev/tcp/127.0.0.1/4222) 2>/dev/null && break; sleep 0.1; done
  (exec 3<>/dev/tcp/127.0.0.1/4222) 2>/dev/null || { say "nats-server did not start: $(tail -n 5 "$logs/nats-server.log")"; return 1; }
  say "nats-server $("$NATS_BIN" --version | sed -nE 's/.*v([0-9][^ ]*).*/\1/p') on 127.0.0.1:4222 (JetStream, temp store), loopback-only network namespace"
  for name in "$@"; do
    run_one "$name" || failed+=("$name")
  done
  [ ${#failed[@]} -eq 0 ] || { echo "${failed[*]}" >"$work/run-failed"; return 1; }
}

# The newest descendant of PID: the image's process under buildah run's chroot helpers.
leaf_of() {
  local pid=$1 child
  while child=$(pgrep -P "$pid" | tail -n 1) && [ -n "$child" ]; do pid=$child; done
  echo "$pid"
}

run_one() {
  local name=$1 image ctr conf port kind health_url entry hc run_env=() secret
  image=$(image_of "$name")
  ctr="tether-images-$name-$$"
  conf=$(config_of "$image")
  mapfile -t entry < <(field "$conf" 'c.Entrypoint')
  mapfile -t hc < <(field "$conf" 'c.Healthcheck?.Test?.[0] === "CMD" ? c.Healthcheck.Test.slice(1) : undefined')
  port=$(field "$conf" 'Object.keys(c.ExposedPorts ?? {})[0]?.split("/")[0]')
  [ ${#entry[@]} -gt 0 ] && [ -n "$port" ] || { say "FAIL $name: the image has no ENTRYPOINT or EXPOSE"; return 1; }
  secret=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
  kind=http
  case "$name" in
    # What it needs to start, and nothing more: everything else is the image's own defaults.
    gateway) run_env=(--env TETHER_UPSTREAMS=http://127.0.0.1:3001/mcp) ;;
    session-log) kind=grpc; run_env=(--env "TETHER_GRPC_TOKENS=images:$secret") ;;
    inspect) run_env=(--env "TETHER_INSPECT_TOKEN=$secret") ;;
  esac
  b rm "$ctr" >/dev/null 2>&1 || true
  ctrs+=("$ctr")
  b from --pull-never --name "$ctr" "$image" >/dev/null
  local log="$logs/$name.run.log" t0=$SECONDS pid ok=0 why="" outside
  # Its own process group (setsid), so the cleanup reaches buildah's chroot helpers too.
  setsid buildah --storage-driver vfs run --isolation chroot "${run_env[@]}" "$ctr" -- "${entry[@]}" >"$log" 2>&1 &
  pid=$!
  started+=("$pid")
  if [ "$kind" = grpc ]; then outside=(grpc "127.0.0.1:$port"); else outside=(http "http://127.0.0.1:$port/healthz"); fi
  local deadline=$((SECONDS + READY_S))
  while [ $SECONDS -lt $deadline ]; do
    kill -0 "$pid" 2>/dev/null || { why="exited before it was healthy"; break; }
    if "$NODE" deploy/docker/healthcheck.mjs "${outside[@]}" 2>/dev/null; then ok=1; break; fi
    sleep 0.5
  done
  [ $ok = 1 ] || why=${why:-"not healthy within ${READY_S}s ($("$NODE" deploy/docker/healthcheck.mjs "${outside[@]}" 2>&1 || true))"}
  local ready_s=$((SECONDS - t0)) inside="" uid=""
  if [ $ok = 1 ] && [ ${#hc[@]} -gt 0 ]; then
    # The image's own HEALTHCHECK, run inside it (a second process in the same container).
    ok=0
    for i in 1 2 3 4 5 6 7 8 9 10; do
      if inside=$(b run --isolation chroot "$ctr" -- "${hc[@]}" 2>&1); then ok=1; break; fi
      sleep 1
    done
    [ $ok = 1 ] || why="its HEALTHCHECK (${hc[*]}) failed inside the image: $inside"
  fi
  if [ $ok = 1 ]; then
    local leaf
    leaf=$(leaf_of "$pid")
    uid=$(awk '/^Uid:/ { print $2 }' "/proc/$leaf/status" 2>/dev/null || true)
    [ "$uid" = 65532 ] || { ok=0; why="runs as uid ${uid:-?}, not 65532"; }
    # SIGTERM to the process itself: buildah run would SIGKILL it on its own TERM.
    kill -TERM "$leaf" 2>/dev/null || true
    local stop_deadline=$((SECONDS + STOP_S)) t1=$SECONDS rc
    while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $stop_deadline ]; do sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then
      [ $ok = 0 ] || { ok=0; why="still running ${STOP_S}s after SIGTERM"; }
    else
      rc=0
      wait "$pid" || rc=$?
      [ $ok = 0 ] || [ "$rc" = 0 ] || { ok=0; why="exited $rc on SIGTERM"; }
      [ $ok = 0 ] || say "ok   $name: healthy in ${ready_s}s (${outside[0]} check from outside, HEALTHCHECK inside), uid $uid, exit 0 $((SECONDS - t1))s after SIGTERM"
    fi
  fi
  kill -KILL -- "-$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  b rm "$ctr" >/dev/null 2>&1 || true
  if [ $ok = 0 ]; then
    say "FAIL $name: $why; last lines of its output ($log):"
    tail -n 15 "$log" | cut -c1-300 >&2
    return 1
  fi
}

if [ "${1:-}" = "--in-netns" ]; then
  shift
  run_in_netns "$@"
  exit $?
fi

# ---------------------------------------------------------------------------
# Outside: check the tools, make the bases, build, look inside, then run.
# ---------------------------------------------------------------------------
asked=("$@")
[ ${#asked[@]} -gt 0 ] || asked=("${ALL[@]}")
for name in "${asked[@]}"; do
  [[ " ${ALL[*]} " == *" $name "* ]] || { say "no image $name; images: ${ALL[*]}"; exit 2; }
done
# The inspector refuses to start on a NATS without Tether's log, which the
# others make when they start: with none of them asked for, session-log runs first.
if [[ " ${asked[*]} " == *" inspect "* ]] && ! [[ " ${asked[*]} " =~ \ (gateway|session-log|sdk-example)\  ]]; then
  say "inspect reads a log another image makes: adding session-log, started before it"
  asked+=(session-log)
fi
# Always in ALL's order: the log makers before the inspector.
names=()
for name in "${ALL[@]}"; do [[ " ${asked[*]} " == *" $name "* ]] && names+=("$name"); done
[ "$(id -u)" = 0 ] || { say "ERROR: run as root (buildah's vfs store, chroot, debootstrap, unshare)"; exit 1; }
missing=()
for tool in buildah debootstrap unshare ip setsid pgrep; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
[ ${#missing[@]} -eq 0 ] || { say "ERROR: missing ${missing[*]}: apt-get install -y buildah debootstrap (util-linux, iproute2, procps for the rest)"; exit 1; }

mkdir -p "$cache" "$logs" "$cache/npm-cache"
# One run at a time on this machine's store: the vfs driver copies whole layers, and two builds would fight for disk and network.
exec 8>"$cache/.lock"
flock -n 8 || { say "another npm run images holds $cache/.lock: waiting for it"; flock 8; }
work=$(mktemp -d "$cache/run.XXXXXX")
inner=none
bud_pid=""
cleanup() {
  local c
  # Interrupted: the build under way, and the starts (their own trap stops their processes).
  [ -z "$bud_pid" ] || kill -TERM "$bud_pid" 2>/dev/null || true
  if [ "$inner" != none ] && kill -0 "$inner" 2>/dev/null; then
    kill -TERM "$inner" 2>/dev/null || true
    wait "$inner" 2>/dev/null || true
  fi
  for c in $(b containers --format '{{.ContainerName}}' 2>/dev/null | grep -E "^tether-images-.*-[0-9]+$" || true); do
    case "$c" in *-"$$" | *-"$inner") b rm "$c" >/dev/null 2>&1 || true ;; esac
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

NODE=$(bash scripts/node.sh 24)
NATS_BIN=$(bash scripts/nats-server.sh current) || { say "ERROR: no current nats-server (scripts/nats-server.sh says why above)"; exit 1; }
export NODE NATS_BIN
failures=()
start=$SECONDS

echo "=== bases (scripts/image-base.sh)"
t=$SECONDS
bases=$(bash scripts/image-base.sh) || { say "ERROR: the base images could not be made (above)"; exit 1; }
BASE=$(sed -n 's/^BASE=//p' <<<"$bases")
BUILD_BASE=$(sed -n 's/^BUILD_BASE=//p' <<<"$bases")
echo "bases: $BASE, $BUILD_BASE ($((SECONDS - t))s)"

echo "=== build: buildah bud --isolation chroot --format docker --build-arg BASE=$BASE --build-arg BUILD_BASE=$BUILD_BASE"
built=()
for name in "${names[@]}"; do
  image=$(image_of "$name")
  t=$SECONDS
  old=$(b images --quiet --no-trunc "$image" 2>/dev/null || true)
  # npm's cache as a volume of the build, never a layer: the five builds fetch each tarball once, and no image holds it.
  b bud --isolation chroot --format docker --pull=never --volume "$cache/npm-cache:/root/.npm" \
    --build-arg "BASE=$BASE" --build-arg "BUILD_BASE=$BUILD_BASE" \
    -f "deploy/docker/$name.Dockerfile" --ignorefile "deploy/docker/$name.Dockerfile.dockerignore" \
    -t "$image" . >"$logs/$name.build.log" 2>&1 &
  bud_pid=$!
  rc=0
  wait "$bud_pid" || rc=$?
  bud_pid=""
  if [ "$rc" = 0 ]; then
    # The image this build replaced, now untagged: its space back.
    new=$(b images --quiet --no-trunc "$image")
    [ -z "$old" ] || [ "$old" = "$new" ] || b rmi "$old" >/dev/null 2>&1 || true
    echo "built $image in $((SECONDS - t))s"
    built+=("$name")
  else
    say "FAIL $name: buildah bud failed after $((SECONDS - t))s; last lines of $logs/$name.build.log:"
    tail -n 25 "$logs/$name.build.log" >&2
    failures+=("$name (build)")
  fi
done

echo "=== inside the images"
runnable=()
for name in "${built[@]}"; do
  image=$(image_of "$name")
  ctr="tether-images-$name-$$"
  b rm "$ctr" >/dev/null 2>&1 || true
  b from --pull-never --name "$ctr" "$image" >/dev/null
  mnt=$(b mount "$ctr")
  bad=()
  for p in bin/sh usr/bin/sh bin/bash usr/local/bin/npm usr/local/lib/node_modules/npm usr/bin/apt-get usr/bin/dpkg usr/bin/gcc usr/bin/cc usr/bin/make root/.npm home/nonroot/.npm app/.npm; do
    [ -e "$mnt/$p" ] || [ -L "$mnt/$p" ] && bad+=("/$p")
  done
  for tool in "${DEV_TOOLS[@]}"; do [ -e "$mnt/app/node_modules/$tool" ] && bad+=("/app/node_modules/$tool"); done
  app_size=$(du -sh --apparent-size "$mnt/app" | cut -f1)
  modules_size=$(du -sh --apparent-size "$mnt/app/node_modules" 2>/dev/null | cut -f1)
  b umount "$ctr" >/dev/null
  b rm "$ctr" >/dev/null
  size=$(b images --format '{{.Size}}' "$image" | head -n 1)
  if [ ${#bad[@]} -gt 0 ]; then
    say "FAIL $name: the image holds what it must not: ${bad[*]}"
    failures+=("$name (contents)")
  else
    runnable+=("$name")
  fi
  printf '%-38s %8s   /app %s (node_modules %s)\n' "$image" "$size" "$app_size" "${modules_size:-0}"
done
printf '%-38s %8s   (the runtime base all of them share)\n' "$BASE" "$(b images --format '{{.Size}}' "$BASE" | head -n 1)"

if [ ${#runnable[@]} -gt 0 ]; then
  echo "=== start: buildah run --isolation chroot <image's ENTRYPOINT>, one at a time"
  # The child's pid names its containers, so an interrupted run's are found and removed too.
  unshare -n bash "$self" --in-netns "$work" "${runnable[@]}" &
  inner=$!
  rc=0
  wait "$inner" || rc=$?
  if [ -f "$work/run-failed" ]; then
    for name in $(cat "$work/run-failed"); do failures+=("$name (run)"); done
  elif [ "$rc" != 0 ]; then
    failures+=("start (exit $rc before any image ran; see above)")
  fi
fi

echo "=== $((SECONDS - start))s"
if [ ${#failures[@]} -gt 0 ]; then
  echo "FAILED: ${failures[*]} (logs in .tether/images/logs/)"
  exit 1
fi
echo "images ok: ${names[*]}"
