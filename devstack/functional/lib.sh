#!/usr/bin/env bash
# Shared helpers of the functional harness (sourced, not run).
# shellcheck disable=SC2034  # variables used by the scripts that source this

DVMS_FUNC_DIR="${DVMS_FUNC_DIR:-/tmp/dvms-functional}"
LOG_DIR="$DVMS_FUNC_DIR/logs"
RUN_DIR="$DVMS_FUNC_DIR/run"
ETC_DIR="$DVMS_FUNC_DIR/etc"
STATE_DIR="$DVMS_FUNC_DIR/state"
HARNESS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$LOG_DIR" "$RUN_DIR" "$ETC_DIR" "$STATE_DIR"

_t0=${_t0:-$(date +%s)}
log() { printf '[%s +%4ss] %s\n' "$(date -u +%H:%M:%S)" "$(( $(date +%s) - _t0 ))" "$*"; }
die() {
  log "FAILED: $*"
  exit 1
}

# fail_with_log STEP LOGFILE: report a failed step with the tail of its log.
fail_with_log() {
  log "FAILED: $1"
  if [ -f "$2" ]; then
    echo "----- last lines of $2 -----"
    tail -n 40 "$2"
    echo "-----"
  fi
  exit 1
}

# wait_for TIMEOUT DESCRIPTION CMD...: retry CMD every second.
wait_for() {
  local timeout=$1 what=$2
  shift 2
  local end=$(( $(date +%s) + timeout ))
  until "$@" >/dev/null 2>&1; do
    if [ "$(date +%s)" -ge "$end" ]; then
      return 1
    fi
    sleep 1
  done
  log "ready: $what"
}

# start_daemon NAME LOGFILE CMD...: run CMD in the background, pid in RUN_DIR.
start_daemon() {
  local name=$1 logfile=$2
  shift 2
  if [ -f "$RUN_DIR/$name.pid" ] && kill -0 "$(cat "$RUN_DIR/$name.pid")" 2>/dev/null; then
    log "$name already running (pid $(cat "$RUN_DIR/$name.pid"))"
    return 0
  fi
  setsid "$@" >>"$logfile" 2>&1 < /dev/null &
  echo $! > "$RUN_DIR/$name.pid"
  log "started $name (pid $!, log $logfile)"
}

# stop_daemon NAME: stop what start_daemon started (its process group).
stop_daemon() {
  local name=$1 pidfile="$RUN_DIR/$1.pid" pid
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 20); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.5
    done
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
}

admin_env() {
  export OS_CLIENT_CONFIG_FILE="$DVMS_FUNC_DIR/clouds.yaml"
  export OS_CLOUD=dvms-functional
}
