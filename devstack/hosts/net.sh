#!/usr/bin/env bash
# The test bed's network: a bridge dvhb0 with 10.79.0.1/24 in this
# (the root) network namespace. The control plane (devstack/functional,
# brought up with DVMS_FUNC_HOST_IP=10.79.0.1) listens there; host kvm-K
# (up.sh) is a network namespace with a veth on this bridge at 10.79.0.(10+K).
#   usage: net.sh up|down|status
# Needs root (ip link, ip addr). Run `net.sh up` BEFORE the control plane's
# up.sh (its services bind to 10.79.0.1). `down` also stops the hosts
# (down.sh) first: their veths are on the bridge.
set -euo pipefail
# shellcheck source=devstack/hosts/lib.sh
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || die "net.sh must run as root (ip link, ip addr)"
case "${1:-}" in
  up)
    if ! ip link show "$BED_BRIDGE" >/dev/null 2>&1; then
      ip link add "$BED_BRIDGE" type bridge || die "creating bridge $BED_BRIDGE"
      log "created bridge $BED_BRIDGE"
    fi
    if ! ip -4 addr show dev "$BED_BRIDGE" | grep -q "inet $BED_GW/24"; then
      ip addr add "$BED_GW/24" dev "$BED_BRIDGE" || die "adding $BED_GW/24 to $BED_BRIDGE"
    fi
    ip link set "$BED_BRIDGE" up
    # Bridged frames must not be filtered by this machine's iptables (when
    # br_netfilter is loaded): the hosts talk to each other through it.
    if [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]; then
      log "note: br_netfilter is loaded; bridged traffic between hosts passes iptables FORWARD"
    fi
    log "network up: $BED_BRIDGE $BED_GW/24"
    ;;
  down)
    bash "$BED_DIR/down.sh"
    if ip link show "$BED_BRIDGE" >/dev/null 2>&1; then
      ip link del "$BED_BRIDGE" || die "deleting bridge $BED_BRIDGE"
      log "deleted bridge $BED_BRIDGE"
    fi
    ;;
  status)
    ip -br addr show dev "$BED_BRIDGE" 2>/dev/null || echo "$BED_BRIDGE: absent"
    ip netns list | grep '^kvm-' || true
    ;;
  *) die "usage: net.sh up|down|status" ;;
esac
