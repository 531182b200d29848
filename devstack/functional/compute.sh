#!/usr/bin/env bash
# Fault injection on one fake compute host of the functional cloud.
#   compute.sh stop HOST     graceful stop (SIGTERM), the service goes down
#                            after service_down_time (60 s)
#   compute.sh kill HOST     crash it (SIGKILL); add --mark-down to also run
#                            `openstack compute service set --down HOST
#                            nova-compute` so Nova sees it down at once
#   compute.sh start HOST    start it again (clears a forced-down flag) and
#                            wait until Nova reports it up
#   compute.sh status [HOST] process and Nova state
# Fake guests live in the nova-compute process: after a restart Nova still
# says ACTIVE for them but the host no longer has them (REAL-NOVA-NOTES, 9).
set -euo pipefail
# shellcheck source=devstack/functional/lib.sh
. "$(dirname "$0")/lib.sh"
admin_env

usage() { die "usage: compute.sh stop|kill [--mark-down]|start|status HOST"; }
[ $# -ge 1 ] || usage
action=$1
shift
mark_down=0
host=""
for a in "$@"; do
  case "$a" in
    --mark-down) mark_down=1 ;;
    compute-[0-9]*) host=$a ;;
    *) usage ;;
  esac
done

nova_state() { # prints "status state updated_at forced_down" of HOST's nova-compute
  openstack --os-compute-api-version 2.11 compute service list --service nova-compute \
    --host "$1" --long -f value -c Status -c State -c "Forced Down" -c "Updated At"
}
# service_up HOST SINCE: up, with a heartbeat newer than SINCE (UTC ISO
# time; Nova keeps saying "up" for service_down_time after a process dies).
service_up() {
  local state updated
  read -r state updated < <(openstack compute service list --service nova-compute \
    --host "$1" -f value -c State -c "Updated At")
  [ "$state" = up ] && [[ "$updated" > "$2" ]]
}
set_forced() { # set_forced HOST --up|--down
  openstack --os-compute-api-version 2.11 compute service set "$2" "$1" nova-compute
}

case "$action" in
  stop | kill)
    [ -n "$host" ] || usage
    pid_alive "nova-compute-$host" || die "nova-compute on $host is not running"
    if [ "$action" = stop ]; then
      stop_daemon "nova-compute-$host" TERM
    else
      stop_daemon "nova-compute-$host" KILL
    fi
    if [ "$mark_down" = 1 ]; then
      set_forced "$host" --down
      log "$host forced down in Nova"
    fi
    ;;
  start)
    [ -n "$host" ] || usage
    start_compute "$host"
    set_forced "$host" --up # this too sets Updated At: wait for a heartbeat after it
    since="$(date -u +%Y-%m-%dT%H:%M:%S).999999" # Nova keeps whole seconds
    wait_for "$DVMS_FUNC_TIMEOUT" "$host up in Nova (a new heartbeat)" service_up "$host" "$since" \
      || fail_with_log "starting $host" "$LOG_DIR/nova-compute-$host.log"
    ;;
  status)
    n=$(cat "$DVMS_FUNC_DIR/computes" 2>/dev/null || echo 0)
    hosts=("$host")
    if [ -z "$host" ]; then
      hosts=()
      for i in $(seq 1 "$n"); do hosts+=("compute-$i"); done
    fi
    for h in "${hosts[@]}"; do
      proc=stopped
      pid_alive "nova-compute-$h" && proc="running pid $(cat "$RUN_DIR/nova-compute-$h.pid")"
      printf '%-12s process: %-18s nova (status state updated_at forced_down): %s\n' "$h" "$proc" "$(nova_state "$h" | tr '\n' ' ')"
    done
    ;;
  *) usage ;;
esac
