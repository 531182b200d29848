#!/usr/bin/env bash
# Shared helpers and settings of the functional harness (sourced, not run).
# Everything up.sh creates lives under $DVMS_FUNC_DIR: etc/ (configs),
# state/ (databases, images, instance dirs), run/ (pid files), logs/.
# shellcheck disable=SC2034  # variables used by the scripts that source this

DVMS_FUNC_DIR="${DVMS_FUNC_DIR:-/tmp/dvms-functional}"
LOG_DIR="$DVMS_FUNC_DIR/logs"
RUN_DIR="$DVMS_FUNC_DIR/run"
ETC_DIR="$DVMS_FUNC_DIR/etc"
STATE_DIR="$DVMS_FUNC_DIR/state"
PY_DIR="$DVMS_FUNC_DIR/python"
HARNESS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$LOG_DIR" "$RUN_DIR" "$ETC_DIR" "$STATE_DIR" "$PY_DIR"

# Loopback ports (override if one is taken on your machine).
DVMS_FUNC_HOST_IP="${DVMS_FUNC_HOST_IP:-127.0.0.1}"
DB_PORT="${DVMS_FUNC_DB_PORT:-3306}"
RABBIT_PORT="${DVMS_FUNC_RABBIT_PORT:-5672}"
EPMD_PORT="${DVMS_FUNC_EPMD_PORT:-4369}"
KEYSTONE_PORT="${DVMS_FUNC_KEYSTONE_PORT:-5000}"
PLACEMENT_PORT="${DVMS_FUNC_PLACEMENT_PORT:-8778}"
GLANCE_PORT="${DVMS_FUNC_GLANCE_PORT:-9292}"
NOVA_PORT="${DVMS_FUNC_NOVA_PORT:-8774}"
NEUTRON_PORT="${DVMS_FUNC_NEUTRON_PORT:-9696}"
NATS_PORT="${DVMS_FUNC_NATS_PORT:-4222}"
# The functional tests' NATS: only agents on this machine's root network
# namespace use it, so it stays on loopback whatever DVMS_FUNC_HOST_IP is
# (the real-hypervisor test bed, devstack/hosts, runs its own NATS on
# 10.79.0.1:4222).
NATS_IP="${DVMS_FUNC_NATS_IP:-127.0.0.1}"
# dvms scheduler-api: nova-scheduler's DvmsWeigher asks it here; the
# functional tests start and stop it (it is not part of the cloud).
SCHEDAPI_PORT="${DVMS_FUNC_SCHEDAPI_PORT:-8095}"

# One password for every service account: a throw-away cloud on loopback.
DVMS_FUNC_PASSWORD="${DVMS_FUNC_PASSWORD:-dvms-secret}"
DVMS_FUNC_REGION="${DVMS_FUNC_REGION:-RegionOne}"
DVMS_FUNC_CLOUD="dvms-functional"
# The agents' own cloud in clouds.yaml: keystone user dvms with only the
# role dvms, which etc/dvms/policy grants what an agent needs.
DVMS_FUNC_AGENT_CLOUD="dvms-agent"
DVMS_FUNC_AGENT_PASSWORD="${DVMS_FUNC_AGENT_PASSWORD:-dvms-agent-secret}"
# The system Python that the OpenStack packages use (a pyenv or venv python3
# earlier on PATH lacks their modules).
PYTHON=/usr/bin/python3
DVMS_FUNC_TIMEOUT="${DVMS_FUNC_TIMEOUT:-300}"

# Capacity of every fake compute host (per-host override: DVMS_FUNC_CAPACITY_<n>="vcpus:ram_mb:disk_gb").
DVMS_FUNC_HOST_VCPUS="${DVMS_FUNC_HOST_VCPUS:-8}"
DVMS_FUNC_HOST_RAM_MB="${DVMS_FUNC_HOST_RAM_MB:-16384}"
DVMS_FUNC_HOST_DISK_GB="${DVMS_FUNC_HOST_DISK_GB:-100}"

DB_URL_BASE="mysql+pymysql://openstack:${DVMS_FUNC_PASSWORD}@${DVMS_FUNC_HOST_IP}:${DB_PORT}"
TRANSPORT_URL="rabbit://guest:guest@${DVMS_FUNC_HOST_IP}:${RABBIT_PORT}/"
KEYSTONE_URL="http://${DVMS_FUNC_HOST_IP}:${KEYSTONE_PORT}/v3"

_t0=${_t0:-$(date +%s)}
log() { printf '[%s +%4ss] %s\n' "$(date -u +%H:%M:%S)" "$(( $(date +%s) - _t0 ))" "$*"; }
die() {
  log "FAILED: $*"
  exit 1
}

