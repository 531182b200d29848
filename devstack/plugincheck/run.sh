#!/usr/bin/env bash
# Runs the dvms DevStack plugin (devstack/plugin.sh) with DevStack's own
# function library, phase by phase, on a fresh Debian 12 root booted with
# systemd as PID 1 (devstack/pkg/sysroot.sh), as a node of the functional
# tier's Debian Zed cloud (devstack/functional/up.sh must have brought it
# up):
#   prereqs      DevStack's install_package of devstack/files/debs/dvms
#   install      the dvms .deb (DVMS_PACKAGE, built by devstack/pkg/build-deb.sh;
#                Debian 12's Go predates GOTOOLCHAIN) and Debian's nats-server
#   post-config  /etc/dvms/dvms.conf, the key pair of DVMS_AGENT_HOST (a
#                compute host of the cloud), /etc/nats-server.conf
#   extra        nats-server.service and devstack@dvms-agent start; checked:
#                both active and enabled, one NATS server, on the port
#                written; the agent's unit Restart=on-failure (SIGKILL: it
#                comes back) and ExecReload (systemctl reload: still
#                active); /healthz answers; `dvms status` lists the host;
#                then a second node's agent (HOST_B, started here, keys
#                exchanged as the plugin's README says) joins, a server is
#                booted on HOST_A and `dvms drain HOST_A --wait` empties it
#                through the agents (the server ends on HOST_B)
#   unstack      no dvms unit, no nats-server, no dvms process runs
#   clean        no unit file, config, key or binary left; Debian's
#                /etc/nats-server.conf as it was; no file the phases made
#                is left in the root (its overlay's upper layer, compared
#                with the one after prereqs)
# Each phase's time is printed; its log is $DVMS_PLUGINCHECK_DIR/PHASE.log.
#
#   usage: DVMS_DEVSTACK_DIR=/path/to/devstack run.sh    (root)
# DevStack is not part of dvms and is not fetched here: without
# DVMS_DEVSTACK_DIR (a checkout with stack.sh and functions-common) this
# says NOT RUN and exits 0, or fails with DVMS_DEVSTACK_REQUIRED=1; the same
# when the functional cloud does not answer.
# Settings: DVMS_PLUGINCHECK_DIR (/tmp/dvms-plugincheck),
# DVMS_PLUGINCHECK_HOSTS="HOST_A HOST_B" (default the cloud's last two
# compute hosts; both must be empty, with no agent), DVMS_PLUGINCHECK_DEBS
# (a dir with dvms_*.deb: skips build-deb.sh), DVMS_PLUGINCHECK_NATS_PORT
# (4230), DVMS_PLUGINCHECK_KEEP=1 (leave the root booted),
# DVMS_PLUGINCHECK_INSTALL=source (the plugin builds dvms with this
# machine's Go, copied into the root; DVMS_PLUGINCHECK_GOTOOLCHAIN, default
# auto, is the plugin's DVMS_GOTOOLCHAIN),
# DVMS_PLUGINCHECK_UPTO=prereqs|install|post-config (stack up to that phase,
# then unstack and clean; no cloud needed, DVMS_PLUGINCHECK_HOSTS names the
# hosts).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
# shellcheck source=devstack/functional/client.sh
. "$top/devstack/functional/client.sh"
# shellcheck source=devstack/lib/dvms
. "$top/devstack/lib/dvms"

not_run() {
  printf '\n*** NOT RUN: the DevStack plugin check: %s ***\n\n' "$*"
  [ "${DVMS_DEVSTACK_REQUIRED:-0}" = 1 ] && die "DVMS_DEVSTACK_REQUIRED=1: $*"
  exit 0
}
DEVSTACK=${DVMS_DEVSTACK_DIR:-}
[ -n "$DEVSTACK" ] || not_run "DVMS_DEVSTACK_DIR is not set (a DevStack checkout; dvms does not fetch DevStack)"
if [ ! -f "$DEVSTACK/stack.sh" ] || [ ! -f "$DEVSTACK/functions-common" ]; then
  not_run "DVMS_DEVSTACK_DIR=$DEVSTACK is not a DevStack checkout"
