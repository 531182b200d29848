#!/usr/bin/env bash
# Smoke check of the test bed through the openstack CLI: boots a 128 MiB
# KVM server on kvm-1 from the functional cloud's image (a 1 MiB blank
# disk: the guest sits in its BIOS, which is all a live migration needs),
# checks QEMU runs it in kvm-1 (virsh), live-migrates it to kvm-2 over the
# hosts' addresses (block migration: Nova's "auto"), checks it runs there
# and no longer in kvm-1, then
# deletes it. Prints the migration's time (Nova's created -> updated).
#   usage: smoke.sh [IMAGE]    (default dvms-tiny)
# Needs root (exec into the hosts) and the bed up with >= 2 hosts.
set -euo pipefail
_t0=$(date +%s)
# shellcheck source=devstack/hosts/lib.sh
. "$(dirname "$0")/lib.sh"
admin_env
image="${1:-dvms-tiny}"
flavor=dvms.bed128
src=kvm-1 dst=kvm-2
for h in "$src" "$dst"; do host_pid "$h" >/dev/null || die "the bed needs $src and $dst running (up.sh 2)"; done
osc() { openstack --os-compute-api-version 2.80 "$@"; } # 2.80: migration list --server
openstack flavor show "$flavor" >/dev/null 2>&1 \
  || run_logged "flavor $flavor (1 vCPU, 128 MiB, 1 GB)" "$HOSTS_LOG_DIR/smoke.log" \
    openstack flavor create --vcpus 1 --ram 128 --disk 1 "$flavor"
name="bed-smoke-$$"
run_logged "boot $name on $src ($image, $flavor)" "$HOSTS_LOG_DIR/smoke.log" \
  osc server create --image "$image" --flavor "$flavor" --nic none --availability-zone "nova:$src" "$name"
cleanup() { openstack server delete --wait "$name" >>"$HOSTS_LOG_DIR/smoke.log" 2>&1 || true; }
trap cleanup EXIT
field() { osc server show "$name" -f value -c "$1" 2>/dev/null; }
status_is() { [ "$(field status)" = "$1" ]; }
on_host() { [ "$(field OS-EXT-SRV-ATTR:host)" = "$1" ]; }
if ! wait_for 180 "$name ACTIVE" status_is ACTIVE; then
  osc server show "$name" -f value -c status -c fault || true
  fail_with_log "booting $name" "$ROOTS_DIR/$src/root/var/log/nova/nova-compute.log"
fi
dom=$(field OS-EXT-SRV-ATTR:instance_name)
running_in() { hexec "$1" virsh -c qemu:///system domstate "$dom" 2>/dev/null | grep -qx running; }
running_in "$src" || die "$dom is not running in $src (virsh domstate)"
log "$name is $dom, running in $src"

t=$(date +%s.%N)
run_logged "live-migrate $name $src -> $dst" "$HOSTS_LOG_DIR/smoke.log" \
  osc server migrate --live-migration --host "$dst" "$name"
migration_status() {
  osc server migration list --server "$name" -f value -c Status 2>/dev/null | head -n 1
}
exec 3>&1 # wait_for silences its condition: a failure is told on fd 3
migrated() {
  local st
  st=$(migration_status)
  case "$st" in
    error | failed | cancelled)
      log "FAILED: the live migration of $name ended $st; last error of the computes: $(cat \
        "$ROOTS_DIR/$src/root/var/log/nova/nova-compute.log" "$ROOTS_DIR/$dst/root/var/log/nova/nova-compute.log" \
        | grep -E ' ERROR .*(Exception|Error|Unacceptable|failure)' | sort | tail -n 1 | cut -c1-400)" >&3
      exit 1
      ;;
  esac
  on_host "$dst" && status_is ACTIVE
}
if ! wait_for 300 "$name ACTIVE on $dst" migrated; then
  osc server migration list --server "$name" || true
  fail_with_log "live migration of $name" "$ROOTS_DIR/$src/root/var/log/nova/nova-compute.log" \
    "$ROOTS_DIR/$dst/root/var/log/nova/nova-compute.log"
fi
wall=$(awk -v a="$t" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
# Nova may report the server on $dst a moment before QEMU there resumes it
# (the domain is paused until the migration's last step): wait for it.
wait_for 30 "$dom running in $dst" running_in "$dst" \
  || die "$dom is not running in $dst after the migration (virsh domstate: $(hexec "$dst" virsh -c qemu:///system domstate "$dom" 2>&1 | head -n 1))"
if running_in "$src"; then die "$dom still runs in $src after the migration"; fi
nova_time=$(osc server migration list --server "$name" -f json -c "Created At" -c "Updated At" -c Status \
  | "$PYTHON" -c 'import sys, json, datetime as d
for m in json.load(sys.stdin):
    if m["Status"] == "completed":
        a, b = (d.datetime.fromisoformat(m[k].split(".")[0]) for k in ("Created At", "Updated At"))
        print("%ds, created %s, updated %s" % ((b - a).total_seconds(), m["Created At"], m["Updated At"]))
        break')
log "live migration $src -> $dst of a 128 MiB guest: ${wall}s from the request to ACTIVE on $dst (Nova's migration record: $nova_time)"
cleanup
trap - EXIT
log "smoke passed in $(( $(date +%s) - _t0 ))s"