# Any command that stops a script under set -e says where and what it was.
set -o errtrace
trap 'log "FAILED (exit $?) at ${BASH_SOURCE[0]##*/}:$LINENO: $BASH_COMMAND"' ERR

# fail_with_log STEP LOGFILE...: report a failed step with the tail of its logs.
fail_with_log() {
  local step=$1 f
  shift
  log "FAILED: $step"
  for f in "$@"; do
    if [ -f "$f" ]; then
      echo "----- last lines of $f -----"
      tail -n 40 "$f"
      echo "-----"
    fi
  done
  exit 1
}

# run_logged STEP LOGFILE CMD...: run CMD with its output in LOGFILE; on
# failure say which step failed and show the log's tail.
run_logged() {
  local step=$1 logfile=$2
  shift 2
  log "$step"
  if ! "$@" >>"$logfile" 2>&1; then
    fail_with_log "$step" "$logfile"
  fi
}

# wait_for TIMEOUT DESCRIPTION CMD...: retry CMD every second.
wait_for() {
  local timeout=$1 what=$2
  shift 2
  local end=$(( $(date +%s) + timeout ))
  until "$@" >/dev/null 2>&1; do
    if [ "$(date +%s)" -ge "$end" ]; then
      log "timed out after ${timeout}s waiting for: $what"
      return 1
    fi
    sleep 1
  done
  log "ready: $what"
}

# port_open PORT [IP]: something listens on the port of DVMS_FUNC_HOST_IP (or IP).
port_open() {
  (exec 3<>"/dev/tcp/${2:-$DVMS_FUNC_HOST_IP}/$1") 2>/dev/null
}

# http_ok URL: the URL answers with any HTTP status below 500.
http_ok() {
  local code
  code=$(curl -s -o /dev/null -m 5 -w '%{http_code}' "$1") || return 1
  [ "$code" -ge 200 ] && [ "$code" -lt 500 ]
}

pid_alive() {
  [ -f "$RUN_DIR/$1.pid" ] && kill -0 "$(cat "$RUN_DIR/$1.pid")" 2>/dev/null
}

# start_daemon NAME LOGFILE CMD...: run CMD in the background in its own
# session (so stop_daemon can end its whole process group), pid in RUN_DIR.
start_daemon() {
  local name=$1 logfile=$2
  shift 2
  if pid_alive "$name"; then
    log "$name already running (pid $(cat "$RUN_DIR/$name.pid"))"
    return 0
  fi
  (
    # The caller's other open files (a lock taken with flock around
    # up.sh, a CI pipe) would stay open for as long as the daemon runs:
    # close everything above stderr first.
    for fd in /proc/"$BASHPID"/fd/*; do
      fd=${fd##*/}
      if [ "$fd" -gt 2 ] 2>/dev/null; then eval "exec $fd>&-"; fi
    done 2>/dev/null
    exec setsid "$@" >>"$logfile" 2>&1 < /dev/null
  ) &
  echo $! > "$RUN_DIR/$name.pid"
  log "started $name (pid $!, log $logfile)"
}

# stop_daemon NAME [SIGNAL]: stop what start_daemon started (its process group).
stop_daemon() {
  local name=$1 sig=${2:-TERM} pidfile="$RUN_DIR/$1.pid" pid
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill "-$sig" -- "-$pid" 2>/dev/null || kill "-$sig" "$pid" 2>/dev/null || true
    for _ in $(seq 1 30); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.5
    done
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
  log "stopped $name"
}

# authtoken_section SECTION USER: keystone credentials of a service user
# (the functional cloud's and the test bed's configs).
authtoken_section() {
  cat <<EOT
[$1]
auth_type = password
auth_url = $KEYSTONE_URL
www_authenticate_uri = $KEYSTONE_URL
project_domain_name = Default
user_domain_name = Default
project_name = service
username = $2
password = $DVMS_FUNC_PASSWORD
region_name = $DVMS_FUNC_REGION
EOT
}

# cloud_entry CLOUD USER PASSWORD PROJECT: one cloud of a clouds.yaml
# (under "clouds:") on this cloud's keystone.
cloud_entry() {
  cat <<EOT
  $1:
    auth:
      auth_url: $KEYSTONE_URL
      username: $2
      password: $3
      project_name: $4
      user_domain_name: Default
      project_domain_name: Default
    region_name: $DVMS_FUNC_REGION
    interface: public
    identity_api_version: 3
EOT
}

