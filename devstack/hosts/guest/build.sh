#!/usr/bin/env bash
# build.sh OUTDIR: the bed's burner guest, made from Debian packages.
#   OUTDIR/vmlinuz        the kernel of linux-image-cloud-amd64 (/boot/vmlinuz-*)
#   OUTDIR/initramfs.img  gzip'd cpio: busybox-static, the virtio console
#                         modules, /init and the burner (./burner, static Go)
#   OUTDIR/root.raw       a 1 MiB raw disk: the bootable glance image that
#                         carries kernel_id / ramdisk_id (nothing reads it)
#   OUTDIR/cmdline        the kernel command line upload.sh sets
# Needs root only to apt-get install the two packages when they are missing.
# Files are world-readable: QEMU runs as libvirt-qemu.
set -euo pipefail
# shellcheck source=devstack/functional/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../functional/lib.sh"
GUEST_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$GUEST_DIR/../../.." && pwd)"
GO="${DVMS_GO:-$(command -v go || echo /usr/local/go/bin/go)}"

[ $# -eq 1 ] || die "usage: $0 OUTDIR"
out=$1
mkdir -p "$out"
out="$(cd "$out" && pwd)"

need_pkgs=()
dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' || need_pkgs+=(busybox-static)
dpkg-query -W -f='${Status}' linux-image-cloud-amd64 2>/dev/null | grep -q 'ok installed' || need_pkgs+=(linux-image-cloud-amd64)
command -v cpio >/dev/null || need_pkgs+=(cpio)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  [ "$(id -u)" -eq 0 ] || die "missing ${need_pkgs[*]}: install them as root (apt-get install --no-install-recommends ${need_pkgs[*]})"
  log "installing ${need_pkgs[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi

# The kernel the metapackage points at (not whatever else sits in /boot).
kpkg=$(dpkg-query -W -f='${Depends}' linux-image-cloud-amd64 | tr ',' '\n' | grep -o 'linux-image-[^ ]*-cloud-amd64' | head -n 1)
kver=${kpkg#linux-image-}
[ -r "/boot/vmlinuz-$kver" ] || die "linux-image-cloud-amd64 points at $kpkg but /boot/vmlinuz-$kver is missing"
moddir="/lib/modules/$kver"
log "kernel $kver"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root="$stage/root"
mkdir -p "$root"/{bin,dev,proc,sys,tmp,lib/modules}

# virtio_console (the guest agent port) and its dependencies are modules in
# the cloud kernel; serial 8250, devtmpfs and initrd are built in.
mods=(virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci virtio_console)
for m in "${mods[@]}"; do
  ko=$(grep -o "^kernel/[^:]*/$m\.ko" "$moddir/modules.dep" | head -n 1) ||
    die "module $m not in $moddir/modules.dep"
  cp "$moddir/$ko" "$root/lib/modules/"
done

cp /bin/busybox "$root/bin/busybox"
"$root/bin/busybox" --list >/dev/null || die "/bin/busybox is not runnable (is busybox-static installed?)"
log "building the burner with $GO"
(cd "$REPO_DIR" && CGO_ENABLED=0 "$GO" build -trimpath -ldflags='-s -w' \
  -o "$root/bin/dvms-burner" ./devstack/hosts/guest/burner)

cat > "$root/init" <<INIT
#!/bin/busybox sh
# PID 1 of the dvms burner guest: mount, load the virtio console, serve.
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in ${mods[*]}; do insmod /lib/modules/\$m.ko || echo "dvms-guest: insmod \$m failed"; done
echo "dvms-guest: init done at \$(cut -d' ' -f1 /proc/uptime)s" > /dev/console
while :; do
  /bin/dvms-burner > /dev/console 2>&1
  echo "dvms-guest: burner exited (\$?), restarting" > /dev/console
  sleep 1
done
INIT
chmod 0755 "$root/init"

log "packing the initramfs"
(cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) | gzip -9 > "$stage/initramfs.img"
install -m 0644 "$stage/initramfs.img" "$out/initramfs.img"
install -m 0644 "/boot/vmlinuz-$kver" "$out/vmlinuz"
truncate -s 1M "$stage/root.raw"
install -m 0644 "$stage/root.raw" "$out/root.raw"
# console=ttyS0: Nova's libvirt driver logs the serial console to the
# instance's console.log. panic=-1: a guest that cannot start restarts.
echo "console=ttyS0 panic=-1 quiet" > "$out/cmdline"
chmod 0755 "$out"
log "built $out: vmlinuz $(stat -c %s "$out/vmlinuz") B, initramfs.img $(stat -c %s "$out/initramfs.img") B, kernel $kver"
