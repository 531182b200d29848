# shellcheck shell=bash
# A Debian root booted with systemd as PID 1 (new PID, mount, UTS, IPC and
# cgroup namespaces, this machine's network), for the checks that install
# dvms as an operator or DevStack would (pkg/check.sh, plugincheck/run.sh).
# Sourced after functional/lib.sh (log, die, wait_for, fail_with_log).
# The caller sets:
#   SYSROOT_BASE  the cached root (devstack/hosts/root.sh builds it), never written
#   SYSROOT_DIR   work dir: upper/, work/, root/ (the overlay), systemd.pid, boot.log
#   SYSROOT_NAME  hostname inside
#   SYSROOT_CG    its cgroup in every hierarchy
# sysroot_mount, then changes to $SYSROOT_DIR/root, then sysroot_boot;
# sysroot_exec CMD... runs in it; sysroot_shutdown powers it off and
# unmounts it.

sysroot_cgroups() {
  awk '$2 ~ "^/sys/fs/cgroup" && ($3 == "cgroup" || $3 == "cgroup2") { print $2, $3, $4 }' /proc/self/mounts
}

# sysroot_pid: PID of the root's systemd, if it runs.
sysroot_pid() {
  local pid
  pid=$(cat "$SYSROOT_DIR/systemd.pid" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = systemd ] || return 1
  grep -q "/$SYSROOT_CG\(/\|$\)" "/proc/$pid/cgroup" 2>/dev/null || return 1
  echo "$pid"
}

# sysroot_exec CMD...: run CMD in the booted root (its namespaces and
# cgroup), with a clean environment (VAR=VALUE words may lead CMD: env's).
sysroot_exec() {
  local pid
  pid=$(sysroot_pid) || die "the root $SYSROOT_DIR/root is not running"
  (
    while read -r mp _fs _opts; do echo "$BASHPID" > "$mp/$SYSROOT_CG/cgroup.procs" 2>/dev/null || true; done < <(sysroot_cgroups)
    exec nsenter -t "$pid" -m -u -i -p -C -r -w \
      env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 TERM=dumb "$@"
  )
}

_sysroot_gone() { ! kill -0 "$1" 2>/dev/null; }

