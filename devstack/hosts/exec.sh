#!/usr/bin/env bash
# Runs a command inside one host of the bed: its network, mount, UTS, IPC,
# PID and cgroup namespaces and its root, with a clean environment.
#   usage: exec.sh HOST CMD...      e.g. exec.sh kvm-1 virsh list --all
# Needs root (nsenter).
set -euo pipefail
# shellcheck source=devstack/hosts/lib.sh
. "$(dirname "$0")/lib.sh"
trap - ERR
[ $# -ge 2 ] || die "usage: exec.sh HOST CMD..."
[ "$(id -u)" = 0 ] || die "exec.sh must run as root (nsenter)"
hexec "$@"
