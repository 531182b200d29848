#!/usr/bin/env bash
# PID 1 of a host's new PID namespace until it execs systemd (started by
# host.sh inside the host's network, mount, UTS, IPC, PID and cgroup
# namespaces; not for direct use). Mounts what a container's systemd
# expects over the host's root (already an overlay, see host.sh): /proc,
# a read-only /sys of the host's network namespace, /sys/fs/cgroup with a
# fresh mount of every hierarchy of this machine (inside the cgroup
# namespace each is rooted at the host's own cgroup), a /dev with only the
# nodes a hypervisor needs (/dev/kvm owned by group kvm), a tmpfs /run,
# and the shared instances directory; then execs systemd with
# container=other.
#   usage: host-init.sh NAME ROOT SHARED_INSTANCES   (env BED_CGROUPS: "MOUNTPOINT FSTYPE OPTIONS" lines)
set -euo pipefail
name=$1 root=$2 shared=$3
say() { printf '[%s host-init %s] %s\n' "$(date -u +%H:%M:%S)" "$name" "$*"; }
trap 'say "FAILED (exit $?) at line $LINENO: $BASH_COMMAND"' ERR

mount --make-rprivate /
mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$root/sys"
mount -t tmpfs -o nosuid,nodev,noexec,mode=755 tmpfs "$root/sys/fs/cgroup"
while read -r mp fstype opts; do
  [ -n "$mp" ] || continue
  sub=${mp#/sys/fs/cgroup}
  mkdir -p "$root/sys/fs/cgroup$sub"
  if [ "$fstype" = cgroup2 ]; then
    mount -t cgroup2 -o nosuid,nodev,noexec cgroup2 "$root/sys/fs/cgroup$sub"
  else
    # Keep the controller (and name=) options, drop the generic ones.
    ctl=$(tr ',' '\n' <<<"$opts" | grep -vxE 'rw|ro|relatime|noatime|nosuid|nodev|noexec|clone_children|nsdelegate' | paste -sd, -)
    mount -t cgroup -o "nosuid,nodev,noexec,$ctl" cgroup "$root/sys/fs/cgroup$sub"
  fi
done <<<"$BED_CGROUPS"
say "cgroups: $(awk -v r="$root/sys/fs/cgroup" '$2 ~ "^"r { sub(r, "", $2); printf "%s(%s) ", $2, $3 }' /proc/self/mounts)"

dev="$root/dev"
mount -t tmpfs -o nosuid,mode=755,size=16m tmpfs "$dev"
for spec in null:1:3 zero:1:5 full:1:7 random:1:8 urandom:1:9 tty:5:0; do
  IFS=: read -r n maj min <<<"$spec"
  mknod -m 666 "$dev/$n" c "$maj" "$min"
done
kvm_gid=$(awk -F: '$1 == "kvm" { print $3 }' "$root/etc/group")
mknod -m 660 "$dev/kvm" c 10 232
chgrp "${kvm_gid:?no group kvm in the host root}" "$dev/kvm"
mkdir -p "$dev/net" "$dev/pts" "$dev/shm" "$dev/mqueue" "$dev/hugepages"
mknod -m 666 "$dev/net/tun" c 10 200
mount -t devpts -o newinstance,ptmxmode=0666,mode=620,gid=5 devpts "$dev/pts"
ln -s pts/ptmx "$dev/ptmx"
mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs "$dev/shm"
ln -s /proc/self/fd "$dev/fd"
ln -s /proc/self/fd/0 "$dev/stdin"
ln -s /proc/self/fd/1 "$dev/stdout"
ln -s /proc/self/fd/2 "$dev/stderr"
# systemd's console messages go to this script's output (the host's log).
touch "$dev/console"
mount --bind /proc/self/fd/1 "$dev/console"

mount -t tmpfs -o nosuid,nodev,mode=755 tmpfs "$root/run"
mkdir -p "$root/run/lock"
mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs "$root/tmp"
mkdir -p "$root/var/lib/nova/instances"
mount --bind "$shared" "$root/var/lib/nova/instances"

hostname "$name"
# pivot_root, not chroot: in a chroot the kernel refuses new user
# namespaces (EPERM), so systemd could not run units with PrivateUsers=
# (the dvms agent's unit has it: it failed with 217/USER).
mkdir -p "$root/.oldroot"
cd "$root"
pivot_root . .oldroot
say "pivot_root done; exec systemd"
exec env -i container=other TERM=dumb LANG=C.UTF-8 PATH=/usr/sbin:/usr/bin:/sbin:/bin \
  /bin/sh -c 'umount -l /.oldroot && exec /lib/systemd/systemd --system --log-target=console --show-status=no'