fi
[ "$(id -u)" = 0 ] || die "run.sh must run as root (overlay mount, namespaces, cgroups)"
cloud_up() { [ -r "$DVMS_FUNC_DIR/clouds.yaml" ] && port_open "$KEYSTONE_PORT" && port_open "$NOVA_PORT"; }
UPTO=${DVMS_PLUGINCHECK_UPTO:-clean}
case $UPTO in
  prereqs | install | post-config) [ -n "${DVMS_PLUGINCHECK_HOSTS:-}" ] || die "DVMS_PLUGINCHECK_UPTO=$UPTO needs DVMS_PLUGINCHECK_HOSTS" ;;
  clean) cloud_up || not_run "the functional cloud does not answer ($DVMS_FUNC_DIR: devstack/functional/up.sh)" ;;
  *) die "DVMS_PLUGINCHECK_UPTO=$UPTO: one of prereqs, install, post-config, clean" ;;
esac
# upto PHASE: false when DVMS_PLUGINCHECK_UPTO says to stop stacking here
# (unstack and clean follow).
upto() {
  if [ "$UPTO" = "$1" ]; then
    log "stacked up to $1 (DVMS_PLUGINCHECK_UPTO): unstack and clean"
    summary+=("(stacked up to $1: DVMS_PLUGINCHECK_UPTO)")
    return 1
  fi
}

WORK=${DVMS_PLUGINCHECK_DIR:-/tmp/dvms-plugincheck}
NATS_P=${DVMS_PLUGINCHECK_NATS_PORT:-4230}
mkdir -p "$WORK"
CLOG="$WORK/checks.log"
: > "$CLOG"
# shellcheck disable=SC2034 # read by sysroot.sh
SYSROOT_BASE="${DVMS_PLUGINCHECK_BASE_ROOT:-${DVMS_HOSTS_DIR:-/tmp/dvms-hosts}/roots/base}" SYSROOT_DIR=$WORK \
  SYSROOT_NAME=dvms-devstack SYSROOT_CG=dvms-plugincheck
# shellcheck source=devstack/pkg/sysroot.sh
. "$top/devstack/pkg/sysroot.sh"
ROOT=$WORK/root
declare -a summary=()

# phase NAME: devstack/plugincheck/phase.sh NAME in the root, as the stack
# user (stack.sh refuses root), timed.
phase() {
  local t0=$SECONDS
  log "phase $1 (log $WORK/$1.log)"
  if ! sysroot_exec runuser -u stack -- env HOME=/opt/stack USER=stack TOP_DIR=/opt/stack/devstack \
    bash /opt/stack/dvms/devstack/plugincheck/phase.sh "$1" > "$WORK/$1.log" 2>&1; then
    summary+=("$1: FAILED after $((SECONDS - t0)) s")
    fail_with_log "phase $1" "$WORK/$1.log"
  fi
  summary+=("$1: ok, $((SECONDS - t0)) s")
  log "ok: phase $1 ($((SECONDS - t0)) s)"
}
# check WHAT CMD...: CMD must succeed in the root.
check() {
  local what=$1
  shift
  if sysroot_exec "$@" >>"$CLOG" 2>&1; then
    log "ok: $what"
    summary+=("  ok: $what")
  else
    summary+=("  FAILED: $what")
    fail_with_log "$what" "$CLOG"
  fi
}
# upper_files: what the phases changed in the root (its overlay's upper
# layer), less what any running Debian changes by itself.
upper_files() {
  (cd "$WORK/upper" && find . \( -type f -o -type l \) -printf '%P\n') \
    | grep -Ev '^(var/log|var/cache|var/lib/apt|var/lib/dpkg|var/lib/systemd|var/lib/private/systemd|var/tmp|tmp|run|opt/stack/(devstack|go|\.cache|\.config|\.bash|\.profile)|usr/local/go|usr/local/share/ca-certificates|etc/ssl/certs)(/|$)|^etc/(ld\.so\.cache|\.pwd\.lock|(passwd|group|shadow|gshadow|subuid|subgid)-?)$' \
    | sort || true
}

