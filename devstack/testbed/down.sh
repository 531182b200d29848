#!/usr/bin/env bash
# Remove the multi-site test bed: exactly the objects up.sh recorded in
# $DVMS_TESTBED_DIR/created (processes, namespaces with every process still
# in them, veth pairs, bridges), newest first, then that directory's
# run/ and etc/ (logs are kept). Needs root. Safe to run twice.
set -uo pipefail
# shellcheck source=devstack/testbed/lib.sh
. "$(dirname "$0")/lib.sh"
need_root
if [ ! -f "$TB_CREATED" ]; then
  log "nothing to remove ($TB_CREATED does not exist)"
  exit 0
fi
stop_pid() {
  local pid=$1 i
  kill "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 50; i++)); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
}
tac "$TB_CREATED" | while read -r kind name; do
  case "$kind" in
    pid)
      [ -f "$name" ] && stop_pid "$(cat "$name")" && rm -f "$name"
      log "stopped $(basename "$name" .pid)"
      ;;
    netns)
      if ip netns list | grep -qw "$name"; then
        for pid in $(ip netns pids "$name" 2>/dev/null); do stop_pid "$pid"; done
        ip netns del "$name" && log "removed namespace $name"
      fi
      ;;
    link)
      if ip link show "$name" >/dev/null 2>&1; then
        ip link del "$name" && log "removed link $name"
      fi
      ;;
    *) log "unknown record '$kind $name' in $TB_CREATED: left alone" ;;
  esac
done
rm -rf "$TB_RUN" "$TB_ETC" "$TB_DIR/keys" "$TB_DIR/observer" "$TB_DIR/demand" "$TB_CREATED" "$TB_DIR/testbed.env"
log "down (logs kept in $TB_LOG)"
