#!/usr/bin/env bash
# Smoke check of the functional cloud: the Nova operations dvms relies on.
# Boots 4 dvms.tiny servers (no network) on compute-1, live-migrates one to
# compute-2 and waits for the migration to be `completed`, shows its
# instance actions (with request ids), shelves (offloaded at once) and
# unshelves one, then deletes them all. Exits non-zero on the first failure.
#   usage: smoke.sh            (after up.sh with at least 2 computes)
set -euo pipefail
_t0=$(date +%s)
# shellcheck source=devstack/functional/lib.sh
. "$(dirname "$0")/lib.sh"
admin_env
# 2.91: --host on live migration (>= 2.30), --nic none (>= 2.37),
# migration list with uuids (>= 2.59).
export OS_COMPUTE_API_VERSION=2.91
SMOKE_LOG="$LOG_DIR/smoke.log"
prefix="dvms-smoke-$$"
servers=()
printf "\n==== smoke run %s at %s\n" "$$" "$(date -u +%FT%TZ)" >>"$SMOKE_LOG"

cleanup() {
  local rc=$?
  if [ "${#servers[@]}" -gt 0 ]; then
    log "deleting ${#servers[@]} servers"
    openstack server delete --wait "${servers[@]}" >>"$SMOKE_LOG" 2>&1 || true
  fi
  if [ "$rc" -ne 0 ]; then
    log "SMOKE FAILED (details: $SMOKE_LOG and $LOG_DIR/nova-*.log)"
    tail -n 20 "$SMOKE_LOG"
  fi
}
trap cleanup EXIT

# Every CLI call is bounded: a hung service fails the smoke instead of CI.
osc() { timeout 120 openstack "$@" 2>>"$SMOKE_LOG"; }
field() { osc server show "$1" -f value -c "$2"; }
wait_field() { # wait_field SERVER FIELD VALUE TIMEOUT
  local end=$(( $(date +%s) + $4 )) v
  while :; do
    v=$(field "$1" "$2" || true)
    [ "$v" = "$3" ] && return 0
    if [ "$v" = ERROR ] || [ "$(date +%s)" -ge "$end" ]; then
      log "FAILED: server $1 $2 is '$v', wanted '$3'"
      osc server show "$1" -f value -c fault || true
      return 1
    fi
    sleep 1
  done
}

for i in 1 2 3 4; do
  id=$(osc server create --flavor dvms.tiny --image dvms-tiny --nic none \
    --availability-zone nova:compute-1 -f value -c id "$prefix-$i")
  servers+=("$id")
  log "created $prefix-$i ($id) on compute-1"
done
for id in "${servers[@]}"; do
  wait_field "$id" status ACTIVE 180
  host=$(field "$id" OS-EXT-SRV-ATTR:host)
  [ "$host" = compute-1 ] || die "server $id is on $host, not compute-1"
done
log "4 servers ACTIVE on compute-1"

mig=${servers[0]}
t=$(date +%s)
log "live-migrating $mig to compute-2"
osc server migrate --live-migration --host compute-2 "$mig"
end=$(( $(date +%s) + 180 ))
while :; do
  status=$(osc server migration list --server "$mig" -f value -c Status | head -n 1 || true)
  [ "$status" = completed ] && break
  case "$status" in
    error | failed | cancelled) die "live migration of $mig ended '$status'" ;;
  esac
  [ "$(date +%s)" -lt "$end" ] || die "live migration of $mig still '$status' after 180 s"
  sleep 1
done
host=$(field "$mig" OS-EXT-SRV-ATTR:host)
[ "$host" = compute-2 ] || die "after migration $mig is on $host, not compute-2"
log "live migration completed in $(( $(date +%s) - t ))s; $mig now on compute-2"
osc server migration list --server "$mig" -c Id -c "Source Node" -c "Dest Node" -c Status -c Type
osc server event list "$mig" -c "Request ID" -c Action -c "Start Time"

shv=${servers[1]}
t=$(date +%s)
log "shelving $shv (shelved_offload_time = 0: offloaded at once)"
osc server shelve "$shv"
wait_field "$shv" status SHELVED_OFFLOADED 180
log "shelved and offloaded in $(( $(date +%s) - t ))s"
t=$(date +%s)
# python3-openstackclient 6.0 has no `unshelve --host` (2.91): the
# scheduler picks the host here.
log "unshelving $shv"
osc server unshelve "$shv"
wait_field "$shv" status ACTIVE 180
host=$(field "$shv" OS-EXT-SRV-ATTR:host)
log "unshelved in $(( $(date +%s) - t ))s onto $host"
osc server event list "$shv" -c "Request ID" -c Action -c "Start Time"

t=$(date +%s)
osc server delete --wait "${servers[@]}"
servers=()
log "deleted in $(( $(date +%s) - t ))s"
log "SMOKE PASSED in $(( $(date +%s) - _t0 ))s"