# _sysroot_started UNSHARE_PID: systemd runs as its child (its PID saved).
_sysroot_started() {
  local c
  for c in $(cat /proc/"$1"/task/*/children 2>/dev/null || true); do
    if [ "$(cat "/proc/$c/comm" 2>/dev/null)" = systemd ]; then
      echo "$c" > "$SYSROOT_DIR/systemd.pid"
      return 0
    fi
  done
  kill -0 "$1" 2>/dev/null || die "the root's init exited before systemd ran: $(tail -n 3 "$SYSROOT_DIR/boot.log" | tr '\n' ' ')"
  return 1
}

_sysroot_booted() {
  case "$(sysroot_exec systemctl is-system-running 2>/dev/null || true)" in running | degraded) return 0 ;; esac
  return 1
}

sysroot_shutdown() {
  local pid root=$SYSROOT_DIR/root
  if pid=$(sysroot_pid); then
    kill -s RTMIN+4 "$pid" # systemd's poweroff request in a container
    wait_for 90 "the root $root powered off" _sysroot_gone "$pid" || { kill -KILL "$pid" 2>/dev/null || true; wait_for 10 "killed" _sysroot_gone "$pid" || true; }
  fi
  rm -f "$SYSROOT_DIR/systemd.pid"
  if mountpoint -q "$root"; then umount "$root" || umount -l "$root"; fi
  while read -r mp _fs _opts; do
    [ -d "$mp/$SYSROOT_CG" ] && find "$mp/$SYSROOT_CG" -depth -type d -exec rmdir {} + 2>/dev/null
  done < <(sysroot_cgroups)
  return 0
}

# sysroot_mount: a fresh overlay over $SYSROOT_BASE at $SYSROOT_DIR/root
# (the upper layer takes every change), its own hostname and machine id.
sysroot_mount() {
  local root=$SYSROOT_DIR/root
  rm -rf "$SYSROOT_DIR/upper" "$SYSROOT_DIR/work"
  mkdir -p "$SYSROOT_DIR/upper" "$SYSROOT_DIR/work" "$root" "$SYSROOT_DIR/instances"
  mount -t overlay overlay -o "lowerdir=$SYSROOT_BASE,upperdir=$SYSROOT_DIR/upper,workdir=$SYSROOT_DIR/work" "$root"
  echo "$SYSROOT_NAME" > "$root/etc/hostname"
  tr -d '-' < /proc/sys/kernel/random/uuid > "$root/etc/machine-id"
}

# sysroot_boot: systemd as PID 1 of the mounted root (devstack/hosts/
# host-init.sh mounts what it expects), until its boot is done.
sysroot_boot() {
  local cgs unshare_pid
  cgs=$(sysroot_cgroups)
  while read -r mp _fs _opts; do
    mkdir -p "$mp/$SYSROOT_CG"
    if [ -e "$mp/$SYSROOT_CG/cpuset.cpus" ] && [ -z "$(cat "$mp/$SYSROOT_CG/cpuset.cpus")" ]; then
      cat "$mp/cpuset.cpus" > "$mp/$SYSROOT_CG/cpuset.cpus"
      cat "$mp/cpuset.mems" > "$mp/$SYSROOT_CG/cpuset.mems"
    fi
  done <<<"$cgs"
  log "booting systemd in $SYSROOT_DIR/root (log $SYSROOT_DIR/boot.log)"
  (
    while read -r mp _fs _opts; do echo "$BASHPID" > "$mp/$SYSROOT_CG/cgroup.procs"; done <<<"$cgs"
    # No descriptor of the caller (a flock lock, a CI pipe) stays open in
    # the root's daemons.
    for fd in /proc/"$BASHPID"/fd/*; do
      fd=${fd##*/}
      if [ "$fd" -gt 2 ] 2>/dev/null; then eval "exec $fd>&-"; fi
    done 2>/dev/null
    BED_CGROUPS=$cgs exec setsid unshare --pid --fork --mount --uts --ipc --cgroup --propagation private \
      "$(dirname "${BASH_SOURCE[0]}")/../hosts/host-init.sh" "$SYSROOT_NAME" "$SYSROOT_DIR/root" "$SYSROOT_DIR/instances"
  ) > "$SYSROOT_DIR/boot.log" 2>&1 < /dev/null &
  unshare_pid=$!
  wait_for 30 "systemd is PID 1 of the root" _sysroot_started "$unshare_pid" || fail_with_log "booting the root" "$SYSROOT_DIR/boot.log"
  wait_for 120 "the root's boot is done" _sysroot_booted || fail_with_log "booting the root" "$SYSROOT_DIR/boot.log"
}

# sysroot_node_prep: the mounted root as a fresh node that runs no Nova
# compute host of its own (the cloud's run elsewhere): no user dvms (a
# package must make it), manuals installed, nova-compute, libvirt and
# machined masked.
sysroot_node_prep() {
  local root=$SYSROOT_DIR/root u
  rm -f "$root/etc/dpkg/dpkg.cfg.d/dvms-bed"
  if chroot "$root" getent passwd dvms >/dev/null; then chroot "$root" userdel dvms; fi
  if chroot "$root" getent group dvms >/dev/null; then chroot "$root" groupdel dvms; fi
  for u in nova-compute.service libvirtd.service libvirtd-tcp.socket libvirtd.socket libvirtd-ro.socket \
    libvirtd-admin.socket virtlogd.service virtlogd.socket virtlogd-admin.socket virtlockd.service \
    virtlockd.socket virtlockd-admin.socket libvirt-guests.service systemd-machined.service; do
    ln -sfn /dev/null "$root/etc/systemd/system/$u"
  done
}
