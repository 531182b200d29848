#!/usr/bin/env bash
# Stops the test bed: every host (systemd poweroff: the agents get SIGTERM,
# guests are killed with their host), the bed's NATS. The control plane
# (devstack/functional/down.sh) and the bridge (net.sh down) are left alone.
# Nova keeps the hosts' services and servers: delete the servers first if
# you want a clean cloud.
#   usage: down.sh [--purge]   --purge also deletes the hosts' overlays, the
#                              shared instances, keys and NATS config (the
#                              cached root roots/base is kept: root.sh --rebuild).
# Needs root.
set -euo pipefail
_t0=$(date +%s)
# shellcheck source=devstack/hosts/lib.sh
. "$(dirname "$0")/lib.sh"

purge=0
case "${1:-}" in
  '') ;;
  --purge) purge=1 ;;
  *) die "usage: down.sh [--purge]" ;;
esac
[ "$(id -u)" = 0 ] || die "down.sh must run as root"
action=stop
[ "$purge" = 1 ] && action=purge
names=()
for f in "$HOSTS_RUN_DIR"/kvm-*.systemd.pid "$ROOTS_DIR"/kvm-*; do
  [ -e "$f" ] || continue
  n=$(basename "$f")
  names+=("${n%.systemd.pid}")
done
for n in $(printf '%s\n' "${names[@]}" | sort -u); do
  bash "$BED_DIR/host.sh" "$action" "${n#kvm-}" &
done
wait
bash "$BED_DIR/outage.sh" nats stop
if [ "$purge" = 1 ]; then
  log "purging the bed's state (the cached root $BASE_ROOT is kept)"
  rm -rf "$DVMS_HOSTS_DIR/shared" "$DVMS_HOSTS_DIR/keys" "$DVMS_HOSTS_DIR/observer" "$BED_NATS_DIR" \
    "$DVMS_HOSTS_DIR/dvms.conf" "$HOSTS_ENV" "$DVMS_HOSTS_DIR/dvms"
fi
log "bed down in $(( $(date +%s) - _t0 ))s"
