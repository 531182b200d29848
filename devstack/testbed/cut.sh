#!/usr/bin/env bash
# Cut site SITE off from the other sites (on), or join it again (off): its
# wan0 goes down, so every inter-site packet of the site (NATS gateways,
# Raft) is lost, while its agents still reach each other and Nova. Needs
# root; the test bed must be up (up.sh).
set -euo pipefail
# shellcheck source=devstack/testbed/lib.sh
. "$(dirname "$0")/lib.sh"
need_root
site=${1:?usage: cut.sh SITE on|off}
mode=${2:?usage: cut.sh SITE on|off}
ns=$(site_ns "$site")
ip netns list | grep -qw "$ns" || die "no namespace $ns: is the test bed up?"
case "$mode" in
  on)
    ip -n "$ns" link set wan0 down
    log "site $site cut off from the WAN"
    ;;
  off)
    ip -n "$ns" link set wan0 up
    log "site $site back on the WAN"
    ;;
  *) die "usage: cut.sh SITE on|off" ;;
esac
