#!/usr/bin/env bash
# Make sure a Docker engine answers on /var/run/docker.sock: install Debian's engine when dockerd is missing,
# start it in the background when no daemon answers, and wait (bounded) for it. Idempotent, and quiet when the
# engine already answers. Needs root (CI containers run as root). dockerd's output goes to $SVC_DOCKERD_LOG.
#
# Where gVisor's runsc is installed (SVC_INSTALL_RUNSC=1 installs Debian's), it is registered with dockerd as the
# runtime "runsc" (/etc/docker/daemon.json), so `svc server --docker-runtime runsc` can run workers under it; a
# running daemon reloads its runtimes on SIGHUP, without a restart.
#
#   scripts/ensure-docker.sh            # exit 0 when the engine answers, non-zero (with the reason) otherwise
set -euo pipefail

SOCKET=/var/run/docker.sock
PIDFILE=/var/run/docker.pid
LOG=${SVC_DOCKERD_LOG:-/tmp/svc-dockerd.log}
INSTALL_LOG=/tmp/svc-docker-install.log
WAIT_SECONDS=${SVC_DOCKERD_WAIT_SECONDS:-60}

say() { echo "ensure-docker: $*" >&2; }

# A dockerd that can still answer: alive and not a zombie. (pgrep is not on every slim image: read /proc.)
live_dockerd() {
  [ "$(cat "/proc/$1/comm" 2>/dev/null)" = dockerd ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}

dockerd_pid() {
  local dir pid
  for dir in /proc/[0-9]*; do
    pid=${dir#/proc/}
    if live_dockerd "$pid"; then
      echo "$pid"
      return 0
    fi
  done
  return 1
}

start_dockerd() {
  # dockerd refuses to start while its pid file names a process; no live daemon, so that file is stale.
  if [ -f "$PIDFILE" ] && ! live_dockerd "$(cat "$PIDFILE" 2>/dev/null || echo 0)"; then
    rm -f "$PIDFILE"
  fi
  say "starting dockerd (log: $LOG)..."
  # setsid: the daemon must outlive this script and the shell that called it.
  setsid nohup dockerd --host "unix://$SOCKET" >>"$LOG" 2>&1 </dev/null &
}

# `docker info` needs the client; fall back to a raw HTTP ping over the socket when only the daemon is there.
engine_answers() {
  [ -S "$SOCKET" ] || return 1
  if command -v docker >/dev/null 2>&1; then
    timeout 10 docker -H "unix://$SOCKET" version --format '{{.Server.Version}}' >/dev/null 2>&1
  else
    timeout 10 curl -fsS --unix-socket "$SOCKET" http://localhost/_ping >/dev/null 2>&1
  fi
}

DAEMON_JSON=/etc/docker/daemon.json

# Debian 12's runsc (0.0~20221219) decides it was started in the host's network namespace when
# /proc/sys/net/core/rmem_default exists, which on newer kernels it does in every namespace: it then refuses to start
# any container ("cannot run with network enabled in root network namespace"). Registered with --network=host it
# runs, with socket calls served by the host kernel inside the container's own network namespace (Docker's bridge,
# as under runc) instead of gVisor's network stack. gVisor releases from 2024 on read the namespace correctly.
runsc_args() {
  local version date
  version=$(runsc --version 2>/dev/null | head -n 1 || true)
  date=$(printf '%s' "$version" | grep -oE '(20[0-9]{6})' | head -n 1 || true)
  if [ -n "$date" ] && [ "$date" -lt 20240101 ] && command -v unshare >/dev/null 2>&1 \
    && unshare -n sh -c 'test -e /proc/sys/net/core/rmem_default' 2>/dev/null; then
    echo "--network=host"
  fi
}

# Register runsc with dockerd (idempotent: `runsc install` rewrites the same entry); true when daemon.json changed.
register_runsc() {
  local before after args
  [ "$(id -u)" = 0 ] || return 1
  if ! command -v runsc >/dev/null 2>&1; then
    [ "${SVC_INSTALL_RUNSC:-}" = 1 ] || return 1
    say "installing Debian's runsc (gVisor)..."
    if ! { DEBIAN_FRONTEND=noninteractive timeout 300 apt-get update -qq && DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq runsc; } >>"$INSTALL_LOG" 2>&1; then
      say "installing runsc failed; last lines of $INSTALL_LOG:"
      tail -n 20 "$INSTALL_LOG" >&2 || true
      return 1
    fi
  fi
  mkdir -p "$(dirname "$DAEMON_JSON")"
  before=$(cat "$DAEMON_JSON" 2>/dev/null || true)
  args=$(runsc_args)
  if [ -n "$args" ]; then
    runsc install --config_file "$DAEMON_JSON" --runtime runsc -- $args >/dev/null 2>&1 || { say "runsc install failed"; return 1; }
  else
    runsc install --config_file "$DAEMON_JSON" --runtime runsc >/dev/null 2>&1 || { say "runsc install failed"; return 1; }
  fi
  after=$(cat "$DAEMON_JSON" 2>/dev/null || true)
  [ "$before" != "$after" ] || return 1
  if [ -n "$args" ]; then
    say "registered runsc in $DAEMON_JSON with --network=host (this runsc misreads this kernel's network namespaces)"
  else
    say "registered runsc in $DAEMON_JSON"
  fi
}

if engine_answers; then
  # A running daemon picks the runtime up on SIGHUP (dockerd reloads "runtimes" live).
  if register_runsc; then
    pid=$(dockerd_pid || true)
    if [ -n "$pid" ]; then
      kill -HUP "$pid"
      say "dockerd reloaded its runtimes"
    fi
  fi
  exit 0
fi

if [ "$(id -u)" != 0 ]; then
  say "no Docker engine answers on $SOCKET and this script needs root to start one (try: sudo $0)"
  exit 1
fi

if ! command -v dockerd >/dev/null 2>&1; then
  say "installing Debian's docker.io (dockerd not found)..."
  export DEBIAN_FRONTEND=noninteractive
  if ! { timeout 300 apt-get update -qq && timeout 600 apt-get install -y -qq --no-install-recommends docker.io iptables; } >"$INSTALL_LOG" 2>&1; then
    say "installing docker.io failed; last lines of $INSTALL_LOG:"
    tail -n 20 "$INSTALL_LOG" >&2 || true
    exit 1
  fi
  command -v dockerd >/dev/null 2>&1 || { say "docker.io installed but dockerd is still missing"; exit 1; }
fi

register_runsc || true

starts=0
if ! dockerd_pid >/dev/null; then
  start_dockerd
  starts=1
else
  say "dockerd is running but not answering yet; waiting for it"
fi

for _ in $(seq 1 "$WAIT_SECONDS"); do
  if engine_answers; then
    say "Docker engine is up"
    exit 0
  fi
  # The daemon we waited for died (or was a dying one): start one, at most twice in all.
  if ! dockerd_pid >/dev/null && [ "$starts" -lt 2 ]; then
    start_dockerd
    starts=$((starts + 1))
  fi
  sleep 1
done

say "dockerd did not answer within ${WAIT_SECONDS}s; last lines of $LOG:"
tail -n 20 "$LOG" >&2 || true
exit 1
