#!/usr/bin/env bash
# Outages of what the bed's agents depend on, for the tests:
#   outage.sh nats stop|start|status       the bed's NATS (10.79.0.1:4222,
#                                          config from agents.sh)
#   outage.sh keystone stop|start|status   the control plane's keystone
#                                          (devstack/functional's uwsgi app)
# start waits until the service answers again. Needs root.
set -euo pipefail
# shellcheck source=devstack/hosts/lib.sh
. "$(dirname "$0")/lib.sh"

usage() { die "usage: outage.sh nats|keystone stop|start|status"; }
[ $# = 2 ] || usage
svc=$1 action=$2
case "$svc:$action" in
  nats:stop) stop_daemon bed-nats ;;
  nats:start)
    [ -s "$BED_NATS_DIR/nats.conf" ] || die "no $BED_NATS_DIR/nats.conf: devstack/hosts/up.sh (agents.sh) writes it"
    start_daemon bed-nats "$HOSTS_LOG_DIR/nats.log" nats-server -c "$BED_NATS_DIR/nats.conf"
    wait_for 30 "the bed's NATS on $BED_GW:$BED_NATS_PORT" port_open "$BED_NATS_PORT" "$BED_GW" \
      || fail_with_log "starting the bed's NATS" "$HOSTS_LOG_DIR/nats.log"
    ;;
  nats:status)
    if pid_alive bed-nats; then echo "nats: running (pid $(cat "$RUN_DIR/bed-nats.pid"))"; else echo "nats: stopped"; fi
    ;;
  keystone:stop | keystone:start | keystone:status)
    # keystone is the control plane's daemon: its pid file and log.
    RUN_DIR="$FUNC_RUN_DIR" LOG_DIR="$FUNC_LOG_DIR"
    case "$action" in
      stop) stop_daemon keystone ;;
      start)
        [ -s "$ETC_DIR/keystone.conf" ] || die "no $ETC_DIR/keystone.conf: is the control plane up (devstack/functional/up.sh)?"
        start_keystone
        wait_for 120 "keystone at $KEYSTONE_URL" http_ok "$KEYSTONE_URL" || fail_with_log "starting keystone" "$LOG_DIR/keystone.log"
        ;;
      status)
        if pid_alive keystone; then echo "keystone: running (pid $(cat "$RUN_DIR/keystone.pid"))"; else echo "keystone: stopped"; fi
        ;;
    esac
    ;;
  *) usage ;;
esac
