#!/usr/bin/env bash
# Settings and helpers of the multi-site test bed (sourced, not run).
#
# Sites are network namespaces on one machine. Everything the
# scripts create is named dvtb-* and recorded, one line per object, in
# $DVMS_TESTBED_DIR/created, which down.sh reads to remove exactly that.
#
# Topology (root namespace = the "WAN" and the management network):
#
#   dvtb-wan   bridge 10.77.0.254/24: site s's wan0 is 10.77.0.s. Inter-site
#              NATS traffic (gateways) goes through toxiproxy listeners on
#              10.77.0.254, one per destination site, which add
#              DVMS_TESTBED_WAN_DELAY_MS to every byte crossing in either
#              direction (round trip between two sites: twice that).
#   dvtb-mgmt  bridge 10.78.0.254/24, site ports isolated from each other:
#              site s's mgmt0 is 10.78.0.s and reaches only the root
#              namespace, where the Nova API listens (NOVA_ADDR).
#
# Why toxiproxy and not tc netem: the kernels this project's CI runs on
# (Firecracker VMs) have no netem qdisc and no tc classifiers or actions
# (`tc qdisc add ... netem` answers "Specified qdisc kind is unknown").
# toxiproxy (Shopify, the usual tool for TCP latency injection) delays the
# real TCP streams of the real NATS super-cluster. What it does not delay:
# Raft between voters of different sites (voters dial each other's wan0
# address directly), SWIM membership (UDP and TCP between wan0
# addresses, with membership = swim), and traffic inside a site
# (loopback, ~0.05 ms).
# A site is cut off by taking its wan0 down (cut.sh): every inter-site
# packet of that site, NATS and Raft, is lost; Nova stays reachable over
# mgmt0, as a site's own control plane would.
# shellcheck disable=SC2034  # variables used by the scripts that source this

DVMS_TESTBED_DIR="${DVMS_TESTBED_DIR:-/tmp/dvms-testbed}"
TB_DIR="$DVMS_TESTBED_DIR"
TB_LOG="$TB_DIR/logs"
TB_RUN="$TB_DIR/run"
TB_ETC="$TB_DIR/etc"
TB_CREATED="$TB_DIR/created"
TB_SCRIPTS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TB_TOP="$(cd "$TB_SCRIPTS/../.." && pwd)"

WAN_DELAY_MS="${DVMS_TESTBED_WAN_DELAY_MS:-20}"
WAN_BRIDGE=dvtb-wan
MGMT_BRIDGE=dvtb-mgmt
WAN_HUB=10.77.0.254
MGMT_HUB=10.78.0.254
NOVA_PORT="${DVMS_TESTBED_NOVA_PORT:-8780}"
NOVA_ADDR="$MGMT_HUB:$NOVA_PORT"
TOXI_API="$WAN_HUB:8474"
NATS_PORT=4222
GATEWAY_PORT=7222
REGION="${DVMS_TESTBED_REGION:-RegionOne}"
TOXIPROXY_VERSION="${DVMS_TESTBED_TOXIPROXY_VERSION:-v2.5.0}"

_t0=${_t0:-$(date +%s)}
log() { printf '[%s +%4ss] testbed: %s\n' "$(date -u +%H:%M:%S)" "$(( $(date +%s) - _t0 ))" "$*"; }
die() {
  log "FAILED: $*"
  exit 1
}

# need_root: every step changes the network configuration.
need_root() {
  [ "$(id -u)" = 0 ] || die "the test bed needs root (network namespaces, veth pairs, bridges): run it as root"
}

site_ns() { echo "dvtb-s$1"; }
site_wan_ip() { echo "10.77.0.$1"; }
site_mgmt_ip() { echo "10.78.0.$1"; }
# Agent k (1-based) of site s: its compute host name.
agent_host() { echo "s$1-c$2"; }
# The toxiproxy listener every other site uses to reach site s's gateway.
site_proxy_port() { echo $(( 7300 + $1 )); }

# created KIND NAME: record an object for down.sh (before creating it, so
# that a failure half-way is still cleaned up).
created() { echo "$1 $2" >> "$TB_CREATED"; }

# run_logged WHAT LOG CMD...: run a command, its output to LOG; on failure
# say what failed and show the log's tail.
run_logged() {
  local what=$1 logf=$2
  shift 2
  if ! "$@" >>"$logf" 2>&1; then
    log "$what failed; last lines of $logf:"
    tail -n 20 "$logf" >&2 || true
    die "$what"
  fi
}

# wait_for SECONDS WHAT CMD...: poll CMD every 0.2 s until it succeeds.
wait_for() {
  local secs=$1 what=$2 deadline
  shift 2
  deadline=$(( $(date +%s) + secs ))
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || { log "timed out after ${secs}s waiting for $what"; return 1; }
    sleep 0.2
  done
}
