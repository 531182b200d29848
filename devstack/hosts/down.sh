#!/usr/bin/env bash
# Stops the test bed: every host (systemd poweroff: the agents get SIGTERM,
# guests are killed with their host), the bed's NATS. The control plane
# (devstack/functional/down.sh) and the bridge (net.sh down) are left alone.
# Nova keeps the hosts' services and servers (--purge deletes the
# services, which needs the servers on them deleted first).
#   usage: down.sh [--purge]   --purge also deletes the hosts' overlays, the
#                              instances, keys and NATS config (the
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
declare -A jobs=()
for n in $(printf '%s\n' "${names[@]}" | sort -u); do
  bash "$BED_DIR/host.sh" "$action" "${n#kvm-}" &
  jobs[$n]=$!
done
failed=()
for n in "${!jobs[@]}"; do wait "${jobs[$n]}" || failed+=("$n"); done
bash "$BED_DIR/outage.sh" nats stop
if [ "$purge" = 1 ] && [ -s "$DVMS_FUNC_DIR/clouds.yaml" ] && ! http_ok "$KEYSTONE_URL"; then
  log "note: keystone does not answer at $KEYSTONE_URL (control plane down): the hosts' nova-compute services stay in its database"
elif [ "$purge" = 1 ] && [ -s "$DVMS_FUNC_DIR/clouds.yaml" ]; then
  # The hosts' nova-compute services leave Nova too (and their resource
  # providers), so that the control plane has only what it had before:
  # the functional tests take every compute host of the cloud for theirs.
  admin_env
  while read -r id host; do
    if openstack compute service delete "$id" >>"$HOSTS_LOG_DIR/down.log" 2>&1; then
      log "deleted nova-compute service of $host from Nova"
    else
      log "note: could not delete the nova-compute service of $host (servers left on it?): see $HOSTS_LOG_DIR/down.log"
    fi
  done < <(timeout 60 openstack compute service list --service nova-compute -f value -c ID -c Host 2>/dev/null | awk '$2 ~ /^kvm-[0-9]+$/')
fi
if [ "$purge" = 1 ]; then
  log "purging the bed's state (the cached root $BASE_ROOT is kept)"
  rm -rf "$INSTANCES_DIR" "$DVMS_HOSTS_DIR/keys" "$DVMS_HOSTS_DIR/observer" "$BED_NATS_DIR" \
    "$DVMS_HOSTS_DIR/dvms.conf" "$HOSTS_ENV" "$DVMS_HOSTS_DIR/dvms"
fi
[ "${#failed[@]}" = 0 ] || die "host.sh $action failed for: ${failed[*]} (see above)"
log "bed down in $(( $(date +%s) - _t0 ))s"
