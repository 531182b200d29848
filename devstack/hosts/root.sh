#!/usr/bin/env bash
# Builds (once) the Debian root every host of the bed boots from:
# $DVMS_HOSTS_DIR/roots/base, a debootstrap minbase of Debian 12 with
# systemd, dbus, systemd-container (systemd-machined: libvirt registers
# every guest there, so it gets machine.slice/machine-qemu\x2dN\x2d….scope
# as on a fleet with systemd), libvirt, QEMU/KVM and Debian's nova-compute
# with the libvirt driver (nova-compute-kvm), installed with daemon starts
# blocked (policy-rc.d) and debconf answered as devstack/functional/install.sh
# does. Hosts never write into it: each boots from an overlay on top.
#   usage: root.sh [--rebuild]
# Needs root (debootstrap, chroot, mounts) and the Debian mirror
# ($DVMS_HOSTS_MIRROR, default http://deb.debian.org/debian). Packages
# already in /var/cache/apt/archives (the control plane's) are reused.
# Logs: $DVMS_HOSTS_DIR/logs/root-*.log. Cached: a root whose stamp
# matches the package list below is kept.
set -euo pipefail
_t0=$(date +%s)
# shellcheck source=devstack/hosts/lib.sh
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || die "root.sh must run as root (debootstrap, chroot, mounts)"
rebuild=0
case "${1:-}" in
  '') ;;
  --rebuild) rebuild=1 ;;
  *) die "usage: root.sh [--rebuild]" ;;
esac
if ! command -v debootstrap >/dev/null; then
  run_logged "apt-get install debootstrap" "$HOSTS_LOG_DIR/root-apt.log" \
    env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap
fi

# What each host runs. nova-compute-kvm pulls libvirt-daemon-system,
# qemu-system-x86 and python3-libvirt.
pkgs=(
  systemd-container dbus iproute2 procps kmod less
  libvirt-daemon-system libvirt-clients qemu-system-x86
  nova-compute nova-compute-kvm
)
stamp="$BED_SUITE ${pkgs[*]} v1"
if [ "$rebuild" = 0 ] && [ "$(cat "$BASE_ROOT/.dvms-root" 2>/dev/null)" = "$stamp" ]; then
  log "host root $BASE_ROOT is built (cached)"
  exit 0
fi

tmp="$BASE_ROOT.building"
umount_chroot() {
  local m
  for m in var/cache/apt/archives dev/pts dev proc sys; do
    mountpoint -q "$tmp/$m" 2>/dev/null && umount -l "$tmp/$m"
  done
  return 0
}
trap umount_chroot EXIT
umount_chroot
rm -rf "$tmp"
mkdir -p "$tmp" /var/cache/apt/archives

log "debootstrap $BED_SUITE minbase into $tmp (log $HOSTS_LOG_DIR/root-debootstrap.log)"
run_logged "debootstrap" "$HOSTS_LOG_DIR/root-debootstrap.log" \
  debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus \
  --cache-dir=/var/cache/apt/archives "$BED_SUITE" "$tmp" "$BED_MIRROR"
log "debootstrap done in $(( $(date +%s) - _t0 ))s"

