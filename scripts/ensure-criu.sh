#!/usr/bin/env bash
# CRIU for the snapshot tests (docs/cold-start.md, "Snapshots"). Debian bookworm's criu (3.17) fails `criu check`
# on current kernels ("vdso: Unexpected rt vDSO area bounds", fixed in CRIU 4.1), and no newer build installs on
# bookworm (trixie's links a newer libc). So when the installed criu cannot checkpoint here, this builds the
# `criu` binary from Debian's own source of trixie's package (checked against the sha256 its Sources index gives)
# with bookworm's build dependencies, into /usr/local/sbin. Failing is not fatal: the snapshot tests then skip,
# naming why, and svc falls back to fresh workers as it does on any host without CRIU.
set -uo pipefail

VERSION=4.1.1
TARBALL="criu_${VERSION}.orig.tar.xz"
SHA256=f80a66cb3726bb2116266d4759ce3bcbfab7abdb6b6d430bf20dd41911717afe
URL="http://deb.debian.org/debian/pool/main/c/criu/${TARBALL}"
LOG=/tmp/svc-criu-build.log

if criu check >/dev/null 2>&1; then
  echo "ensure-criu: $(criu --version | head -n 1) checks out"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "ensure-criu: not root, leaving CRIU as it is (the snapshot tests will skip)"
  exit 0
fi

echo "ensure-criu: building CRIU ${VERSION} from Debian's source (log: ${LOG})..."
export DEBIAN_FRONTEND=noninteractive
DEPS="build-essential pkg-config libbsd-dev libcap-dev libgnutls28-dev libnet1-dev libnftables-dev libnl-3-dev
  libprotobuf-c-dev libprotobuf-dev protobuf-c-compiler protobuf-compiler uuid-dev python3-protobuf curl xz-utils"
# shellcheck disable=SC2086
(apt-get install -y -qq $DEPS >"$LOG" 2>&1 || { apt-get update -qq && apt-get install -y -qq $DEPS >>"$LOG" 2>&1; }) || {
  tail -n 20 "$LOG"
  echo "ensure-criu: could not install CRIU's build dependencies; the snapshot tests will skip"
  exit 0
}

work=$(mktemp -d /tmp/svc-criu-XXXXXX)
trap 'rm -rf "$work"' EXIT
if ! curl -fsSL --retry 3 -o "$work/$TARBALL" "$URL" >>"$LOG" 2>&1; then
  echo "ensure-criu: could not download ${URL}; the snapshot tests will skip"
  exit 0
fi
if ! echo "${SHA256}  $work/$TARBALL" | sha256sum -c --quiet - >>"$LOG" 2>&1; then
  echo "ensure-criu: ${TARBALL} does not match its sha256; the snapshot tests will skip"
  exit 0
fi
tar -xJf "$work/$TARBALL" -C "$work"
src=$(find "$work" -maxdepth 1 -mindepth 1 -type d | head -n 1)
if ! make -C "$src" -j"$(nproc)" criu >>"$LOG" 2>&1; then
  tail -n 20 "$LOG"
  echo "ensure-criu: the build failed; the snapshot tests will skip"
  exit 0
fi
install -m 0755 "$src/criu/criu" /usr/local/sbin/criu
hash -r
if criu check >>"$LOG" 2>&1; then
  echo "ensure-criu: $(criu --version | head -n 1) built and checks out"
else
  tail -n 5 "$LOG"
  echo "ensure-criu: CRIU ${VERSION} built but \`criu check\` fails on this kernel; the snapshot tests will skip"
fi
exit 0