ops_env() { echo "DVMS_NATS_URL=nats://127.0.0.1:$NATS_P DVMS_REGION=$DVMS_FUNC_REGION"; }
# shellcheck disable=SC2046 # ops_env is VAR=VALUE words
ops() { env $(ops_env) "$WORK/dvms" "$@"; }
# listed HOST: dvms status (from outside, through the plugin's NATS) lists
# HOST's agent as answering.
listed() {
  ops status -f json --timeout 3s 2>>"$CLOG" | "$PYTHON" -c '
import json, sys
st = json.load(sys.stdin)
rows = st.get("agents") or [] if isinstance(st, dict) else st
sys.exit(0 if any(a.get("Host") == sys.argv[1] and a.get("State") != "no answer" for a in rows) else 1)
' "$1"
}
# (2.91: what the agents use; the CLI needs >= 2.37 for --nic none.)
cloud_env() { echo "OS_CLIENT_CONFIG_FILE=$DVMS_FUNC_DIR/clouds.yaml OS_CLOUD=$DVMS_FUNC_CLOUD OS_COMPUTE_API_VERSION=2.91"; }
# shellcheck disable=SC2046 # cloud_env is VAR=VALUE words
osc() { env $(cloud_env) openstack "$@"; }

t_start=$SECONDS
# 0. The hosts this node's agent and the second node's speak for: empty,
# enabled, no agent.
read -r HOST_A HOST_B <<<"${DVMS_PLUGINCHECK_HOSTS:-$(osc compute service list --service nova-compute -f value -c Host | sort -t- -k2 -n | tail -n 2 | tac | tr '\n' ' ')}"
if [ -z "$HOST_A" ] || [ -z "$HOST_B" ]; then die "no two compute hosts in the functional cloud"; fi
for h in "$HOST_A" "$HOST_B"; do
  [ "$UPTO" != clean ] || [ -z "$(osc server list --all-projects --host "$h" -f value -c ID)" ] || die "$h has servers: the check needs two empty hosts (DVMS_PLUGINCHECK_HOSTS)"
done
log "this node's agent: $HOST_A; the second node's: $HOST_B; the plugin's NATS: 127.0.0.1:$NATS_P"
if port_open "$NATS_P" 127.0.0.1 || port_open 9464 127.0.0.1; then die "port $NATS_P or 9464 (the agent's /healthz) is taken on this machine"; fi

# 1. The package (Debian 12's Go is 1.19: a stock node installs the .deb),
# or, with DVMS_PLUGINCHECK_INSTALL=source, this machine's Go copied into
# the root (/usr/local/go) for the plugin's go build.
INSTALL=${DVMS_PLUGINCHECK_INSTALL:-package}
t0=$SECONDS
if [ "$INSTALL" = source ]; then
  deb=""
elif [ "$INSTALL" != package ]; then
  die "DVMS_PLUGINCHECK_INSTALL=$INSTALL: package or source"
elif [ -n "${DVMS_PLUGINCHECK_DEBS:-}" ]; then
  deb=$(find "$DVMS_PLUGINCHECK_DEBS" -maxdepth 1 -name 'dvms_*_amd64.deb' | sort | tail -n 1)
else
  rm -rf "$WORK/deb"
  log "building the packages (devstack/pkg/build-deb.sh)"
  deb=$(bash "$top/devstack/pkg/build-deb.sh" "$WORK/deb" | grep '/dvms_.*_amd64\.deb$')
fi
if [ -n "$deb" ]; then
  dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/bin/dvms > "$WORK/dvms"
  chmod 0755 "$WORK/dvms"
  summary+=("package: $(basename "$deb"), $((SECONDS - t0)) s")
fi

# 2. The root: DevStack's checkout and dvms' (as DevStack clones them into
# $DEST), local.conf, nova-compute and libvirt masked (the cloud's compute
# hosts run elsewhere); booted.
t0=$SECONDS
sysroot_shutdown
sysroot_mount
trap '[ "${DVMS_PLUGINCHECK_KEEP:-0}" = 1 ] || sysroot_shutdown; [ -z "${b_pid:-}" ] || kill "$b_pid" 2>/dev/null || true' EXIT
sysroot_node_prep
# A node knows its own name (DevStack asks `hostname -f`).
printf '127.0.1.1\t%s\n' "$SYSROOT_NAME" >> "$ROOT/etc/hosts"
# The root shares this machine's network: no package starts its daemon
# when installed (Debian's nats-server would take 127.0.0.1:4222, the
# functional cloud's NATS port); the plugin starts what it needs.
printf '#!/bin/sh\nexit 101\n' > "$ROOT/usr/sbin/policy-rc.d"
chmod 0755 "$ROOT/usr/sbin/policy-rc.d"
install -d "$ROOT/opt/stack/devstack" "$ROOT/opt/stack/dvms" "$ROOT/opt/stack/debs"
(cd "$DEVSTACK" && tar --exclude=.git -cf - .) | tar -xf - -C "$ROOT/opt/stack/devstack"
(cd "$top" && git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf -) | tar -xf - -C "$ROOT/opt/stack/dvms"
if [ -n "$deb" ]; then
  cp "$deb" "$ROOT/opt/stack/debs/"
  install_conf="DVMS_PACKAGE=/opt/stack/debs/$(basename "$deb")"