cat > "$tmp/etc/apt/sources.list" <<EOT
deb $BED_MIRROR $BED_SUITE main
deb $BED_MIRROR $BED_SUITE-updates main
deb http://deb.debian.org/debian-security $BED_SUITE-security main
EOT
# Package scripts must not start daemons while the root is built.
printf '#!/bin/sh\nexit 101\n' > "$tmp/usr/sbin/policy-rc.d"
chmod +x "$tmp/usr/sbin/policy-rc.d"
{
  for pkg in nova-common nova-compute; do
    for q in configure_db dbconfig-install dbconfig-upgrade dbconfig-remove configure_rabbit \
      configure_ksat register-endpoint configure_api-endpoint; do
      echo "$pkg $pkg/$q boolean false"
    done
  done
} > "$tmp/tmp/debconf.sel"
# A throw-away root: no fsync per file, no manuals or translations.
cat > "$tmp/etc/dpkg/dpkg.cfg.d/dvms-bed" <<EOT
force-unsafe-io
path-exclude=/usr/share/doc/*
path-exclude=/usr/share/man/*
path-exclude=/usr/share/locale/*
path-exclude=/usr/share/info/*
EOT
mount -t proc proc "$tmp/proc"
mount --bind /dev "$tmp/dev"
mount --bind /dev/pts "$tmp/dev/pts"
mount --bind /var/cache/apt/archives "$tmp/var/cache/apt/archives"
in_root() { chroot "$tmp" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"; }
run_logged "debconf answers (no db, rabbit, keystone or endpoint setup by packages)" "$HOSTS_LOG_DIR/root-apt.log" \
  in_root debconf-set-selections /tmp/debconf.sel
run_logged "apt-get update (in the root)" "$HOSTS_LOG_DIR/root-apt.log" in_root apt-get update -q
log "apt-get install ${pkgs[*]} (in the root; log $HOSTS_LOG_DIR/root-apt.log)"
run_logged "apt-get install" "$HOSTS_LOG_DIR/root-apt.log" \
  in_root apt-get install -y -q --no-install-recommends -o Dpkg::Options::=--force-confdef \
  -o Dpkg::Options::=--force-confold "${pkgs[@]}"
log "packages installed in $(( $(date +%s) - _t0 ))s"

log "configuring the root: units, libvirt, the dvms user"
# A host is a container to systemd (container=other): no consoles, no
# udev, no timers that would compete for the 2 cores.
for u in getty@tty1.service console-getty.service serial-getty@.service systemd-udevd.service \
  systemd-udevd-control.socket systemd-udevd-kernel.socket apt-daily.timer apt-daily-upgrade.timer \
  e2scrub_all.timer fstrim.timer logrotate.timer man-db.timer dpkg-db-backup.timer \
  systemd-timesyncd.service libvirt-guests.service; do
  ln -sfn /dev/null "$tmp/etc/systemd/system/$u"
done
# libvirt's default NAT network needs dnsmasq and iptables: not used (the
# guests have no network, as the functional cloud's servers).
rm -f "$tmp/etc/libvirt/qemu/networks/autostart/default.xml"
# Live migration goes qemu+tcp://<host>/system (Nova's default scheme) to
# the destination's libvirtd: its TCP socket, no auth (the bed's private
# bridge only).
sed -i 's/^#\?auth_tcp = .*/auth_tcp = "none"/' "$tmp/etc/libvirt/libvirtd.conf"
grep -q '^auth_tcp = "none"' "$tmp/etc/libvirt/libvirtd.conf" || echo 'auth_tcp = "none"' >> "$tmp/etc/libvirt/libvirtd.conf"
in_root systemctl enable libvirtd.service libvirtd-tcp.socket virtlogd.socket nova-compute.service \
  >>"$HOSTS_LOG_DIR/root-apt.log" 2>&1 || fail_with_log "systemctl enable (in the root)" "$HOSTS_LOG_DIR/root-apt.log"
# QEMU's per-guest /dev namespace adds nothing inside a host that is
# itself a mount namespace with its own /dev.
cat >> "$tmp/etc/libvirt/qemu.conf" <<EOT

# dvms test bed (devstack/hosts/root.sh)
namespaces = [ ]
EOT
# The dvms agent's user (the unit says User=dvms); it reads /etc/dvms.
in_root adduser --system --group --no-create-home --home /var/lib/dvms dvms >>"$HOSTS_LOG_DIR/root-apt.log" 2>&1 \
  || fail_with_log "adduser dvms (in the root)" "$HOSTS_LOG_DIR/root-apt.log"
in_root id nova >/dev/null || die "no user nova in the root (nova-common)"
rm -f "$tmp/usr/sbin/policy-rc.d" "$tmp/tmp/debconf.sel" "$tmp/etc/machine-id"
umount_chroot
trap - EXIT
echo "$stamp" > "$tmp/.dvms-root"
rm -rf "$BASE_ROOT"
mv "$tmp" "$BASE_ROOT"
log "host root ready: $BASE_ROOT ($(du -sh "$BASE_ROOT" | cut -f1)) in $(( $(date +%s) - _t0 ))s"
