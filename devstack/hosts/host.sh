#!/usr/bin/env bash
# One host of the test bed (up.sh and down.sh call it; usable by hand).
#   host.sh boot K    configure and boot kvm-K: network namespace kvm-K with a
#                     veth on dvhb0 at 10.79.0.(10+K), an overlay root over
#                     roots/base, its own cgroup (dvms-hosts/kvm-K in every
#                     hierarchy), then systemd as PID 1 of new PID, mount, UTS,
#                     IPC and cgroup namespaces; waits for libvirtd.
#   host.sh stop K    power it off (systemd's container poweroff signal,
#                     SIGKILL after 60 s), remove its namespace and cgroups.
#   host.sh purge K   stop, then delete its overlay (what it wrote).
# Why not systemd-nspawn: it refuses on this machine kind (no system bus
# on the machine running it); these are the same namespaces nspawn makes.
# Needs root: ip netns, veth, mount (overlay, proc, sysfs, cgroup, tmpfs),
# mknod, writes to /sys/fs/cgroup.
set -euo pipefail
# shellcheck source=devstack/hosts/lib.sh
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || die "host.sh must run as root (namespaces, mounts, cgroups)"
usage() { die "usage: host.sh boot|stop|purge K   (K = 1, 2, ...: host kvm-K)"; }
[ $# = 2 ] || usage
action=$1 k=$2
case "$k" in '' | *[!0-9]* | 0) usage ;; esac
name=$(host_name "$k")
ip=$(host_ip "$k")
hdir="$ROOTS_DIR/$name"
root="$hdir/root"
hlog="$HOSTS_LOG_DIR/$name.log"
veth="dvh$k"

# The nova-compute config of the host (libvirt driver, KVM) against the
# control plane on $DVMS_FUNC_HOST_IP.
nova_conf() {
  cat <<EOT
[DEFAULT]
host = $name
my_ip = $ip
compute_driver = libvirt.LibvirtDriver
transport_url = $TRANSPORT_URL
state_path = /var/lib/nova
instances_path = /var/lib/nova/instances
log_dir = /var/log/nova
report_interval = ${DVMS_FUNC_REPORT_INTERVAL:-10}
service_down_time = ${DVMS_FUNC_SERVICE_DOWN_TIME:-60}
heal_instance_info_cache_interval = -1
shelved_offload_time = 0
[libvirt]
virt_type = $(bed_virt_type)
$(if [ "$(bed_virt_type)" = kvm ]; then cat <<EOC
# Every host is the same machine: the guest sees the real CPU, and
# migration needs no CPU model comparison. In nested KVM, QEMU cannot set
# IA32_ARCH_CAPABILITIES (MSR 0x10a) for host-passthrough or host-model.
cpu_mode = host-passthrough
cpu_model_extra_flags = -arch-capabilities
EOC
else
  echo "# TCG: QEMU's default CPU model (host-passthrough needs KVM)."
  echo "cpu_mode = none"
fi)
# Migration over the hosts' own addresses: qemu+tcp://kvm-K/system to the
# destination's libvirtd, QEMU's memory stream to its live_migration_inbound_addr.
live_migration_scheme = tcp
live_migration_inbound_addr = $ip
[oslo_concurrency]
lock_path = /var/lib/nova/tmp
[glance]
api_servers = http://$DVMS_FUNC_HOST_IP:$GLANCE_PORT
[vnc]
enabled = false
[oslo_messaging_notifications]
driver = noop
EOT
  authtoken_section placement nova
  authtoken_section neutron nova
  echo "endpoint_override = http://$DVMS_FUNC_HOST_IP:$NEUTRON_PORT"
}

