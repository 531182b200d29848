#!/usr/bin/env bash
# Proves the Debian packages as an operator installs them: builds them
# (build-deb.sh), boots a fresh Debian 12 root with systemd as PID 1, and
# there:
#   - dpkg -i dvms_*.deb creates the user dvms, /etc/dvms and /var/lib/dvms
#     (sysusers.d, tmpfiles.d), installs /usr/bin/dvms (dvms --version says
#     the build's version), the units, man page and bash completion;
#   - systemctl start dvms-agent@HOST starts an agent as user dvms;
#   - with the functional tier's cloud up (devstack/functional/up.sh; its
#     NATS, Keystone and Nova answer): the agent joins its region as HOST
#     (default: the last compute-N with a key there, which must have no
#     agent running): READY=1 (systemctl start returns, the unit is
#     active), and `dvms status` asked from outside lists HOST with the
#     build's version; then it stops on systemctl stop;
#   - dpkg -i python3-dvms-nova_*.deb: dvms_nova.weigher imports,
#     oslo-config-generator --namespace dvms_nova lists [dvms], and Nova's
#     own loader (nova-scheduler's weight_classes) loads
#     dvms_nova.weigher.DvmsWeigher by name;
#   - dpkg --purge of both leaves no unit, binary or state.
# Outside the root: pip install --no-deps --no-build-isolation of ./nova
# into a venv over the system's Python (Debian's python3-pip, python3-nova,
# no PyPI), the same three checks.
#   usage: check.sh          (needs root: overlay mount, namespaces, cgroups)
# The root: an overlay over $DVMS_PKG_BASE_ROOT (default the test bed's
# cached Debian 12 root, /tmp/dvms-hosts/roots/base: debootstrap minbase +
# systemd + Debian's nova-compute; devstack/hosts/root.sh builds it when
# missing), never written (the overlay's upper layer takes every change);
# its user dvms (the bed adds one) is removed first, so the package must
# make it. It shares this machine's network (the cloud's loopback
# addresses); every unit that would serve or talk to a cloud (nova-compute,
# libvirt) is masked. Work dir: $DVMS_PKG_DIR (default /tmp/dvms-pkg);
# DVMS_PKG_KEEP=1 leaves the root booted (pkg-exec.sh-style: nsenter -t
# $(cat $DVMS_PKG_DIR/systemd.pid) -a).
# DVMS_PKG_DEBS=DIR checks the packages in DIR instead of building them.
# DVMS_PKG_JOIN=0 skips the region join, =1 requires it (fails without a
# cloud); default: joins when the cloud answers.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
# shellcheck source=devstack/functional/client.sh
. "$top/devstack/functional/client.sh"
# shellcheck source=devstack/lib/dvms
. "$top/devstack/lib/dvms"

[ "$(id -u)" = 0 ] || die "check.sh must run as root (overlay mount, namespaces, cgroups)"
PKG_DIR="${DVMS_PKG_DIR:-/tmp/dvms-pkg}"
BASE="${DVMS_PKG_BASE_ROOT:-${DVMS_HOSTS_DIR:-/tmp/dvms-hosts}/roots/base}"
NAME=dvms-pkg
ROOT="$PKG_DIR/root"
PLOG="$PKG_DIR/check.log"
CG="dvms-pkg" # its cgroup in every hierarchy
mkdir -p "$PKG_DIR"
: > "$PLOG"

# shellcheck disable=SC2034 # read by sysroot.sh
SYSROOT_BASE=$BASE SYSROOT_DIR=$PKG_DIR SYSROOT_NAME=$NAME SYSROOT_CG=$CG
# shellcheck source=devstack/pkg/sysroot.sh
. "$here/sysroot.sh"
in_root() { sysroot_exec "$@"; }
shutdown_root() { sysroot_shutdown; }

# 0. The base root (cached) and the packages.
if [ ! -f "$BASE/.dvms-root" ]; then
  log "no Debian root at $BASE: building it (devstack/hosts/root.sh)"
  bash "$top/devstack/hosts/root.sh"