else
  goroot=$(go env GOROOT) || die "DVMS_PLUGINCHECK_INSTALL=source: no go on this machine"
  cp -a "$goroot" "$ROOT/usr/local/go"
  # Go fetches modules and toolchains over HTTPS: the node trusts the
  # local CAs this machine trusts, as any node on its network must.
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    install -d "$ROOT/usr/local/share/ca-certificates"
    cp /usr/local/share/ca-certificates/*.crt "$ROOT/usr/local/share/ca-certificates/"
    chroot "$ROOT" update-ca-certificates >/dev/null
  fi
  install_conf="DVMS_GO=/usr/local/go/bin/go
DVMS_GOTOOLCHAIN=${DVMS_PLUGINCHECK_GOTOOLCHAIN:-auto}"
fi
cat > "$ROOT/opt/stack/devstack/local.conf" <<EOT
[[local|localrc]]
# A compute node of the functional tier's cloud (Keystone, Nova elsewhere),
# which also runs the dvms region's NATS.
DEST=/opt/stack
HOST_IP=127.0.0.1
SERVICE_HOST=127.0.0.1
SERVICE_PASSWORD=$DVMS_FUNC_PASSWORD
REGION_NAME=$DVMS_FUNC_REGION
VIRT_DRIVER=fake
disable_all_services
enable_service n-cpu
enable_plugin dvms file:///opt/stack/dvms main
$install_conf
DVMS_AGENT_HOST=$HOST_A
DVMS_AUTH_URL=$KEYSTONE_URL
DVMS_AGENT_PASSWORD=$DVMS_FUNC_AGENT_PASSWORD
DVMS_NATS_PORT=$NATS_P
DVMS_RAFT_BIND=127.0.0.1:7430
DVMS_RAFT_ADVERTISE=127.0.0.1:7430
EOT
sysroot_boot
check "DevStack's tools/create-stack-user.sh (user stack, passwordless sudo)" \
  env TOP_DIR=/opt/stack/devstack bash /opt/stack/devstack/tools/create-stack-user.sh
check "/opt/stack owned by stack" chown -R stack:stack /opt/stack
summary+=("root booted, stack user: $((SECONDS - t0)) s")

# 3. The phases: stack (up to DVMS_PLUGINCHECK_UPTO) and what each left.
stack_phases() {
  phase prereqs
  check "files/debs/dvms installed (ca-certificates, git, openssl; golang-go is dist:trixie,noble,resolute)" sh -c \
    'dpkg -s ca-certificates git openssl >/dev/null && ! dpkg -s golang-go >/dev/null 2>&1'
  before=$(upper_files)
  upto prereqs || return 0
  phase install
  if [ -n "$deb" ]; then
    check "dvms from the package, nats-server from Debian" sh -c 'dpkg -s dvms nats-server >/dev/null && /usr/bin/dvms --version'
  else
    check "dvms built by go build (GOTOOLCHAIN=${DVMS_PLUGINCHECK_GOTOOLCHAIN:-auto}), nats-server from Debian" sh -c \
      'dpkg -s nats-server >/dev/null && /usr/local/bin/dvms --version'
    cp "$ROOT/usr/local/bin/dvms" "$WORK/dvms"
  fi
  upto install || return 0
  nats_orig=$(md5sum < "$ROOT/etc/nats-server.conf") # Debian's, before post-config
  phase post-config
  check "the key pair of $HOST_A (DVMS_AGENT_HOST), not of the hostname" sh -c \
    "test -s /etc/dvms/keys/$HOST_A.key && test -s /etc/dvms/keys/$HOST_A.pub && ! ls /etc/dvms/keys/dvms-devstack.* 2>/dev/null"
  check "nats-server.conf (Debian's file) says port $NATS_P" grep -qx "port: $NATS_P" /etc/nats-server.conf
  upto post-config || return 0
  # The second node: its key pair, exchanged with this node's before either
  # agent starts (README: copy every node's HOST.pub into each keys_dir).
  b_dir=$WORK/node-b
  rm -rf "$b_dir"
  install -d -m 0700 "$b_dir/keys"
  "$WORK/dvms" keygen --host "$HOST_B" --dir "$b_dir/keys" >/dev/null
  cp "$ROOT/etc/dvms/keys/$HOST_A.pub" "$b_dir/keys/"
  install -m 0644 "$b_dir/keys/$HOST_B.pub" "$ROOT/etc/dvms/keys/$HOST_B.pub"
  phase extra

  # 4. What extra started.
  check "nats-server.service and devstack@dvms-agent.service active and enabled" sh -c \
    'systemctl is-active nats-server devstack@dvms-agent && systemctl is-enabled nats-server devstack@dvms-agent'
  check "one NATS server in the root: the package's unit, its config, port $NATS_P" sh -c \
    "[ \$(pgrep -c -x nats-server) = 1 ] && systemctl show -p ExecStart nats-server | grep -qF 'nats-server -c /etc/nats-server.conf' &&
     ss -Hltn 'sport = :$NATS_P' | grep -q ."
  # shellcheck disable=SC2016 # expanded by the root's shell
  check "devstack@dvms-agent: Type=notify, Restart=on-failure, RestartPreventExitStatus=78, ExecReload kill -HUP, User=stack" sh -c \
    'u=devstack@dvms-agent.service; [ "$(systemctl show -p Type --value $u)" = notify ] &&
     [ "$(systemctl show -p Restart --value $u)" = on-failure ] &&
     systemctl show -p RestartPreventExitStatus --value $u | grep -qw 78 &&
     systemctl show -p ExecReload $u | grep -q "kill -HUP" && [ "$(systemctl show -p User --value $u)" = stack ]'
  wait_for 30 "the agent's /healthz answers" http_ok "http://127.0.0.1:9464/healthz" || fail_with_log "/healthz" "$CLOG"
  summary+=("  ok: /healthz answers")
  wait_for 60 "dvms status lists $HOST_A" listed "$HOST_A" || fail_with_log "dvms status" "$CLOG"
  summary+=("  ok: dvms status lists $HOST_A")
  check "systemctl reload devstack@dvms-agent (re-reads its config, stays active)" sh -c \
    'systemctl reload devstack@dvms-agent && systemctl is-active devstack@dvms-agent'
  pid0=$(sysroot_exec systemctl show -p MainPID --value devstack@dvms-agent)
  check "SIGKILL of the agent" systemctl kill -s KILL devstack@dvms-agent
  restarted() {
    local pid
    pid=$(sysroot_exec systemctl show -p MainPID --value devstack@dvms-agent)
    [ "$(sysroot_exec systemctl is-active devstack@dvms-agent)" = active ] && [ "${pid:-0}" != 0 ] && [ "$pid" != "$pid0" ]
  }
  wait_for 90 "systemd restarted the agent (Restart=on-failure)" restarted || fail_with_log "restart" "$CLOG"
  summary+=("  ok: killed, restarted by systemd: NRestarts=$(sysroot_exec systemctl show -p NRestarts --value devstack@dvms-agent)")

  # 5. The second node's agent, then a drain through the agents.
  t0=$SECONDS
  { echo "clouds:"; cloud_entry "$DVMS_FUNC_AGENT_CLOUD" dvms "$DVMS_FUNC_AGENT_PASSWORD" dvms; } > "$b_dir/clouds.yaml"
  DVMS_KEYS_DIR="$b_dir/keys" DVMS_REGION="$DVMS_FUNC_REGION" DVMS_OS_CLOUD="$DVMS_FUNC_AGENT_CLOUD" \
    DVMS_CLOUDS_YAML="$b_dir/clouds.yaml" DVMS_NATS_URL="nats://127.0.0.1:$NATS_P" DVMS_MONITOR_SOURCE=nova-diagnostics \
    DVMS_RAFT_BIND=127.0.0.1:7431 DVMS_RAFT_ADVERTISE=127.0.0.1:7431 dvms_write_config "$b_dir/dvms.conf"
  sed -i "0,/^\[DEFAULT\]$/s//[DEFAULT]\nmetrics_listen = 127.0.0.1:0/" "$b_dir/dvms.conf"
  "$WORK/dvms" agent --host "$HOST_B" --config "$b_dir/dvms.conf" > "$WORK/agent-$HOST_B.log" 2>&1 9>&- &
  b_pid=$!
  wait_for 90 "dvms status lists $HOST_B" listed "$HOST_B" || fail_with_log "the second node's agent" "$WORK/agent-$HOST_B.log"
  id=$(osc server create --flavor dvms.tiny --image dvms-tiny --nic none --availability-zone "nova:$HOST_A" \
    -f value -c id dvms-plugincheck 2>>"$CLOG") || fail_with_log "booting a server on $HOST_A" "$CLOG"
  active() { [ "$(osc server show "$id" -f value -c status)" = ACTIVE ]; }
  wait_for 180 "server $id ACTIVE" active || fail_with_log "booting a server on $HOST_A" "$CLOG"
  trap '[ "${DVMS_PLUGINCHECK_KEEP:-0}" = 1 ] || sysroot_shutdown; kill "$b_pid" 2>/dev/null || true; osc server delete "$id" >/dev/null 2>&1 || true; osc compute service set --enable "$HOST_A" nova-compute >/dev/null 2>&1 || true' EXIT
  log "server $id on $HOST_A"
  t1=$SECONDS
  # shellcheck disable=SC2046 # cloud_env is VAR=VALUE words
  if ! env $(cloud_env) $(ops_env) "$WORK/dvms" drain "$HOST_A" --wait --poll 2s --stall 120s >>"$CLOG" 2>&1; then
    fail_with_log "dvms drain $HOST_A --wait" "$CLOG"
  fi
  where=$(osc server show "$id" -f value -c OS-EXT-SRV-ATTR:host)
  [ "$where" = "$HOST_B" ] || die "after the drain the server is on $where, want $HOST_B"
  summary+=("  ok: dvms drain $HOST_A --wait: emptied in $((SECONDS - t1)) s, the server moved to $HOST_B by the agents")
  # shellcheck disable=SC2046 # cloud_env is VAR=VALUE words
  env $(cloud_env) "$WORK/dvms" undrain "$HOST_A" >>"$CLOG" 2>&1 || fail_with_log "dvms undrain" "$CLOG"
  osc server delete --wait "$id" >>"$CLOG" 2>&1 || fail_with_log "deleting the server" "$CLOG"
  kill "$b_pid"
  wait "$b_pid" 2>/dev/null || true
  summary+=("drain (second agent, boot, drain, undrain, delete): $((SECONDS - t0)) s")
}
stack_phases

# 6. unstack, clean.
phase unstack
check "after unstack: no dvms unit or nats-server active or enabled, no dvms or nats-server process" sh -c \
  '! systemctl is-active -q nats-server devstack@dvms-agent && ! systemctl is-enabled -q devstack@dvms-agent &&
   ! systemctl is-enabled -q nats-server && ! pgrep -x dvms && ! pgrep -x nats-server'
phase clean
check "after clean: no unit file, /etc/dvms, dvms package or binary" sh -c \
  '! ls /etc/systemd/system/devstack@dvms-* 2>/dev/null && ! systemctl cat devstack@dvms-agent.service 2>/dev/null &&
   [ ! -e /etc/dvms ] && ! dpkg -s dvms 2>/dev/null | grep -q "^Status: install" && [ ! -e /usr/bin/dvms ] && [ ! -e /usr/local/bin/dvms ]'
if [ -n "${nats_orig:-}" ]; then
  if [ "$(md5sum < "$ROOT/etc/nats-server.conf")" != "$nats_orig" ] || [ -e "$ROOT/etc/nats-server.conf.dvms-orig" ]; then
    die "after clean /etc/nats-server.conf is not Debian's"
  fi
  summary+=("  ok: /etc/nats-server.conf is Debian's again")
fi
# What the install phase's nats-server package brought stays (DevStack
# keeps the packages it installs).
{ sysroot_exec dpkg -L nats-server 2>/dev/null || true; } | sed 's|^/||' \
  | awk '{ print } /^(lib|bin|sbin)\// { print "usr/" $0 }' | sort > "$WORK/nats-server.files" # merged /usr
left=$(comm -13 <(echo "$before") <(upper_files) | comm -23 - "$WORK/nats-server.files")
[ -z "$left" ] || die "after clean these files the phases made are left in the root: $left"
summary+=("  ok: no file the phases made is left in the root")

log "the DevStack plugin check passed in $((SECONDS - t_start)) s:"
printf '  %s\n' "${summary[@]}"