# configure: everything that differs between hosts, written through the
# overlay before the host boots (copied up, so roots/base stays as built).
configure() {
  local uuid j
  uuid=$(cat /proc/sys/kernel/random/uuid)
  echo "$name" > "$root/etc/hostname"
  tr -d '-' < /proc/sys/kernel/random/uuid > "$root/etc/machine-id"
  {
    echo "127.0.0.1 localhost"
    echo "$BED_GW controller"
    for j in $(seq 1 "${DVMS_HOSTS_MAX:-16}"); do echo "$(host_ip "$j") $(host_name "$j")"; done
  } > "$root/etc/hosts"
  # libvirt refuses a migration between two hosts with the same host UUID.
  sed -i '/^host_uuid = /d' "$root/etc/libvirt/libvirtd.conf"
  echo "host_uuid = \"$uuid\"" >> "$root/etc/libvirt/libvirtd.conf"
  nova_conf > "$root/etc/nova/nova.conf"
  # Debian's nova-compute also reads nova-compute.conf after nova.conf.
  printf '# dvms test bed: everything is in nova.conf\n' > "$root/etc/nova/nova-compute.conf"
  chroot "$root" chown root:nova /etc/nova/nova.conf /etc/nova/nova-compute.conf
  chmod 0640 "$root/etc/nova/nova.conf" "$root/etc/nova/nova-compute.conf"
}

mount_root() {
  mkdir -p "$hdir/upper" "$hdir/work" "$root"
  if ! mountpoint -q "$root"; then
    mount -t overlay overlay -o "lowerdir=$BASE_ROOT,upperdir=$hdir/upper,workdir=$hdir/work" "$root" \
      || die "mounting the overlay root of $name at $root"
  fi
}

netns_up() {
  if ! ip netns list | grep -qw "^$name"; then
    ip netns add "$name"
  fi
  if ! ip link show "$veth" >/dev/null 2>&1; then
    ip link add "$veth" type veth peer name eth0 netns "$name"
  fi
  ip link set "$veth" master "$BED_BRIDGE" up || die "attaching $veth to $BED_BRIDGE (net.sh up first)"
  ip -n "$name" link set lo up
  ip -n "$name" addr replace "$ip/24" dev eth0
  ip -n "$name" link set eth0 up
  ip -n "$name" route replace default via "$BED_GW"
}

# cgroups_make: dvms-hosts/NAME in every hierarchy (the host's cgroup
# namespace is rooted there); cpuset needs its cpus and mems set first.
cgroups_make() {
  local mp _fs _opts d
  while read -r mp _fs _opts; do
    for d in "$mp/$BED_CGROUP_DIR" "$mp/$BED_CGROUP_DIR/$name"; do
      mkdir -p "$d"
      if [ -e "$d/cpuset.cpus" ] && [ -z "$(cat "$d/cpuset.cpus")" ]; then
        cat "$(dirname "$d")/cpuset.cpus" > "$d/cpuset.cpus"
        cat "$(dirname "$d")/cpuset.mems" > "$d/cpuset.mems"
      fi
    done
  done < <(cgroup_hierarchies)
}

cgroups_remove() {
  local mp _fs _opts
  while read -r mp _fs _opts; do
    [ -d "$mp/$BED_CGROUP_DIR/$name" ] && find "$mp/$BED_CGROUP_DIR/$name" -depth -type d -exec rmdir {} + 2>/dev/null
  done < <(cgroup_hierarchies)
  return 0
}

