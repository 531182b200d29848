#!/usr/bin/env bash
# upload.sh [BUILDDIR]: the burner guest into glance, and flavor dvms.kvm.
#   dvms-burner-kernel   aki  the kernel (BUILDDIR/vmlinuz)
#   dvms-burner-ramdisk  ari  the initramfs with the burner
#   dvms-burner          raw  a 1 MiB root disk carrying kernel_id, ramdisk_id,
#                             os_command_line and hw_qemu_guest_agent=yes: Nova's
#                             libvirt driver boots the kernel directly and adds
#                             the org.qemu.guest_agent.0 port the burner serves
#   flavor dvms.kvm      1 vCPU, 256 MiB, 1 GB disk
# BUILDDIR defaults to $DVMS_HOSTS_DIR/guest, built with build.sh if missing.
# Images whose content changed are replaced; unchanged ones are kept (a
# server's kernel_id must stay valid while it lives). Uses the functional
# cloud's admin credentials ($DVMS_FUNC_DIR/clouds.yaml).
set -euo pipefail
# shellcheck source=devstack/functional/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../functional/lib.sh"
GUEST_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DVMS_HOSTS_DIR="${DVMS_HOSTS_DIR:-/tmp/dvms-hosts}"
build="${1:-$DVMS_HOSTS_DIR/guest}"
admin_env
[ -f "$OS_CLIENT_CONFIG_FILE" ] || die "no $OS_CLIENT_CONFIG_FILE: bring the functional cloud up first (devstack/functional/up.sh)"

if [ ! -f "$build/initramfs.img" ]; then
  "$GUEST_DIR/build.sh" "$build"
fi
for f in vmlinuz initramfs.img root.raw cmdline; do
  [ -r "$build/$f" ] || die "$build/$f missing: run $GUEST_DIR/build.sh $build"
done

osc() { timeout 120 openstack "$@"; }

# image_id NAME: the id of the one image called NAME, or nothing.
image_id() { osc image list --name "$1" -f value -c ID | head -n 1; }

# current NAME FILE: the id of image NAME if its checksum is FILE's md5.
current() {
  local id sum
  id=$(image_id "$1")
  [ -n "$id" ] || return 0
  sum=$(osc image show "$id" -f value -c checksum)
  if [ "$sum" = "$(md5sum < "$2" | cut -d' ' -f1)" ]; then echo "$id"; fi
}

# upload NAME CONTAINER DISK FILE [PROPERTIES...]: replace image NAME with
# FILE (container and disk formats as glance names them).
upload() {
  local name=$1 container=$2 disk=$3 file=$4 old
  shift 4
  for old in $(osc image list --name "$name" -f value -c ID); do
    log "deleting the old $name ($old)" >&2 # stdout is the new id
    osc image delete "$old"
  done
  osc image create --public --container-format "$container" --disk-format "$disk" \
    --file "$file" "$@" -f value -c id "$name"
}

kernel=$(current dvms-burner-kernel "$build/vmlinuz")
ramdisk=$(current dvms-burner-ramdisk "$build/initramfs.img")
root=$(current dvms-burner "$build/root.raw")
cmdline=$(cat "$build/cmdline")
if [ -n "$root" ] && [ -n "$kernel" ] && [ -n "$ramdisk" ] &&
  osc image show "$root" -f json -c properties | grep -q "\"kernel_id\": \"$kernel\"" &&
  osc image show "$root" -f json -c properties | grep -q "\"ramdisk_id\": \"$ramdisk\""; then
  log "images unchanged: dvms-burner $root (kernel $kernel, ramdisk $ramdisk)"
else
  [ -n "$kernel" ] || kernel=$(upload dvms-burner-kernel aki aki "$build/vmlinuz")
  [ -n "$ramdisk" ] || ramdisk=$(upload dvms-burner-ramdisk ari ari "$build/initramfs.img")
  root=$(upload dvms-burner bare raw "$build/root.raw" \
    --property kernel_id="$kernel" --property ramdisk_id="$ramdisk" \
    --property os_command_line="$cmdline" --property hw_qemu_guest_agent=yes)
  log "uploaded dvms-burner $root (kernel $kernel, ramdisk $ramdisk, cmdline '$cmdline')"
fi

if osc flavor show dvms.kvm >/dev/null 2>&1; then
  log "flavor dvms.kvm exists"
else
  osc flavor create --public --vcpus 1 --ram 256 --disk 1 dvms.kvm >/dev/null
  log "created flavor dvms.kvm (1 vCPU, 256 MiB, 1 GB)"
fi
