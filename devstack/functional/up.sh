#!/usr/bin/env bash
# Brings up a real Nova (Debian's OpenStack Zed) on 127.0.0.1 with N fake
# nova-compute hosts compute-1..compute-N, for dvms' functional tests.
#   usage: up.sh [N]        (default 8; run install.sh first)
# Everything lives under $DVMS_FUNC_DIR (default /tmp/dvms-functional):
# etc/ configs, state/ data, run/ pid files, logs/ one log per service.
# Admin credentials: $DVMS_FUNC_DIR/clouds.yaml (cloud dvms-functional) and
# $DVMS_FUNC_DIR/openrc. Idempotent: services already running are kept; a
# stopped cloud restarts from its state (servers included) unless
# DVMS_FUNC_FRESH=1, which purges the state first (what CI wants).
set -euo pipefail
_t0=$(date +%s)
# shellcheck source=devstack/functional/lib.sh
. "$(dirname "$0")/lib.sh"

if [ "${DVMS_FUNC_FRESH:-0}" = 1 ]; then
  # A cloud started from old state keeps old servers (and their placement
  # allocations) that the new fake computes no longer host.
  log "DVMS_FUNC_FRESH=1: down.sh --purge first"
  bash "$HARNESS_DIR/down.sh" --purge
  mkdir -p "$LOG_DIR" "$RUN_DIR" "$ETC_DIR" "$STATE_DIR" "$PY_DIR"
fi
N="${1:-8}"
case "$N" in
  '' | *[!0-9]*) die "usage: up.sh [N] (N = number of compute hosts)" ;;
esac
[ "$N" -ge 1 ] || die "N must be at least 1"
for cmd in mariadbd rabbitmq-server uwsgi keystone-manage glance-api nova-api nova-compute openstack nats-server; do
  command -v "$cmd" >/dev/null || die "$cmd not found: run devstack/functional/install.sh first"