boot() {
  [ -f "$BASE_ROOT/.dvms-root" ] || die "no host root at $BASE_ROOT: run devstack/hosts/root.sh"
  [ -c /dev/kvm ] || die "/dev/kvm is missing: the bed needs KVM"
  if pid=$(host_pid "$name"); then
    log "$name is running (systemd pid $pid)"
    return 0
  fi
  local t0 unshare_pid pid
  t0=$(date +%s.%N)
  mount_root
  configure
  netns_up
  cgroups_make
  mkdir -p "$SHARED_INSTANCES"
  log "$name: booting systemd ($ip, log $hlog)"
  (
    # Into the host's own cgroups first: the cgroup namespace is rooted
    # where unshare runs. The caller's other descriptors (a flock lock, a
    # CI pipe) must not stay open in the host's daemons.
    while read -r mp _fs _opts; do echo "$BASHPID" > "$mp/$BED_CGROUP_DIR/$name/cgroup.procs"; done < <(cgroup_hierarchies)
    for fd in /proc/"$BASHPID"/fd/*; do
      fd=${fd##*/}
      if [ "$fd" -gt 2 ] 2>/dev/null; then eval "exec $fd>&-"; fi
    done 2>/dev/null
    BED_CGROUPS=$(cgroup_hierarchies)
    export BED_CGROUPS
    exec setsid nsenter --net="/run/netns/$name" -- \
      unshare --pid --fork --mount --uts --ipc --cgroup --propagation private \
      "$BED_DIR/host-init.sh" "$name" "$root" "$SHARED_INSTANCES"
  ) >>"$hlog" 2>&1 </dev/null &
  unshare_pid=$!
  echo "$unshare_pid" > "$HOSTS_RUN_DIR/$name.unshare.pid"
  systemd_started() {
    local c
    for c in $(cat /proc/"$unshare_pid"/task/*/children 2>/dev/null || true); do
      if [ "$(cat "/proc/$c/comm" 2>/dev/null)" = systemd ]; then
        echo "$c" > "$HOSTS_RUN_DIR/$name.systemd.pid"
        return 0
      fi
    done
    kill -0 "$unshare_pid" 2>/dev/null || die "$name: its init exited before systemd ran (log $hlog: $(tail -n 3 "$hlog" | tr '\n' ' '))"
    return 1
  }
  wait_for 30 "$name: systemd is PID 1" systemd_started || fail_with_log "booting $name" "$hlog"
  pid=$(host_pid "$name")
  booted() { # the manager answers and runs the boot's jobs (nova-compute's
    # start job lasts until it reaches the control plane: not waited for here)
    local st
    st=$(hexec "$name" systemctl is-system-running 2>/dev/null || true)
    case "$st" in starting | running | degraded) return 0 ;; esac
    return 1
  }
  wait_for 120 "$name: systemd manager up" booted || fail_with_log "booting $name" "$hlog"
  log "$name booted in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')s: $(hexec "$name" systemctl is-system-running || true)"
  wait_for 60 "$name: libvirtd answers" hexec "$name" virsh -c qemu:///system version \
    || { hexec "$name" systemctl status libvirtd --no-pager >>"$hlog" 2>&1 || true; fail_with_log "libvirtd on $name" "$hlog"; }
  write_hosts_env
}

stop() {
  local pid unshare_pid
  if pid=$(host_pid "$name"); then
    log "$name: powering off (systemd pid $pid)"
    # SIGRTMIN+4: systemd's poweroff request for a container.
    kill -s RTMIN+4 "$pid"
    gone() { ! kill -0 "$pid" 2>/dev/null; }
    if ! wait_for 60 "$name powered off" gone; then
      log "$name: still running after 60 s, SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      wait_for 10 "$name killed" gone || die "$name (pid $pid) does not die"
    fi
  fi
  unshare_pid=$(cat "$HOSTS_RUN_DIR/$name.unshare.pid" 2>/dev/null || true)
  if [ -n "$unshare_pid" ] && kill -0 "$unshare_pid" 2>/dev/null; then kill -KILL "$unshare_pid" 2>/dev/null || true; fi
  rm -f "$HOSTS_RUN_DIR/$name.systemd.pid" "$HOSTS_RUN_DIR/$name.unshare.pid"
  ip netns list | grep -qw "^$name" && ip netns del "$name"
  ip link del "$veth" 2>/dev/null || true
  cgroups_remove
  mountpoint -q "$root" && umount "$root"
  write_hosts_env
  log "$name stopped"
}

case "$action" in
  boot) boot ;;
  stop) stop ;;
  purge)
    stop
    rm -rf "$hdir"
    log "$name purged"
    ;;
  *) usage ;;
esac
