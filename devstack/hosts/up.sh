#!/usr/bin/env bash
# Brings up the real-hypervisor test bed: N compute hosts kvm-1..kvm-N on
# this machine, each with its own systemd (PID 1), libvirtd, QEMU/KVM,
# cgroup tree and address 10.79.0.(10+K), each running Debian's
# nova-compute with the libvirt driver (virt_type = kvm) against the
# functional cloud (devstack/functional) on 10.79.0.1, and each running the
# dvms agent as an operator would: the unit etc/systemd/dvms-agent@.service
# unchanged, keys from `dvms keygen`, /etc/dvms/dvms.conf ([monitor]
# source = cgroup), /etc/openstack/clouds.yaml, `systemctl enable --now
# dvms-agent@kvm-K`. Their NATS runs here on 10.79.0.1:4222 (outage.sh).
#   usage: up.sh [N]            (default 3)
# Before: net.sh up; devstack/functional/install.sh; DVMS_FUNC_HOST_IP=10.79.0.1
# devstack/functional/up.sh. Needs root (namespaces, mounts, cgroups,
# debootstrap) and /dev/kvm. The dvms binary: $DVMS_BIN, else built from
# this checkout. State: $DVMS_HOSTS_DIR (default /tmp/dvms-hosts), hosts.env
# says what runs. Idempotent: running hosts and agents are kept.
# Live migration uses a shared instances path ($DVMS_HOSTS_DIR/shared/
# instances bind-mounted at /var/lib/nova/instances in every host): only
# memory is copied, so a migration's time depends on the guest's RAM and
# dirty rate as with shared storage (Ceph, NFS) in a region.
set -euo pipefail
_t0=$(date +%s)
# shellcheck source=devstack/hosts/lib.sh
. "$(dirname "$0")/lib.sh"

N="${1:-3}"
case "$N" in '' | *[!0-9]* | 0) die "usage: up.sh [N] (N >= 1 hosts, default 3)" ;; esac
[ "$(id -u)" = 0 ] || die "up.sh must run as root (namespaces, mounts, cgroups, debootstrap)"
[ -c /dev/kvm ] || die "/dev/kvm is missing: the bed runs real KVM guests and cannot run on this machine"
ip -4 addr show dev "$BED_BRIDGE" 2>/dev/null | grep -q "inet $BED_GW/" \
  || die "bridge $BED_BRIDGE with $BED_GW is missing: run devstack/hosts/net.sh up (before the control plane)"
[ -s "$DVMS_FUNC_DIR/clouds.yaml" ] || die "no control plane ($DVMS_FUNC_DIR/clouds.yaml): DVMS_FUNC_HOST_IP=$BED_GW devstack/functional/up.sh first"
http_ok "$KEYSTONE_URL" || die "keystone does not answer at $KEYSTONE_URL: the control plane must run with DVMS_FUNC_HOST_IP=$BED_GW"
for p in "$RABBIT_PORT" "$GLANCE_PORT" "$PLACEMENT_PORT" "$NEUTRON_PORT" "$NOVA_PORT"; do
  port_open "$p" || die "nothing listens on $DVMS_FUNC_HOST_IP:$p: the control plane must run with DVMS_FUNC_HOST_IP=$BED_GW"
done
for cmd in nsenter unshare ip nats-server openssl; do
  command -v "$cmd" >/dev/null || die "$cmd not found (util-linux, iproute2, nats-server: devstack/functional/install.sh)"
done
admin_env
virt=$(bed_virt_type)
case "$virt" in kvm | qemu) ;; *) die "DVMS_HOSTS_VIRT_TYPE=$virt: kvm or qemu" ;; esac
log "bringing up the test bed: $N hosts under $DVMS_HOSTS_DIR, Nova [libvirt] virt_type = $virt"
if [ "$virt" = qemu ] && [ -z "${DVMS_HOSTS_VIRT_TYPE:-}" ]; then
  log "NOTE: /dev/kvm here is nested PVM (module kvm_pvm): stock guest kernels do not boot under it, so the guests run on QEMU's TCG (DVMS_HOSTS_VIRT_TYPE=kvm forces KVM)"
fi

bash "$BED_DIR/root.sh"

# ---------------------------------------------------------------- dvms ---
DVMS="${DVMS_BIN:-}"
if [ -z "$DVMS" ]; then
  DVMS="$DVMS_HOSTS_DIR/dvms"
  GO_BIN=$(command -v go || echo /usr/local/go/bin/go)
  run_logged "go build dvms from $(cd "$BED_DIR/../.." && pwd)" "$HOSTS_LOG_DIR/build.log" \
    sh -c "cd '$BED_DIR/../..' && '$GO_BIN' build -o '$DVMS' ./cmd/dvms"
fi
[ -x "$DVMS" ] || die "dvms binary $DVMS is not executable"

# --------------------------------------------------------------- hosts ---
hosts=()
for k in $(seq 1 "$N"); do
  hosts+=("$(host_name "$k")")
  t=$(date +%s)
  bash "$BED_DIR/host.sh" boot "$k"
  log "host kvm-$k up in $(( $(date +%s) - t ))s"
done

since="$(date -u -d "@$(( $(date +%s) - 5 ))" +%Y-%m-%dT%H:%M:%S)"
computes_up() { # every kvm-K nova-compute up with a heartbeat after boot
  local up
  up=$(timeout 60 openstack compute service list --service nova-compute -f value -c Host -c State -c "Updated At" 2>/dev/null \
    | awk -v since="$since" '$2 == "up" && $1 ~ /^kvm-[0-9]+$/ && $3 > since { print $1 }' | sort -u | wc -l)
  [ "$up" -ge "$N" ]
}
if ! wait_for "$DVMS_FUNC_TIMEOUT" "$N nova-compute services kvm-* up (libvirt driver)" computes_up; then
  openstack compute service list || true
  for h in "${hosts[@]}"; do
    hexec "$h" systemctl --no-pager status nova-compute >>"$HOSTS_LOG_DIR/$h.log" 2>&1 || true
    cp "$ROOTS_DIR/$h/root/var/log/nova/nova-compute.log" "$HOSTS_LOG_DIR/$h-nova-compute.log" 2>/dev/null || true
  done
  fail_with_log "waiting for the hosts' nova-compute" "$HOSTS_LOG_DIR/kvm-1-nova-compute.log" "$HOSTS_LOG_DIR/kvm-1.log"
fi
run_logged "nova-manage cell_v2 discover_hosts" "$HOSTS_LOG_DIR/nova-manage.log" \
  nova-manage --config-file "$ETC_DIR/nova.conf" cell_v2 discover_hosts --verbose
hypervisors_ready() {
  local n
  n=$(timeout 60 openstack hypervisor list -f value -c "Hypervisor Hostname" -c "Hypervisor Type" -c State 2>/dev/null \
    | awk '$1 ~ /^kvm-[0-9]+$/ && $2 == "QEMU" && $3 == "up"' | wc -l) || return 1
  [ "$n" -ge "$N" ]
}
wait_for 120 "$N QEMU hypervisors kvm-* in Nova" hypervisors_ready \
  || fail_with_log "waiting for the hosts' hypervisors" "$HOSTS_LOG_DIR/nova-manage.log"

# -------------------------------------------------------------- agents ---
bash "$BED_DIR/agents.sh" install "$DVMS" "${hosts[@]}"

write_hosts_env
log "test bed is up: $N hosts ($HOSTS_ENV); devstack/hosts/exec.sh kvm-1 CMD runs CMD in kvm-1"
log "total time: $(( $(date +%s) - _t0 ))s"