# nova_client_sections LOCK_PATH: what every nova service of this cloud
# (the functional computes, the test bed's) needs to reach the others:
# locks, glance, no VNC or notifications, placement and the Neutron
# stand-in.
nova_client_sections() {
  cat <<EOT
[oslo_concurrency]
lock_path = $1
[glance]
api_servers = http://$DVMS_FUNC_HOST_IP:$GLANCE_PORT
[vnc]
enabled = false
[oslo_messaging_notifications]
driver = noop
EOT
  authtoken_section placement nova
  authtoken_section neutron nova
  echo "endpoint_override = http://$DVMS_FUNC_HOST_IP:$NEUTRON_PORT"
}

# write_nats_config BIN DIR IP PORT KEYS_DIR OBSERVER_PUB CN OUT: a
# self-signed TLS certificate for IP in DIR (kept if there) and OUT, the
# NATS server config `dvms nats-config` writes: every key of KEYS_DIR with
# its subject permissions, one observer key, TLS, listening on IP:PORT.
write_nats_config() {
  local bin=$1 dir=$2 ip=$3 port=$4 keys=$5 obs=$6 cn=$7 out=$8
  mkdir -p "$dir"
  if [ ! -s "$dir/cert.pem" ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
      -subj "/CN=$cn" -addext "subjectAltName=IP:$ip" \
      -keyout "$dir/key.pem" -out "$dir/cert.pem" >"$LOG_DIR/nats-cert.log" 2>&1 \
      || fail_with_log "making the NATS TLS certificate" "$LOG_DIR/nats-cert.log"
    chmod 600 "$dir/key.pem"
  fi
  "$bin" nats-config --keys-dir "$keys" --region "$DVMS_FUNC_REGION" --observer "$obs" \
    --listen "$ip:$port" --tls-cert "$dir/cert.pem" --tls-key "$dir/key.pem" > "$out" || die "dvms nats-config"
}

# uwsgi's http-socket keeps connections alive in a way that makes clients
# fail at random ("connection aborted"): every answer says Connection: close.
uwsgi_app() { # uwsgi_app NAME PORT WSGI_FILE ENV=VALUE
  start_daemon "$1" "$LOG_DIR/$1.log" \
    uwsgi --plugin python3 --http-socket "$DVMS_FUNC_HOST_IP:$2" --wsgi-file "$3" \
    --env "$4" --master --processes 1 --threads 4 --die-on-term --need-app --lazy-apps \
    --buffer-size 65535 --add-header "Connection: close" --procname-prefix "dvms-$1 "
}
# start_keystone: keystone under uwsgi (up.sh; the test bed's outage.sh
# stops and starts it again).
start_keystone() {
  uwsgi_app keystone "$KEYSTONE_PORT" /usr/bin/keystone-wsgi-public "OS_KEYSTONE_CONFIG_FILES=$ETC_DIR/keystone.conf"
}

admin_env() {
  export OS_CLIENT_CONFIG_FILE="$DVMS_FUNC_DIR/clouds.yaml"
  export OS_CLOUD="$DVMS_FUNC_CLOUD"
  unset OS_AUTH_URL OS_USERNAME OS_PASSWORD OS_PROJECT_NAME OS_TOKEN
}

# compute_capacity N: "vcpus ram_mb disk_gb" of host compute-N.
compute_capacity() {
  local var="DVMS_FUNC_CAPACITY_$1" spec
  spec="${!var:-${DVMS_FUNC_HOST_VCPUS}:${DVMS_FUNC_HOST_RAM_MB}:${DVMS_FUNC_HOST_DISK_GB}}"
  echo "${spec//:/ }"
}

# start_compute HOST: start one nova-compute from the config and capacity
# up.sh wrote for it (etc/nova-compute/HOST.conf, HOST.env).
start_compute() {
  local host=$1 conf="$ETC_DIR/nova-compute/$1.conf" envf="$ETC_DIR/nova-compute/$1.env"
  [ -f "$conf" ] || die "no config for $host ($conf): was it brought up by up.sh?"
  # shellcheck disable=SC1090
  . "$envf"
  start_daemon "nova-compute-$host" "$LOG_DIR/nova-compute-$host.log" \
    env PYTHONPATH="$PY_DIR" DVMS_FAKE_VCPUS="$DVMS_FAKE_VCPUS" \
    DVMS_FAKE_MEMORY_MB="$DVMS_FAKE_MEMORY_MB" DVMS_FAKE_LOCAL_GB="$DVMS_FAKE_LOCAL_GB" \
    nova-compute --config-file "$conf"
}
