#!/usr/bin/env bash
# Stops what up.sh started (and only that: the pid files under
# $DVMS_FUNC_DIR/run), newest first. Databases, images and logs are kept, so
# up.sh can start the same cloud again.
#   usage: down.sh [--purge]   --purge also deletes all state and configs
#                              (logs are kept) so the next up.sh starts afresh.
set -euo pipefail
_t0=$(date +%s)
# shellcheck source=devstack/functional/lib.sh
. "$(dirname "$0")/lib.sh"

purge=0
case "${1:-}" in
  '') ;;
  --purge) purge=1 ;;
  *) die "usage: down.sh [--purge]" ;;
esac

log "stopping the functional cloud under $DVMS_FUNC_DIR"
for pidfile in "$RUN_DIR"/nova-compute-*.pid; do
  [ -e "$pidfile" ] || continue
  name=$(basename "$pidfile" .pid)
  stop_daemon "$name" &
done
wait
for name in nova-api nova-scheduler nova-conductor glance-api placement keystone neutron-stub nats; do
  stop_daemon "$name" &
done
wait
if pid_alive rabbitmq; then
  # A clean stop keeps the mnesia database usable for the next up.sh.
  eval "$(cat "$ETC_DIR/rabbitmq-env.cmd")" /usr/lib/rabbitmq/bin/rabbitmqctl stop \
    >>"$LOG_DIR/rabbitmq.log" 2>&1 || true
fi
stop_daemon rabbitmq
stop_daemon epmd
stop_daemon mariadb
rm -f "$RUN_DIR"/mysqld.sock "$RUN_DIR"/rabbitmq-beam.pid "$RUN_DIR"/mariadbd.pid

if [ "$purge" = 1 ]; then
  log "purging state and configs (logs kept in $LOG_DIR)"
  rm -rf "$STATE_DIR" "$ETC_DIR" "$PY_DIR" "$RUN_DIR" \
    "$DVMS_FUNC_DIR/clouds.yaml" "$DVMS_FUNC_DIR/openrc" "$DVMS_FUNC_DIR/computes"
fi
log "down in $(( $(date +%s) - _t0 ))s"
