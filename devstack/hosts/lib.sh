#!/usr/bin/env bash
# Shared helpers and settings of the real-hypervisor test bed (sourced, not
# run). Every script of the bed runs as root: it creates network namespaces,
# a bridge, cgroups, overlay mounts, device nodes, and runs systemd as PID 1
# of a PID namespace for every host.
#
# Layout under $DVMS_HOSTS_DIR (default /tmp/dvms-hosts):
#   hosts.env            DVMS_HOSTS="kvm-1 ...", DVMS_HOST_IP_kvm_1=..., DVMS_HOST_PID_kvm_1=...
#   roots/base/          the Debian root every host shares (built once, cached)
#   roots/kvm-K/         upper/ and work/ of the host's overlay, root/ its mount point
#   shared/instances/    Nova's instances_path, bind-mounted into every host
#   logs/                one log per step and per host
#   run/                 pid files
# The logging, die, wait_for and run_logged helpers are the functional
# harness's (devstack/functional/lib.sh), which also says where the control
# plane is ($DVMS_FUNC_DIR, DVMS_FUNC_HOST_IP).
# shellcheck disable=SC2034  # variables used by the scripts that source this

BED_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# The control plane the hosts' nova-computes talk to: the functional cloud
# on the bridge's address.
export DVMS_FUNC_HOST_IP="${DVMS_FUNC_HOST_IP:-10.79.0.1}"
# shellcheck source=devstack/functional/lib.sh
. "$BED_DIR/../functional/lib.sh"

DVMS_HOSTS_DIR="${DVMS_HOSTS_DIR:-/tmp/dvms-hosts}"
HOSTS_LOG_DIR="$DVMS_HOSTS_DIR/logs"
HOSTS_RUN_DIR="$DVMS_HOSTS_DIR/run"
ROOTS_DIR="$DVMS_HOSTS_DIR/roots"
BASE_ROOT="$ROOTS_DIR/base"
SHARED_INSTANCES="$DVMS_HOSTS_DIR/shared/instances"
HOSTS_ENV="$DVMS_HOSTS_DIR/hosts.env"
mkdir -p "$HOSTS_LOG_DIR" "$HOSTS_RUN_DIR" "$ROOTS_DIR"

BED_BRIDGE="${DVMS_HOSTS_BRIDGE:-dvhb0}"
BED_NET="10.79.0"
BED_GW="$BED_NET.1"
# The hosts' own cgroup subtree in every hierarchy of this machine.
BED_CGROUP_DIR="dvms-hosts"
BED_SUITE="${DVMS_HOSTS_SUITE:-bookworm}"
BED_MIRROR="${DVMS_HOSTS_MIRROR:-http://deb.debian.org/debian}"
# NATS of the bed's agents (outage.sh starts and stops it).
BED_NATS_PORT="${DVMS_HOSTS_NATS_PORT:-4222}"
BED_NATS_DIR="$DVMS_HOSTS_DIR/nats"

# The hosts' hypervisor: Nova's [libvirt] virt_type. kvm, except where this
# machine's /dev/kvm is nested PVM (module kvm_pvm, "pagetable virtual
# machine"): it creates VMs, but a stock guest kernel never gets through
# its boot there (checked with Debian's 6.1 cloud kernel), so the bed uses
# QEMU's TCG (qemu) instead. Everything else (libvirt, machine.slice
# scopes, live migration) is the same. DVMS_HOSTS_VIRT_TYPE=kvm|qemu overrides.
bed_virt_type() {
  if [ -n "${DVMS_HOSTS_VIRT_TYPE:-}" ]; then
    echo "$DVMS_HOSTS_VIRT_TYPE"
  elif [ -d /sys/module/kvm_pvm ]; then
    echo qemu
  else
    echo kvm
  fi
}

host_name() { echo "kvm-$1"; }
host_ip() { echo "$BED_NET.$((10 + $1))"; }
# host_var NAME: kvm-1 -> kvm_1 (a shell variable suffix).
host_var() { echo "${1//-/_}"; }

# host_pid NAME: the PID (in this PID namespace) of the host's systemd.
host_pid() {
  local f="$HOSTS_RUN_DIR/$1.systemd.pid" pid
  [ -s "$f" ] || return 1
  pid=$(cat "$f")
  kill -0 "$pid" 2>/dev/null || return 1
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = systemd ] || return 1
  echo "$pid"
}

# hexec NAME CMD...: run CMD inside the host: all of its namespaces, its
# root, and its cgroup (what it uses counts as the host's).
hexec() {
  local name=$1 pid
  shift
  pid=$(host_pid "$name") || die "host $name is not running (no systemd pid in $HOSTS_RUN_DIR)"
  (
    local mp _fs _opts
    while read -r mp _fs _opts; do
      echo "$BASHPID" > "$mp/$BED_CGROUP_DIR/$name/cgroup.procs" 2>/dev/null || true
    done < <(cgroup_hierarchies)
    exec nsenter -t "$pid" -m -u -i -n -p -C -r -w \
      env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 TERM="${TERM:-dumb}" "$@"
  )
}

# cgroup_hierarchies: "MOUNTPOINT FSTYPE OPTIONS" of every cgroup hierarchy
# mounted under /sys/fs/cgroup here (v1 controllers, name=systemd, and the
# v2 hierarchy: hybrid here, only the v2 one on a unified machine).
cgroup_hierarchies() {
  awk '$2 ~ "^/sys/fs/cgroup" && ($3 == "cgroup" || $3 == "cgroup2") { print $2, $3, $4 }' /proc/self/mounts
}

# write_hosts_env: hosts.env from the hosts running now.
write_hosts_env() {
  local f names=() n v pid
  for f in "$HOSTS_RUN_DIR"/kvm-*.systemd.pid; do
    [ -e "$f" ] || continue
    n=$(basename "$f" .systemd.pid)
    host_pid "$n" >/dev/null && names+=("$n")
  done
  mapfile -t names < <(printf '%s\n' "${names[@]}" | sort -t- -k2 -n)
  {
    echo "# The dvms real-hypervisor test bed (devstack/hosts): written by up.sh"
    echo "DVMS_HOSTS=\"${names[*]}\""
    echo "DVMS_HOSTS_DIR=$DVMS_HOSTS_DIR"
    echo "DVMS_HOSTS_CONTROLLER_IP=$BED_GW"
    echo "DVMS_HOSTS_NATS_URL=nats://$BED_GW:$BED_NATS_PORT"
    echo "DVMS_HOSTS_VIRT_TYPE=$(bed_virt_type)"
    for n in "${names[@]}"; do
      v=$(host_var "$n")
      pid=$(host_pid "$n")
      echo "DVMS_HOST_IP_$v=$(host_ip "${n#kvm-}")"
      echo "DVMS_HOST_PID_$v=$pid"
    done
  } > "$HOSTS_ENV.tmp"
  mv -f "$HOSTS_ENV.tmp" "$HOSTS_ENV"
}

# The functional harness's helpers (start_daemon, run_logged ...) write pid
# files and logs of the bed's own daemons here.
FUNC_RUN_DIR="$RUN_DIR"
FUNC_LOG_DIR="$LOG_DIR"
RUN_DIR="$HOSTS_RUN_DIR"
LOG_DIR="$HOSTS_LOG_DIR"