fi
shutdown_root
if [ -n "${DVMS_PKG_DEBS:-}" ]; then
  # Packages built already (build-deb.sh OUTDIR): checked as they are.
  mapfile -t debs < <(ls "$DVMS_PKG_DEBS"/dvms_*_amd64.deb "$DVMS_PKG_DEBS"/python3-dvms-nova_*_all.deb)
else
  rm -rf "$PKG_DIR/deb"
  log "building the packages (devstack/pkg/build-deb.sh)"
  mapfile -t debs < <(bash "$here/build-deb.sh" "$PKG_DIR/deb")
fi
[ "${#debs[@]}" = 2 ] || die "build-deb.sh made ${#debs[@]} packages, want 2"
version=$(dpkg-deb -f "${debs[0]}" Version)
log "packages (version $version): ${debs[*]##*/}"

# 1. The root: overlay, then what a fresh install has not (no user dvms,
# manuals installed) and what must not run here (nova-compute, libvirt).
sysroot_mount
trap '[ "${DVMS_PKG_KEEP:-0}" = 1 ] || shutdown_root' EXIT
sysroot_node_prep
install -d "$ROOT/root/debs"
cp "${debs[@]}" "$ROOT/root/debs/"

# 2. Boot: systemd as PID 1 of new PID, mount, UTS, IPC and cgroup
# namespaces, in this machine's network namespace (sysroot.sh).
sysroot_boot

# check WHAT CMD...: CMD must succeed in the root (its output in the log).
check() {
  local what=$1
  shift
  if in_root "$@" >>"$PLOG" 2>&1; then
    log "ok: $what"
  else
    fail_with_log "$what" "$PLOG"
  fi
}

# 3. dvms.
check "dpkg -i ${debs[0]##*/}" dpkg -i "/root/debs/${debs[0]##*/}"
got=$(in_root dvms --version)
[ "$got" = "dvms version $version" ] || die "dvms --version in the root says \"$got\", want \"dvms version $version\""
log "ok: dvms --version: $got"
# shellcheck disable=SC2016 # expanded by the root's shell
check "user dvms made by sysusers.d (a system user, no login)" sh -c \
  'getent passwd dvms | grep -q ":/var/lib/dvms:/usr/sbin/nologin$" && [ "$(id -u dvms)" -lt 1000 ]'
# shellcheck disable=SC2016 # expanded by the root's shell
check "/etc/dvms and /etc/dvms/keys root:dvms 0750, /var/lib/dvms dvms:dvms 0750 (tmpfiles.d)" sh -c \
  '[ "$(stat -c %U:%G:%a /etc/dvms /etc/dvms/keys /var/lib/dvms | tr "\n" " ")" = "root:dvms:750 root:dvms:750 dvms:dvms:750 " ]'
check "the units are known to systemd with /usr/bin/dvms" sh -c \
  'systemctl show -p ExecStart dvms-agent@x.service | grep -qF "argv[]=/usr/bin/dvms agent --host x " &&
   systemctl show -p ExecStart dvms-scheduler-api.service | grep -qF "argv[]=/usr/bin/dvms scheduler-api "'
check "man page dvms(1) of this version" sh -c "zcat /usr/share/man/man1/dvms.1.gz | grep -qF '.TH dvms 1 \"\" \"dvms $version\"'"
check "bash completion" bash -c '. /usr/share/bash-completion/completions/dvms && complete -p dvms | grep -q _dvms_bash_autocomplete &&
  dvms --generate-bash-completion | grep -qx agent'
check "sample config" test -s /usr/share/dvms/dvms.conf.sample

