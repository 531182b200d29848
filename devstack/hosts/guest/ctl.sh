#!/usr/bin/env bash
# ctl.sh SERVER cpu CORES | mem MB MBPS | idle | uptime
# ctl.sh --domain DOMAIN [--in HOST] ...   (a libvirt domain of this machine's
#                                          libvirtd, or of bed host HOST's)
#
# Tells a burner guest what to do through its QEMU guest agent channel and
# prints the guest's answer, one JSON line:
#   {"version":"dvms-burner 1","uptime_s":12.3,"cores":0.5,"mem_mb":0,"mem_mbps":0,"dirtied_mb":0}
#   cpu CORES     burn CORES cores from now on (fractions allowed; 0 stops)
#   mem MB MBPS   hold MB MiB and write to its pages at MBPS MiB/s (0 0 frees)
#   idle          stop both
#   uptime        change nothing, report (uptime_s is the guest's /proc/uptime)
# SERVER is a Nova server name or id: its host and libvirt domain come from
# `openstack server show` (admin: OS-EXT-SRV-ATTR:*), and virsh runs inside
# that host with devstack/hosts/exec.sh (two openstack CLI start-ups: callers
# that know the domain and the host pass --domain and --in instead).
set -euo pipefail
HOSTS_SCRIPTS="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

usage() {
  echo "usage: $0 SERVER|--domain DOMAIN [--in HOST] cpu CORES | mem MB MBPS | idle | uptime" >&2
  exit 2
}
die() {
  echo "ctl.sh: $*" >&2
  exit 1
}
number='^[0-9]+([.][0-9]+)?$'

[ $# -ge 2 ] || usage
local_domain="" in_host=""
if [ "$1" = "--domain" ]; then
  [ $# -ge 3 ] || usage
  local_domain=$2
  shift 2
  if [ "$1" = "--in" ]; then
    [ $# -ge 3 ] || usage
    in_host=$2
    shift 2
  fi
else
  server=$1
  shift
fi
case "$1" in
cpu)
  if ! { [ $# -eq 2 ] && [[ $2 =~ $number ]]; }; then die "cpu needs CORES, a number >= 0 (got '${2:-}')"; fi
  cmd="{\"execute\":\"dvms-cpu\",\"arguments\":{\"cores\":$2}}" ;;
mem)
  if ! { [ $# -eq 3 ] && [[ $2 =~ ^[0-9]+$ ]] && [[ $3 =~ $number ]]; }; then
    die "mem needs MB (whole MiB) and MBPS (MiB/s), numbers >= 0 (got '${2:-}' '${3:-}')"
  fi
  cmd="{\"execute\":\"dvms-mem\",\"arguments\":{\"mb\":$2,\"mbps\":$3}}" ;;
idle)
  [ $# -eq 1 ] || usage
  cmd='{"execute":"dvms-idle"}' ;;
uptime)
  [ $# -eq 1 ] || usage
  cmd='{"execute":"dvms-status"}' ;;
*) usage ;;
esac

virsh_args=(qemu-agent-command --timeout 10)
if [ -n "$in_host" ]; then
  reply=$("$HOSTS_SCRIPTS/exec.sh" "$in_host" virsh "${virsh_args[@]}" "$local_domain" "$cmd") ||
    die "virsh qemu-agent-command $local_domain in host $in_host failed"
elif [ -n "$local_domain" ]; then
  reply=$(virsh "${virsh_args[@]}" "$local_domain" "$cmd") || die "virsh qemu-agent-command $local_domain failed"
else
  DVMS_FUNC_DIR="${DVMS_FUNC_DIR:-/tmp/dvms-functional}"
  export OS_CLIENT_CONFIG_FILE="${OS_CLIENT_CONFIG_FILE:-$DVMS_FUNC_DIR/clouds.yaml}"
  export OS_CLOUD="${OS_CLOUD:-dvms-functional}"
  where=$(timeout 60 openstack server show "$server" -f json \
    -c OS-EXT-SRV-ATTR:host -c OS-EXT-SRV-ATTR:instance_name -c status) ||
    die "openstack server show $server failed"
  read -r host domain status < <(/usr/bin/python3 -c '
import json, sys
s = json.load(sys.stdin)
print(s.get("OS-EXT-SRV-ATTR:host") or "-", s.get("OS-EXT-SRV-ATTR:instance_name") or "-", s.get("status"))' <<<"$where")
  if [ "$host" = "-" ] || [ "$domain" = "-" ]; then
    die "server $server has no host or libvirt domain (status $status; admin credentials needed)"
  fi
  reply=$("$HOSTS_SCRIPTS/exec.sh" "$host" virsh "${virsh_args[@]}" "$domain" "$cmd") ||
    die "virsh qemu-agent-command $domain in host $host failed (server $server, status $status)"
fi
# virsh prints the agent's {"return": ...}; print what it returned.
ret=${reply#\{\"return\":}
[ "$ret" != "$reply" ] || die "unexpected reply: $reply"
echo "${ret%\}}"