done
log "bringing up the functional cloud with $N compute hosts under $DVMS_FUNC_DIR"
# A port already answering, and not by the service this harness started
# there, would make a wait below succeed against the wrong server.
for svc_port in mariadb:$DB_PORT rabbitmq:$RABBIT_PORT keystone:$KEYSTONE_PORT placement:$PLACEMENT_PORT \
  glance-api:$GLANCE_PORT nova-api:$NOVA_PORT neutron-stub:$NEUTRON_PORT nats:$NATS_PORT \
  dvms-scheduler-api:$SCHEDAPI_PORT; do
  svc=${svc_port%%:*} port=${svc_port##*:}
  ip=$DVMS_FUNC_HOST_IP
  [ "$svc" = nats ] && ip=$NATS_IP
  if ! pid_alive "$svc" && port_open "$port" "$ip"; then
    die "port $port (for $svc) is already in use by another process; free it or set DVMS_FUNC_*_PORT (see lib.sh)"
  fi
done
prev=$(cat "$DVMS_FUNC_DIR/computes" 2>/dev/null || echo 0)
if [ "$prev" -gt "$N" ]; then
  log "note: this state has nova-compute services for $prev hosts; compute-$((N + 1))..compute-$prev stay listed as down (down.sh --purge for a clean cloud)"
fi
echo "$N" > "$DVMS_FUNC_DIR/computes"

# Nova's and placement's policy files: the dvms agents run as user dvms with
# the role dvms only (no admin role), as an operator would deploy them:
# Nova's written by dvms_nova.policy from this Nova's own rules,
# placement's from the checkout (etc/dvms/policy/placement.yaml).
POLICY_DIR="$(cd "$HARNESS_DIR/../../etc/dvms/policy" && pwd)"
NOVA_POLICY="$ETC_DIR/nova-policy.yaml"
(cd / && PYTHONPATH="$(cd "$HARNESS_DIR/../../nova" && pwd)" "$PYTHON" -m dvms_nova.policy --role dvms) \
  > "$NOVA_POLICY" 2>"$LOG_DIR/nova-policy.log" || fail_with_log "writing Nova's policy for the role dvms" "$LOG_DIR/nova-policy.log"
for f in "$NOVA_POLICY" "$POLICY_DIR/placement.yaml"; do
  "$PYTHON" -c 'import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); assert isinstance(d, dict) and d, "no rules"' \
    "$f" || die "policy file $f does not parse"
done
log "policy: Nova's $NOVA_POLICY ($(grep -c '^"' "$NOVA_POLICY") rules), placement's $POLICY_DIR/placement.yaml"

# ------------------------------------------------------------ admin creds ---
{
  echo "clouds:"
  cloud_entry "$DVMS_FUNC_CLOUD" admin "$DVMS_FUNC_PASSWORD" admin
  cloud_entry "$DVMS_FUNC_AGENT_CLOUD" dvms "$DVMS_FUNC_AGENT_PASSWORD" dvms
} > "$DVMS_FUNC_DIR/clouds.yaml"
cat > "$DVMS_FUNC_DIR/openrc" <<EOT
# Admin credentials of the dvms functional cloud: . $DVMS_FUNC_DIR/openrc
export OS_AUTH_URL=$KEYSTONE_URL
export OS_USERNAME=admin
export OS_PASSWORD=$DVMS_FUNC_PASSWORD
export OS_PROJECT_NAME=admin
export OS_USER_DOMAIN_NAME=Default
export OS_PROJECT_DOMAIN_NAME=Default
export OS_REGION_NAME=$DVMS_FUNC_REGION
export OS_IDENTITY_API_VERSION=3
export OS_INTERFACE=public
unset OS_CLOUD OS_CLIENT_CONFIG_FILE
EOT
admin_env

# ---------------------------------------------------------------- mariadb ---
DB_DIR="$STATE_DIR/mysql"
DB_SOCK="$RUN_DIR/mysqld.sock"
if [ ! -d "$DB_DIR/mysql" ]; then
  rm -rf "$DB_DIR"
  run_logged "mariadb: initialising datadir $DB_DIR" "$LOG_DIR/mariadb-install-db.log" \
    mariadb-install-db --no-defaults --datadir="$DB_DIR" --user=root \
    --auth-root-authentication-method=socket --skip-test-db
fi
start_daemon mariadb "$LOG_DIR/mariadb.log" \
  mariadbd --no-defaults --datadir="$DB_DIR" --socket="$DB_SOCK" \
  --pid-file="$RUN_DIR/mariadbd.pid" --port="$DB_PORT" --bind-address="$DVMS_FUNC_HOST_IP" \
  --user=root --skip-name-resolve --skip-log-bin --max-connections=1000 \
  --innodb-buffer-pool-size=256M --innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0 \
  --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci

# ---------------------------------------------------------------- rabbitmq ---
RABBIT_HOME="$STATE_DIR/rabbitmq"
mkdir -p "$RABBIT_HOME" "$LOG_DIR/rabbitmq"
echo '[].' > "$ETC_DIR/rabbitmq-enabled-plugins"
: > "$ETC_DIR/rabbitmq-env.conf"
cat > "$ETC_DIR/rabbitmq.conf" <<EOT
listeners.tcp.default = $DVMS_FUNC_HOST_IP:$RABBIT_PORT
$(if [[ "$DVMS_FUNC_HOST_IP" == 127.* ]]; then echo "loopback_users.guest = true"; else
  # Off loopback (DVMS_FUNC_HOST_IP=10.79.0.1 for the test bed): the hosts'
  # nova-computes log in as guest from their own addresses.
  echo "loopback_users = none"; fi)
log.file.level = info
EOT
export ERL_EPMD_ADDRESS="$DVMS_FUNC_HOST_IP" ERL_EPMD_PORT="$EPMD_PORT"
if port_open "$EPMD_PORT"; then
  log "epmd already listening on $EPMD_PORT: rabbitmq uses it"
else
  start_daemon epmd "$LOG_DIR/epmd.log" epmd -address "$DVMS_FUNC_HOST_IP" -port "$EPMD_PORT"
fi
rabbit_env=(
  env HOME="$RABBIT_HOME" ERL_EPMD_ADDRESS="$DVMS_FUNC_HOST_IP" ERL_EPMD_PORT="$EPMD_PORT" RABBITMQ_NODENAME="dvms-$RABBIT_PORT@localhost" RABBITMQ_USE_LONGNAME=false
  RABBITMQ_NODE_IP_ADDRESS="$DVMS_FUNC_HOST_IP" RABBITMQ_NODE_PORT="$RABBIT_PORT"
  RABBITMQ_DIST_PORT="$((RABBIT_PORT + 20000))" RABBITMQ_MNESIA_BASE="$RABBIT_HOME/mnesia"
  RABBITMQ_LOG_BASE="$LOG_DIR/rabbitmq" RABBITMQ_CONFIG_FILE="$ETC_DIR/rabbitmq.conf"
  RABBITMQ_CONF_ENV_FILE="$ETC_DIR/rabbitmq-env.conf"
  RABBITMQ_ENABLED_PLUGINS_FILE="$ETC_DIR/rabbitmq-enabled-plugins"
  RABBITMQ_PID_FILE="$RUN_DIR/rabbitmq-beam.pid"
)
# down.sh runs rabbitmqctl with the same environment as the running node.
pid_alive rabbitmq || printf '%q ' "${rabbit_env[@]}" > "$ETC_DIR/rabbitmq-env.cmd"
start_daemon rabbitmq "$LOG_DIR/rabbitmq.log" "${rabbit_env[@]}" /usr/lib/rabbitmq/bin/rabbitmq-server

# ------------------------------------------------------------ neutron stub ---
cp "$HARNESS_DIR/files/neutron_stub.py" "$PY_DIR/neutron_stub.py"
start_daemon neutron-stub "$LOG_DIR/neutron-stub.log" \
  "$PYTHON" -u "$PY_DIR/neutron_stub.py" "$DVMS_FUNC_HOST_IP" "$NEUTRON_PORT"

# ---------------------------------------------------------- configuration ---
mkdir -p "$STATE_DIR/keystone/fernet-keys" "$STATE_DIR/keystone/credential-keys" \
  "$STATE_DIR/glance/images" "$STATE_DIR/glance/staging" "$STATE_DIR/glance/tasks" \
  "$STATE_DIR/glance/cache" "$STATE_DIR/locks" "$STATE_DIR/nova" "$ETC_DIR/placement" "$ETC_DIR/nova-compute"

cat > "$ETC_DIR/keystone.conf" <<EOT
[DEFAULT]
max_token_size = 255
[database]
connection = $DB_URL_BASE/keystone
[token]
provider = fernet
[fernet_tokens]
key_repository = $STATE_DIR/keystone/fernet-keys
[credential]
key_repository = $STATE_DIR/keystone/credential-keys
[cache]
enabled = false
[identity]
# bcrypt's minimum: a test cloud's passwords need no brute-force cost, and
# with the default (12) eight agents logging in at once waited 15 s each
# for keystone on 2 cores (every openstack CLI call pays it too).
password_hash_rounds = 4
EOT

{
  cat <<EOT
[placement_database]
connection = $DB_URL_BASE/placement
[api]
auth_strategy = keystone
[oslo_policy]
# The dvms agents' read-only rules (role dvms), from this checkout.
policy_file = $POLICY_DIR/placement.yaml
EOT
  authtoken_section keystone_authtoken placement
} > "$ETC_DIR/placement/placement.conf"

{
  cat <<EOT
[DEFAULT]
bind_host = $DVMS_FUNC_HOST_IP
bind_port = $GLANCE_PORT
workers = 1
enabled_backends = fs:file
image_cache_dir = $STATE_DIR/glance/cache
[database]
connection = $DB_URL_BASE/glance
[paste_deploy]
flavor = keystone
config_file = /etc/glance/glance-api-paste.ini
[glance_store]
default_backend = fs
[fs]
filesystem_store_datadir = $STATE_DIR/glance/images
[os_glance_staging_store]
filesystem_store_datadir = $STATE_DIR/glance/staging
[os_glance_tasks_store]
filesystem_store_datadir = $STATE_DIR/glance/tasks
[oslo_concurrency]
lock_path = $STATE_DIR/locks
EOT
  authtoken_section keystone_authtoken glance
} > "$ETC_DIR/glance-api.conf"

# nova: options shared by the controller services and the computes.
nova_common() { # nova_common STATE_PATH
  cat <<EOT
[DEFAULT]
transport_url = $TRANSPORT_URL
my_ip = $DVMS_FUNC_HOST_IP
state_path = $1
instances_path = $1/instances
shelved_offload_time = 0
report_interval = ${DVMS_FUNC_REPORT_INTERVAL:-10}
service_down_time = ${DVMS_FUNC_SERVICE_DOWN_TIME:-60}
heal_instance_info_cache_interval = -1
use_rootwrap_daemon = false
EOT
  nova_client_sections "$1/locks"
}
mkdir -p "$STATE_DIR/nova/locks"
# The token nova-scheduler's weigher sends to dvms scheduler-api (both read
# this file: [dvms] token_file, [scheduler_api] token_file).
[ -s "$ETC_DIR/scheduler-api.token" ] || (umask 077 && openssl rand -hex 32 > "$ETC_DIR/scheduler-api.token")
{
  nova_common "$STATE_DIR/nova"
  cat <<EOT
[api]
auth_strategy = keystone
[oslo_policy]
# The dvms agents' least privilege (role dvms), from this checkout.
policy_file = $NOVA_POLICY
[wsgi]
api_paste_config = /etc/nova/api-paste.ini
[api_database]
connection = $DB_URL_BASE/nova_api
[database]
connection = $DB_URL_BASE/nova
[conductor]
workers = 1
[scheduler]
workers = 1
discover_hosts_in_cells_interval = -1
[filter_scheduler]
track_instance_changes = true
# dvms' weigher (nova/dvms_nova) after Nova's own, as the DevStack
# plugin configures it: nova-scheduler imports it from this checkout. The
# functional tests start dvms scheduler-api at [dvms] url; while none runs,
# the weigher fails open (every host the same weight: Nova's order).
weight_classes = nova.scheduler.weights.all_weighers,dvms_nova.weigher.DvmsWeigher
[dvms]
url = http://$DVMS_FUNC_HOST_IP:$SCHEDAPI_PORT/scheduler/nova/external
token_file = $ETC_DIR/scheduler-api.token
timeout = 1.0
# The functional tests measure dvms' order: it must prevail over Nova's
# weighers (the default, 1.0, makes dvms one weigher among Nova's).
weight_multiplier = 1000.0
EOT
  authtoken_section keystone_authtoken nova
  authtoken_section service_user nova
  echo "send_service_user_token = true"
} > "$ETC_DIR/nova.conf"
# nova.conf's [DEFAULT] already opened by nova_common: append API options there.
sed -i "0,/^\[DEFAULT\]$/s//[DEFAULT]\nenabled_apis = osapi_compute\nosapi_compute_listen = $DVMS_FUNC_HOST_IP\nosapi_compute_listen_port = $NOVA_PORT\nosapi_compute_workers = 1\nmetadata_workers = 1/" "$ETC_DIR/nova.conf"

for i in $(seq 1 "$N"); do
  host="compute-$i"
  read -r vcpus ram disk < <(compute_capacity "$i")
  sp="$STATE_DIR/nova-compute/$host"
  mkdir -p "$sp/instances" "$sp/locks"
  {
    nova_common "$sp" | sed "0,/^\[DEFAULT\]$/s//[DEFAULT]\nhost = $host\ncompute_driver = dvms_fake.DvmsFakeDriver\ncpu_allocation_ratio = 1.0\nram_allocation_ratio = 1.0\ndisk_allocation_ratio = 1.0\nreserved_host_cpus = 0\nreserved_host_memory_mb = 0\nreserved_host_disk_mb = 0/"
    # No provider-tree refresh (every 300 s by default, in step on hosts
    # started together: 32 placement requests in one minute out of five,
    # which made a one-minute baseline of the cloud's own traffic swing by
    # half the agents' budget, see the functional tests' QuietAtRest).
    # Inventories are still reported every update_available_resource.
    printf '[compute]\nresource_provider_association_refresh = 0\n'
  } > "$ETC_DIR/nova-compute/$host.conf"
  printf 'DVMS_FAKE_VCPUS=%s\nDVMS_FAKE_MEMORY_MB=%s\nDVMS_FAKE_LOCAL_GB=%s\n' "$vcpus" "$ram" "$disk" \
    > "$ETC_DIR/nova-compute/$host.env"
done
cp "$HARNESS_DIR/files/sitecustomize.py" "$HARNESS_DIR/files/dvms_fake_driver.py" "$PY_DIR/"

# --------------------------------------------------------------- databases ---
wait_for 60 "mariadb on $DB_PORT" mariadb --socket="$DB_SOCK" -u root -e 'SELECT 1' \
  || fail_with_log "starting mariadb" "$LOG_DIR/mariadb.log"
log "mariadb: databases and the openstack user"
mariadb --socket="$DB_SOCK" -u root >>"$LOG_DIR/mariadb-setup.log" 2>&1 <<EOT || fail_with_log "creating databases" "$LOG_DIR/mariadb-setup.log"
CREATE DATABASE IF NOT EXISTS keystone;
CREATE DATABASE IF NOT EXISTS glance;
CREATE DATABASE IF NOT EXISTS placement;
CREATE DATABASE IF NOT EXISTS nova_api;
CREATE DATABASE IF NOT EXISTS nova_cell0;
CREATE DATABASE IF NOT EXISTS nova;
CREATE USER IF NOT EXISTS 'openstack'@'127.0.0.1' IDENTIFIED BY '$DVMS_FUNC_PASSWORD';
CREATE USER IF NOT EXISTS 'openstack'@'localhost' IDENTIFIED BY '$DVMS_FUNC_PASSWORD';
GRANT ALL PRIVILEGES ON *.* TO 'openstack'@'127.0.0.1';
GRANT ALL PRIVILEGES ON *.* TO 'openstack'@'localhost';
CREATE USER IF NOT EXISTS 'openstack'@'$DVMS_FUNC_HOST_IP' IDENTIFIED BY '$DVMS_FUNC_PASSWORD';
GRANT ALL PRIVILEGES ON *.* TO 'openstack'@'$DVMS_FUNC_HOST_IP';
FLUSH PRIVILEGES;
EOT

# The schema syncs are independent: run them side by side, wait for each.
declare -A sync_pids=()
bg_sync() { # bg_sync NAME CMD...
  local name=$1
  shift
  log "db sync $name (background, log $LOG_DIR/dbsync-$name.log)"
  "$@" >"$LOG_DIR/dbsync-$name.log" 2>&1 &
  sync_pids[$name]=$!
}
bg_sync keystone keystone-manage --config-file "$ETC_DIR/keystone.conf" db_sync
bg_sync glance glance-manage --config-file "$ETC_DIR/glance-api.conf" db_sync
bg_sync placement placement-manage --config-file "$ETC_DIR/placement/placement.conf" db sync
bg_sync nova sh -c "set -e
  nova-manage --config-file '$ETC_DIR/nova.conf' api_db sync
  nova-manage --config-file '$ETC_DIR/nova.conf' cell_v2 map_cell0 --database_connection '$DB_URL_BASE/nova_cell0'
  nova-manage --config-file '$ETC_DIR/nova.conf' cell_v2 list_cells | grep -q ' cell1 ' ||
    nova-manage --config-file '$ETC_DIR/nova.conf' cell_v2 create_cell --name cell1
  nova-manage --config-file '$ETC_DIR/nova.conf' db sync"
wait_sync() {
  if ! wait "${sync_pids[$1]}"; then
    fail_with_log "db sync $1" "$LOG_DIR/dbsync-$1.log"
  fi
  log "db sync $1 done"
}

# ---------------------------------------------------------------- keystone ---
wait_sync keystone
run_logged "keystone: fernet and credential keys" "$LOG_DIR/keystone-manage.log" \
  keystone-manage --config-file "$ETC_DIR/keystone.conf" fernet_setup --keystone-user root --keystone-group root
run_logged "keystone: credential keys" "$LOG_DIR/keystone-manage.log" \
  keystone-manage --config-file "$ETC_DIR/keystone.conf" credential_setup --keystone-user root --keystone-group root
run_logged "keystone: bootstrap admin, region $DVMS_FUNC_REGION, identity endpoints" "$LOG_DIR/keystone-manage.log" \
  keystone-manage --config-file "$ETC_DIR/keystone.conf" bootstrap \
  --bootstrap-password "$DVMS_FUNC_PASSWORD" --bootstrap-region-id "$DVMS_FUNC_REGION" \
  --bootstrap-admin-url "$KEYSTONE_URL" --bootstrap-internal-url "$KEYSTONE_URL" \
  --bootstrap-public-url "$KEYSTONE_URL"

start_keystone
wait_for 120 "keystone on $KEYSTONE_PORT" http_ok "$KEYSTONE_URL" \
  || fail_with_log "starting keystone" "$LOG_DIR/keystone.log"
run_logged "keystone: service project, users, services and endpoints" "$LOG_DIR/bootstrap.log" \
  "$PYTHON" "$HARNESS_DIR/files/bootstrap.py" identity "$DVMS_FUNC_PASSWORD" "$DVMS_FUNC_REGION" \
  "http://$DVMS_FUNC_HOST_IP:$GLANCE_PORT" "http://$DVMS_FUNC_HOST_IP:$PLACEMENT_PORT" \
  "http://$DVMS_FUNC_HOST_IP:$NOVA_PORT/v2.1" "$DVMS_FUNC_AGENT_PASSWORD"

# ------------------------------------------------------- placement, glance ---
wait_sync placement
uwsgi_app placement "$PLACEMENT_PORT" /usr/bin/placement-api "OS_PLACEMENT_CONFIG_DIR=$ETC_DIR/placement"
wait_sync glance
start_daemon glance-api "$LOG_DIR/glance-api.log" glance-api --config-file "$ETC_DIR/glance-api.conf"

# ---------------------------------------------------------------- rabbitmq ---
wait_for 120 "rabbitmq on $RABBIT_PORT" port_open "$RABBIT_PORT" \
  || fail_with_log "starting rabbitmq" "$LOG_DIR/rabbitmq.log" "$LOG_DIR/rabbitmq/dvms-$RABBIT_PORT@localhost.log"

# -------------------------------------------------------------------- nova ---
wait_sync nova
start_daemon nova-api "$LOG_DIR/nova-api.log" nova-api --config-file "$ETC_DIR/nova.conf"
start_daemon nova-conductor "$LOG_DIR/nova-conductor.log" nova-conductor --config-file "$ETC_DIR/nova.conf"
# nova-scheduler alone sees the weigher: a directory holding only the
# dvms_nova package (a link to the checkout's) on its PYTHONPATH.
SCHED_PY_DIR="$PY_DIR/scheduler"
mkdir -p "$SCHED_PY_DIR"
ln -sfn "$(cd "$HARNESS_DIR/../../nova/dvms_nova" && pwd)" "$SCHED_PY_DIR/dvms_nova"
PYTHONPATH="$SCHED_PY_DIR" "$PYTHON" -c 'import dvms_nova.weigher' >>"$LOG_DIR/nova-scheduler.log" 2>&1 \
  || fail_with_log "importing dvms_nova.weigher from $SCHED_PY_DIR" "$LOG_DIR/nova-scheduler.log"
log "nova-scheduler: dvms_nova.weigher.DvmsWeigher from $(readlink "$SCHED_PY_DIR/dvms_nova"), asking http://$DVMS_FUNC_HOST_IP:$SCHEDAPI_PORT"
start_daemon nova-scheduler "$LOG_DIR/nova-scheduler.log" \
  env PYTHONPATH="$SCHED_PY_DIR" nova-scheduler --config-file "$ETC_DIR/nova.conf"
wait_for 120 "placement on $PLACEMENT_PORT" http_ok "http://$DVMS_FUNC_HOST_IP:$PLACEMENT_PORT/" \
  || fail_with_log "starting placement" "$LOG_DIR/placement.log"
computes_since="$(date -u +%Y-%m-%dT%H:%M:%S).999999" # Nova keeps whole seconds
for i in $(seq 1 "$N"); do
  start_compute "compute-$i"
done
wait_for 120 "glance on $GLANCE_PORT" http_ok "http://$DVMS_FUNC_HOST_IP:$GLANCE_PORT/" \
  || fail_with_log "starting glance-api" "$LOG_DIR/glance-api.log"
wait_for 180 "nova-api on $NOVA_PORT" http_ok "http://$DVMS_FUNC_HOST_IP:$NOVA_PORT/" \
  || fail_with_log "starting nova-api" "$LOG_DIR/nova-api.log"

dd if=/dev/zero of="$STATE_DIR/dvms-tiny.raw" bs=1M count=1 status=none
run_logged "flavors dvms.tiny, dvms.small, image dvms-tiny, quotas" "$LOG_DIR/bootstrap.log" \
  "$PYTHON" "$HARNESS_DIR/files/bootstrap.py" resources "$STATE_DIR/dvms-tiny.raw"

# ------------------------------------------------------- computes are up ---
computes_up() { # all N nova-compute services "up", with a heartbeat newer
  # than their start (after a restart Nova says "up" for service_down_time)
  local up
  up=$(timeout 60 openstack compute service list --service nova-compute -f value -c Host -c State -c "Updated At" 2>/dev/null \
    | awk -v since="$computes_since" '$2 == "up" && $1 ~ /^compute-[0-9]+$/ && $3 > since' | wc -l)
  [ "$up" -ge "$N" ]
}
if ! wait_for "$DVMS_FUNC_TIMEOUT" "$N nova-compute services up" computes_up; then
  openstack compute service list || true
  for i in $(seq 1 "$N"); do
    pid_alive "nova-compute-compute-$i" || fail_with_log "nova-compute compute-$i died" "$LOG_DIR/nova-compute-compute-$i.log"
  done
  fail_with_log "waiting for $N nova-compute services" "$LOG_DIR/nova-compute-compute-1.log" "$LOG_DIR/nova-conductor.log"
fi
run_logged "nova-manage cell_v2 discover_hosts" "$LOG_DIR/nova-manage.log" \
  nova-manage --config-file "$ETC_DIR/nova.conf" cell_v2 discover_hosts --verbose
providers_ready() { # N resource providers with the configured VCPU inventory
  local n
  n=$(timeout 60 openstack resource provider list -f value -c name 2>/dev/null | grep -c '^compute-[0-9]*$') || return 1
  [ "$n" -ge "$N" ]
}
wait_for "$DVMS_FUNC_TIMEOUT" "$N placement resource providers" providers_ready \
  || fail_with_log "waiting for $N resource providers" "$LOG_DIR/placement.log" "$LOG_DIR/nova-compute-compute-1.log"
hypervisors_ready() {
  local n
  n=$(timeout 60 openstack hypervisor list -f value -c "Hypervisor Hostname" 2>/dev/null | grep -c '^compute-[0-9]*$') || return 1
  [ "$n" -ge "$N" ]
}
wait_for 120 "$N hypervisors mapped to cell1" hypervisors_ready \
  || fail_with_log "waiting for $N hypervisors" "$LOG_DIR/nova-api.log"

# The dvms agent config for this cloud, written by the same function as the
# DevStack plugin's (devstack/lib/dvms). Agents: dvms agent --host compute-K
# --config $DVMS_FUNC_DIR/etc/dvms.conf.
# shellcheck source=devstack/lib/dvms
. "$HARNESS_DIR/../lib/dvms"
# Every agent signs its messages: one key pair per compute, all
# public keys in one keys_dir (one machine).
KEYS_DIR="$DVMS_FUNC_DIR/keys"
GO_BIN=$(command -v go || echo /usr/local/go/bin/go)
(cd "$HARNESS_DIR/../.." && "$GO_BIN" build -o "$DVMS_FUNC_DIR/dvms" ./cmd/dvms) || die "go build of dvms (for keygen)"
hosts=()
for ((i = 1; i <= N; i++)); do hosts+=("compute-$i"); done
dvms_keygen "$DVMS_FUNC_DIR/dvms" "$KEYS_DIR" "${hosts[@]}" || die "dvms keygen"
# The operator key of the run-time controls (dvms mode, pause, resume ...
# --key $KEYS_DIR/operators/operator.key), as the DevStack plugin gives the
# stack user: its .pub in every agent's keys_dir/operators (one machine).
dvms_keygen "$DVMS_FUNC_DIR/dvms" "$KEYS_DIR/operators" operator || die "dvms keygen (operator)"
log "agent keys: $KEYS_DIR; operator key: $KEYS_DIR/operators/operator.key"

# The NATS server the dvms agents of the functional tests talk over
# (Debian's nats-server, as the DevStack plugin's dvms-nats service), with
# TLS (a self-signed certificate for this address), and
# only the region's keys admitted, each agent with its subject permissions
# (`dvms nats-config`); the tests' operator commands and scheduler-api use
# an observer key kept outside keys_dir.
OBS_DIR="$DVMS_FUNC_DIR/observer"
NATS_DIR="$DVMS_FUNC_DIR/nats"
dvms_keygen "$DVMS_FUNC_DIR/dvms" "$OBS_DIR" ops || die "dvms keygen (observer)"
write_nats_config "$DVMS_FUNC_DIR/dvms" "$NATS_DIR" "$NATS_IP" "$NATS_PORT" "$KEYS_DIR" "$OBS_DIR/ops.pub" \
  dvms-functional-nats "$NATS_DIR/nats.conf"
start_daemon nats "$LOG_DIR/nats.log" nats-server -c "$NATS_DIR/nats.conf"
wait_for 30 "NATS on port $NATS_PORT" port_open "$NATS_PORT" "$NATS_IP" || fail_with_log "starting NATS" "$LOG_DIR/nats.log"
log "NATS: TLS, $N agent keys and one observer key admitted ($NATS_DIR/nats.conf)"
# The preemption test gives its victim a low priority with `openstack
# server set --property dvms:priority=-1` (as admin): trust server
# metadata here; the default, flavor extra specs only, is covered by the
# unit tier (TestOperatorControlsFromFlavor).
DVMS_SERVER_METADATA_CONTROLS=true \
DVMS_KEYS_DIR="$KEYS_DIR" DVMS_NATS_NKEY_AUTH=true DVMS_NATS_NKEY_SEED="$OBS_DIR/ops.key" \
  DVMS_NATS_TLS_CA="$NATS_DIR/cert.pem" \
DVMS_REGION="$DVMS_FUNC_REGION" DVMS_OS_CLOUD="$DVMS_FUNC_AGENT_CLOUD" \
  DVMS_CLOUDS_YAML="$DVMS_FUNC_DIR/clouds.yaml" \
  DVMS_NATS_URL="${DVMS_NATS_URL:-nats://$NATS_IP:$NATS_PORT}" \
  dvms_write_config "$ETC_DIR/dvms.conf"
printf '\n[scheduler_api]\nlisten = %s\ntoken_file = %s\n' "$DVMS_FUNC_HOST_IP:$SCHEDAPI_PORT" "$ETC_DIR/scheduler-api.token" >> "$ETC_DIR/dvms.conf"
log "dvms agent config: $ETC_DIR/dvms.conf"

log "cloud is up: $N computes; OS_CLIENT_CONFIG_FILE=$DVMS_FUNC_DIR/clouds.yaml OS_CLOUD=$DVMS_FUNC_CLOUD (or . $DVMS_FUNC_DIR/openrc)"
log "total time: $(( $(date +%s) - _t0 ))s"