# 4. The agent: a host's key pair made there as the operator would.
join=${DVMS_PKG_JOIN:-auto}
cloud_up() {
  [ -r "$DVMS_FUNC_DIR/etc/dvms.conf" ] && [ -r "$DVMS_FUNC_DIR/nats/cert.pem" ] && port_open "$NATS_PORT" "$NATS_IP" \
    && port_open "$KEYSTONE_PORT" && port_open "$NOVA_PORT"
}
ops_status() { # dvms status of the functional region, from outside, as JSON
  DVMS_NATS_URL="nats://$NATS_IP:$NATS_PORT" DVMS_NATS_NKEY="$DVMS_FUNC_DIR/observer/ops.key" \
    DVMS_NATS_TLS_CA="$DVMS_FUNC_DIR/nats/cert.pem" DVMS_REGION="$DVMS_FUNC_REGION" \
    "$PKG_DIR/dvms" status -f json --timeout 3s 2>>"$PLOG"
}
# host_version HOST: the version HOST's agent reports in dvms status.
host_version() {
  ops_status | "$PYTHON" -c '
import json, sys
st = json.load(sys.stdin)
rows = st.get("agents") or [] if isinstance(st, dict) else st
for a in rows:  # the agents table of dvms status -f json
    if a.get("Host") == sys.argv[1] and a.get("State") != "no answer" and a.get("Version"):
        print(a["Version"])
        break
' "$1" 2>>"$PLOG" || true
}
# agent_config HOST NATS_URL NATS_AUTH KEYSTONE_URL: /etc/dvms/dvms.conf and
# /etc/openstack/clouds.yaml of the root's agent (devstack/lib/dvms's
# writer, as the DevStack plugin and the test bed), demand from an empty
# file source (no guests here), metrics on a free port (this machine's
# network), its own Raft port.
agent_config() {
  local host=$1 nats=$2 auth=$3
  install -d -m 0755 "$ROOT/etc/openstack"
  { echo "clouds:"; KEYSTONE_URL=$4 cloud_entry "$DVMS_FUNC_AGENT_CLOUD" dvms "$DVMS_FUNC_AGENT_PASSWORD" dvms; } > "$ROOT/etc/openstack/clouds.yaml"
  DVMS_KEYS_DIR=/etc/dvms/keys DVMS_NATS_NKEY_AUTH=$auth DVMS_NATS_TLS_CA="$([ "$auth" = true ] && echo /etc/dvms/nats-ca.pem)" \
    DVMS_REGION="$DVMS_FUNC_REGION" DVMS_OS_CLOUD="$DVMS_FUNC_AGENT_CLOUD" DVMS_CLOUDS_YAML=/etc/openstack/clouds.yaml \
    DVMS_NATS_URL="$nats" DVMS_MONITOR_SOURCE=file \
    DVMS_RAFT_BIND=127.0.0.1:7479 DVMS_RAFT_ADVERTISE=127.0.0.1:7479 dvms_write_config "$ROOT/etc/dvms/dvms.conf"
  sed -i "0,/^\[DEFAULT\]$/s//[DEFAULT]\nmetrics_listen = 127.0.0.1:0/; s|^source = file$|source = file\nfile_path = /var/lib/dvms/demand.json|" "$ROOT/etc/dvms/dvms.conf"
  echo '{}' > "$ROOT/var/lib/dvms/demand.json"
  check "config and keys owned as the agent needs them" sh -c "chown -R root:dvms /etc/dvms /etc/openstack/clouds.yaml &&
    chown dvms: /etc/dvms/keys/$host.key /var/lib/dvms/demand.json && chmod 0640 /etc/dvms/dvms.conf /etc/openstack/clouds.yaml"
  check "dvms config check --host $host (as the agent reads it)" runuser -u dvms -- dvms config check --host "$host" --config /etc/dvms/dvms.conf
}
if [ "$join" = 0 ] || { [ "$join" = auto ] && ! cloud_up; }; then
  [ "$join" = auto ] && log "the functional cloud does not answer ($DVMS_FUNC_DIR): the agent is started without a region to join"
  host=$NAME
  check "dvms keygen in the root" sh -c "dvms keygen --host $host --dir /etc/dvms/keys && chown dvms: /etc/dvms/keys/$host.key"
  # Nothing answers there: it waits for NATS and Keystone with backoff.
  agent_config "$host" nats://127.0.0.1:1 false http://127.0.0.1:1/v3
  check "systemctl start --no-block dvms-agent@$host" systemctl start --no-block "dvms-agent@$host"
  waiting() { # it runs as dvms and says why it is not ready yet
    local pid
    pid=$(in_root systemctl show -p MainPID --value "dvms-agent@$host")
    [ "${pid:-0}" != 0 ] && [ "$(in_root ps -o user= -p "$pid")" = dvms ] \
      && in_root systemctl show -p StatusText --value "dvms-agent@$host" | grep -q .
  }
  wait_for 60 "dvms-agent@$host runs as dvms and reports its start-up (STATUS=)" waiting \
    || { in_root systemctl status --no-pager "dvms-agent@$host" >>"$PLOG" 2>&1 || true; fail_with_log "dvms-agent@$host" "$PLOG"; }
  log "ok: dvms-agent@$host: $(in_root systemctl show -p ActiveState -p SubState -p StatusText "dvms-agent@$host" | tr '\n' ' ')"
  [ "$join" = 0 ] || log "NOT CHECKED: joining the functional tier's region (no cloud answers)"
else
  cloud_up || die "DVMS_PKG_JOIN=1 but the functional cloud does not answer ($DVMS_FUNC_DIR)"
  cp "${debs[0]}" "$PKG_DIR/dvms.deb"
  dpkg-deb --fsys-tarfile "$PKG_DIR/dvms.deb" | tar -xO ./usr/bin/dvms > "$PKG_DIR/dvms"
  chmod 0755 "$PKG_DIR/dvms"
  host=${DVMS_PKG_JOIN_HOST:-$(find "$DVMS_FUNC_DIR/keys" -maxdepth 1 -name 'compute-*.key' -printf '%f\n' | sed 's/\.key$//' | sort -t- -k2 -n | tail -n 1)}
  [ -r "$DVMS_FUNC_DIR/keys/$host.key" ] || die "no key of $host in $DVMS_FUNC_DIR/keys (the region admits its hosts' keys only)"
  if [ -n "$(host_version "$host")" ]; then
    die "$host already has an agent in the region (dvms status lists it): not starting a second one"
  fi
  # The region's keys (its NATS admits these), this host's private key,
  # the NATS CA, the agents' Keystone user: what agents.sh gives a host.
  install -d -m 0750 "$ROOT/etc/dvms/keys/operators"
  cp "$DVMS_FUNC_DIR"/keys/*.pub "$ROOT/etc/dvms/keys/"
  cp "$DVMS_FUNC_DIR"/keys/operators/*.pub "$ROOT/etc/dvms/keys/operators/" 2>/dev/null || true
  install -m 0600 "$DVMS_FUNC_DIR/keys/$host.key" "$ROOT/etc/dvms/keys/$host.key"
  install -m 0644 "$DVMS_FUNC_DIR/nats/cert.pem" "$ROOT/etc/dvms/nats-ca.pem"
  agent_config "$host" "nats://$NATS_IP:$NATS_PORT" true "$KEYSTONE_URL"
  # Type=notify: start returns once the agent sent READY=1 (NATS, Keystone
  # and Nova answered, membership and arbiter started).
  if ! in_root timeout 150 systemctl start "dvms-agent@$host" >>"$PLOG" 2>&1; then
    in_root systemctl status --no-pager "dvms-agent@$host" >>"$PLOG" 2>&1 || true
    in_root journalctl --no-pager -n 40 -u "dvms-agent@$host" >>"$PLOG" 2>&1 || true
    fail_with_log "systemctl start dvms-agent@$host (joining $DVMS_FUNC_REGION)" "$PLOG"
  fi
  log "ok: systemctl start dvms-agent@$host: $(in_root systemctl show -p ActiveState -p StatusText "dvms-agent@$host" | tr '\n' ' ')"
  seen() { [ "$(host_version "$host")" = "$version" ]; }
  wait_for 60 "dvms status (from outside) lists $host with version $version" seen \
    || { ops_status >>"$PLOG" || true; fail_with_log "the agent joining the region" "$PLOG"; }
  log "ok: $host joined region $DVMS_FUNC_REGION, version $version"
  check "systemctl stop dvms-agent@$host (graceful)" timeout 160 systemctl stop "dvms-agent@$host"
  check "dvms-agent@$host stopped without failure" sh -c "[ \"\$(systemctl show -p Result --value dvms-agent@$host)\" = success ]"
fi

# 5. The weigher's package, with the root's Nova (Debian's python3-nova).
check "dpkg -i ${debs[1]##*/}" dpkg -i "/root/debs/${debs[1]##*/}"
check "python3 -c 'import dvms_nova.weigher' (version $version)" \
  python3 -c "import dvms_nova, dvms_nova.weigher; assert dvms_nova.__version__ == '$version', dvms_nova.__version__"
check "oslo-config-generator --namespace dvms_nova lists [dvms] weight_multiplier = 1.0" sh -c \
  'oslo-config-generator --namespace dvms_nova 2>/dev/null | tee /dev/stderr | grep -qx "#weight_multiplier = 1.0"'
nova_loads='from nova.scheduler import weights
got = weights.HostWeightHandler().get_matching_classes(["dvms_nova.weigher.DvmsWeigher"])
assert [c.__module__ + "." + c.__name__ for c in got] == ["dvms_nova.weigher.DvmsWeigher"], got'
check "Nova's weigher loader (nova-scheduler's weight_classes) loads dvms_nova.weigher.DvmsWeigher by name" python3 -c "$nova_loads"

# 6. Removal.
check "dpkg --purge python3-dvms-nova dvms" dpkg --purge python3-dvms-nova dvms
check "nothing left: binary, units, state, Python package" sh -c \
  '! command -v dvms && [ ! -e /lib/systemd/system/dvms-agent@.service ] && [ ! -e /var/lib/dvms ] && ! python3 -c "import dvms_nova"'

# 7. pip, outside the root: a venv over the system's Python (Nova's), no index.
if /usr/bin/python3 -c 'import nova.scheduler.weights, oslo_config' 2>/dev/null; then
  venv="$PKG_DIR/venv"
  rm -rf "$venv" "$PKG_DIR/nova-src"
  mkdir -p "$PKG_DIR/nova-src"
  cp -r "$top/nova/pyproject.toml" "$top/nova/README.rst" "$top/nova/dvms_nova" "$PKG_DIR/nova-src/"
  /usr/bin/python3 -m venv --system-site-packages --without-pip "$venv"
  run_logged "pip install --no-deps --no-build-isolation --no-index ./nova (into $venv)" "$PLOG" \
    "$venv/bin/python" -m pip install --no-deps --no-build-isolation --no-index "$PKG_DIR/nova-src"
  (cd / && "$venv/bin/python" -c "import dvms_nova.weigher, sys; assert dvms_nova.weigher.__file__.startswith('$venv/'), dvms_nova.weigher.__file__") \
    || die "pip's dvms_nova is not the one imported"
  (cd / && "$venv/bin/python" -m oslo_config.generator --namespace dvms_nova 2>/dev/null | grep -qx "#weight_multiplier = 1.0") \
    || die "oslo-config-generator (pip install) does not list [dvms] weight_multiplier"
  (cd / && "$venv/bin/python" -c "$nova_loads") || die "Nova's loader does not load the pip-installed weigher"
  log "ok: pip install ./nova: imports, oslo-config-generator lists [dvms], Nova's loader loads it"
else
  log "NOT CHECKED: pip install ./nova (no python3-nova / python3-oslo.config on this machine: devstack/functional/install.sh installs them)"
fi
log "packages checked: ${debs[*]##*/}"
