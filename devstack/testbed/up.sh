#!/usr/bin/env bash
# Start the multi-site test bed: SITES network namespaces, each
# with one Debian nats-server joined to the others as a super-cluster
# (gateways through toxiproxy's WAN delay), and a dvms agent config, keys
# and clouds.yaml for AGENTS_PER_SITE compute hosts per site. Needs root.
#
#   bash devstack/testbed/up.sh [SITES] [AGENTS_PER_SITE]    (default 4 4)
#   bash devstack/testbed/down.sh                            (removes it)
#   bash devstack/testbed/cut.sh SITE on|off                 (cut a site off)
#
# It does not start Nova or the agents. The agents expect a Nova API
# (Keystone v3, compute, placement) at http://$NOVA_ADDR (10.78.0.254:8780,
# user dvms in project dvms, password in $DVMS_TESTBED_DIR/testbed.env);
# TestFunctionalSites (cmd/dvms) serves nova/fake there and starts the
# agents; by hand, for agent K of site S:
#   ip netns exec dvtb-sS dvms agent --host sS-cK --config $DVMS_TESTBED_DIR/etc/sS-cK.conf
# Settings: DVMS_TESTBED_DIR (/tmp/dvms-testbed), DVMS_TESTBED_WAN_DELAY_MS
# (20: one way, per crossing), DVMS_TESTBED_NEXT_NODE (vivaldi),
# DVMS_TESTBED_MEMBERSHIP (heartbeat, or swim: memberlist on wan0), DVMS_BIN
# (built from this checkout if unset). See lib.sh for the topology.
set -euo pipefail
# shellcheck source=devstack/testbed/lib.sh
. "$(dirname "$0")/lib.sh"
trap 'log "FAILED at line $LINENO: $BASH_COMMAND (remove what was made: bash $TB_SCRIPTS/down.sh)"' ERR

SITES=${1:-4}
PER_SITE=${2:-4}
NEXT_NODE="${DVMS_TESTBED_NEXT_NODE:-vivaldi}"
MEMBERSHIP="${DVMS_TESTBED_MEMBERSHIP:-heartbeat}"
[[ "$SITES" =~ ^[0-9]+$ && "$SITES" -ge 2 && "$SITES" -le 9 ]] || die "SITES must be 2..9, got $SITES"
[[ "$PER_SITE" =~ ^[0-9]+$ && "$PER_SITE" -ge 1 && "$PER_SITE" -le 20 ]] || die "AGENTS_PER_SITE must be 1..20, got $PER_SITE"
need_root
if [ -s "$TB_CREATED" ]; then
  die "a test bed is already up ($TB_CREATED lists it): bash $TB_SCRIPTS/down.sh first"
fi
for cmd in ip bridge nats-server openssl curl; do
  command -v "$cmd" >/dev/null || die "$cmd not found (apt-get install iproute2 nats-server openssl curl)"
done
mkdir -p "$TB_LOG" "$TB_RUN" "$TB_ETC" "$TB_DIR/bin"
chmod 700 "$TB_DIR"
: > "$TB_CREATED"
log "$SITES sites x $PER_SITE agents, WAN delay ${WAN_DELAY_MS} ms one way, state in $TB_DIR"

# --- binaries -------------------------------------------------------------
GO_BIN=$(command -v go || echo /usr/local/go/bin/go)
DVMS="${DVMS_BIN:-$TB_DIR/bin/dvms}"
if [ -z "${DVMS_BIN:-}" ]; then
  log "building dvms"
  (cd "$TB_TOP" && run_logged "go build of dvms" "$TB_LOG/build.log" "$GO_BIN" build -o "$DVMS" ./cmd/dvms)
fi
TOXI="$TB_DIR/bin/toxiproxy-server"
if [ ! -x "$TOXI" ]; then
  log "building toxiproxy-server $TOXIPROXY_VERSION (Go module proxy)"
  run_logged "go install toxiproxy" "$TB_LOG/build.log" \
    env GOBIN="$TB_DIR/bin" GOFLAGS=-mod=mod "$GO_BIN" install "github.com/Shopify/toxiproxy/v2/cmd/server@$TOXIPROXY_VERSION"
  mv "$TB_DIR/bin/server" "$TOXI"
fi

# --- network --------------------------------------------------------------
log "bridges $WAN_BRIDGE ($WAN_HUB) and $MGMT_BRIDGE ($MGMT_HUB)"
for br in "$WAN_BRIDGE:$WAN_HUB" "$MGMT_BRIDGE:$MGMT_HUB"; do
  created link "${br%%:*}"
  ip link add "${br%%:*}" type bridge
  ip addr add "${br#*:}/24" dev "${br%%:*}"
  ip link set "${br%%:*}" up
done
for ((s = 1; s <= SITES; s++)); do
  ns=$(site_ns "$s")
  log "site $s: namespace $ns, wan0 $(site_wan_ip "$s"), mgmt0 $(site_mgmt_ip "$s")"
  created netns "$ns"
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  created link "dvtb-w$s"
  ip link add "dvtb-w$s" type veth peer name wan0 netns "$ns"
  created link "dvtb-m$s"
  ip link add "dvtb-m$s" type veth peer name mgmt0 netns "$ns"
  ip link set "dvtb-w$s" master "$WAN_BRIDGE" up
  ip link set "dvtb-m$s" master "$MGMT_BRIDGE" up
  # A site's management port talks to Nova only, not to other sites.
  bridge link set dev "dvtb-m$s" isolated on
  ip -n "$ns" addr add "$(site_wan_ip "$s")/24" dev wan0
  ip -n "$ns" addr add "$(site_mgmt_ip "$s")/24" dev mgmt0
  ip -n "$ns" link set wan0 up
  ip -n "$ns" link set mgmt0 up
done

# --- WAN delay: toxiproxy, one proxy per destination site ------------------
log "toxiproxy on $TOXI_API"
"$TOXI" -host "$WAN_HUB" -port "${TOXI_API##*:}" >"$TB_LOG/toxiproxy.log" 2>&1 &
echo $! > "$TB_RUN/toxiproxy.pid"
created pid "$TB_RUN/toxiproxy.pid"
wait_for 30 "toxiproxy's API" curl -fsS "http://$TOXI_API/version" || die "toxiproxy did not start (log: $TB_LOG/toxiproxy.log)"
toxi() { curl -fsS -X POST -H 'Content-Type: application/json' -d "$2" "http://$TOXI_API$1" >>"$TB_LOG/toxiproxy-api.log" 2>&1 || die "toxiproxy API $1 $2"; }
for ((s = 1; s <= SITES; s++)); do
  toxi /proxies "{\"name\":\"site$s\",\"listen\":\"$WAN_HUB:$(site_proxy_port "$s")\",\"upstream\":\"$(site_wan_ip "$s"):$GATEWAY_PORT\",\"enabled\":true}"
  for dir in upstream downstream; do
    toxi "/proxies/site$s/toxics" "{\"name\":\"wan-$dir\",\"type\":\"latency\",\"stream\":\"$dir\",\"attributes\":{\"latency\":$WAN_DELAY_MS,\"jitter\":0}}"
  done
done

# --- keys, TLS ------------------------------------------------------------
KEYS="$TB_DIR/keys"
hosts=()
for ((s = 1; s <= SITES; s++)); do
  for ((k = 1; k <= PER_SITE; k++)); do hosts+=("$(agent_host "$s" "$k")"); done
done
log "message-signing keys for ${#hosts[@]} agents and an observer"
for h in "${hosts[@]}"; do
  run_logged "dvms keygen $h" "$TB_LOG/keys.log" "$DVMS" keygen --host "$h" --dir "$KEYS"
done
run_logged "dvms keygen (observer)" "$TB_LOG/keys.log" "$DVMS" keygen --host ops --dir "$TB_DIR/observer"
run_logged "NATS TLS certificate" "$TB_LOG/keys.log" \
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 7 \
  -subj "/CN=dvms-testbed-nats" -addext "subjectAltName=IP:127.0.0.1" \
  -keyout "$TB_ETC/nats-key.pem" -out "$TB_ETC/nats-cert.pem"
chmod 600 "$TB_ETC/nats-key.pem"
GW_PASS=$(openssl rand -hex 16)
# The region's membership key ([consensus] swim_key_file, membership = swim).
openssl rand -base64 32 > "$TB_ETC/swim.key"
chmod 600 "$TB_ETC/swim.key"
NOVA_PASS=$(openssl rand -hex 16)

# --- NATS super-cluster ---------------------------------------------------
for ((s = 1; s <= SITES; s++)); do
  conf="$TB_ETC/nats-site$s.conf"
  "$DVMS" nats-config --keys-dir "$KEYS" --region "$REGION" --observer "$TB_DIR/observer/ops.pub" \
    --listen "0.0.0.0:$NATS_PORT" --tls-cert "$TB_ETC/nats-cert.pem" --tls-key "$TB_ETC/nats-key.pem" \
    > "$conf" 2>>"$TB_LOG/nats-config.log" || die "dvms nats-config (site $s; log: $TB_LOG/nats-config.log)"
  {
    printf '\nserver_name: "dvtb-site%s"\nhttp: "127.0.0.1:8222"\n' "$s"
    printf 'gateway {\n  name: "site%s"\n  listen: "%s:%s"\n' "$s" "$(site_wan_ip "$s")" "$GATEWAY_PORT"
    # Other sites reach this one through its WAN proxy, never directly.
    printf '  advertise: "%s:%s"\n' "$WAN_HUB" "$(site_proxy_port "$s")"
    printf '  authorization { user: "gw", password: "%s" }\n  gateways: [\n' "$GW_PASS"
    for ((t = 1; t <= SITES; t++)); do
      [ "$t" = "$s" ] && continue
      printf '    { name: "site%s", url: "nats://gw:%s@%s:%s" }\n' "$t" "$GW_PASS" "$WAN_HUB" "$(site_proxy_port "$t")"
    done
    printf '  ]\n}\n'
  } >> "$conf"
  chmod 600 "$conf"
  ip netns exec "$(site_ns "$s")" nats-server -c "$conf" >"$TB_LOG/nats-site$s.log" 2>&1 &
  echo $! > "$TB_RUN/nats-site$s.pid"
  created pid "$TB_RUN/nats-site$s.pid"
done
# Up when every outbound and inbound gateway of the site has a connection.
gateways_up() {
  local n
  n=$(ip netns exec "$(site_ns "$1")" curl -fsS "http://127.0.0.1:8222/gatewayz" | grep -c '"rtt"') || return 1
  [ "$n" -ge $(( 2 * (SITES - 1) )) ]
}
for ((s = 1; s <= SITES; s++)); do
  wait_for 60 "site $s's gateways to the $(( SITES - 1 )) other sites" gateways_up "$s" \
    || die "NATS super-cluster incomplete at site $s (log: $TB_LOG/nats-site$s.log)"
done
log "NATS super-cluster up: $SITES sites, every gateway through the WAN proxy"

# --- agent configuration ----------------------------------------------------
cat > "$TB_ETC/clouds.yaml" <<EOT
# The test bed's Nova (served by the functional test from nova/fake).
clouds:
  dvms-testbed:
    auth:
      auth_url: http://$NOVA_ADDR/identity/v3
      username: dvms
      password: $NOVA_PASS
      project_name: dvms
      user_domain_name: Default
      project_domain_name: Default
    region_name: $REGION
    interface: public
    identity_api_version: 3
EOT
chmod 600 "$TB_ETC/clouds.yaml"
mkdir -p "$TB_DIR/demand"
# SWIM seeds: the first agent of every site.
SWIM_SEEDS=$(for ((s = 1; s <= SITES; s++)); do printf '%s:%s,' "$(site_wan_ip "$s")" 7947; done)
SWIM_SEEDS=${SWIM_SEEDS%,}
# rtt_probe_interval = 1: toxiproxy delays NATS only, not SWIM (lib.sh),
# so the coordinates must measure RTTs over NATS here; under swim a value
# > 0 makes those probes their only source instead of memberlist's.
for ((s = 1; s <= SITES; s++)); do
  for ((k = 1; k <= PER_SITE; k++)); do
    h=$(agent_host "$s" "$k")
    cat > "$TB_ETC/$h.conf" <<EOT
# Test bed agent $h (devstack/testbed/up.sh).
[DEFAULT]
region = $REGION
site = site$s
keys_dir = $KEYS

[nova]
os_cloud = dvms-testbed
clouds_yaml = $TB_ETC/clouds.yaml

[nats]
url = tls://127.0.0.1:$NATS_PORT
nkey_auth = true
tls_ca = $TB_ETC/nats-cert.pem

[scheduler]
next_node = $NEXT_NODE
rtt_probe_interval = 1

[monitor]
source = file
file_path = $TB_DIR/demand/{host}.json

[consensus]
bind = $(site_wan_ip "$s"):$(( 7400 + k ))
advertise = $(site_wan_ip "$s"):$(( 7400 + k ))
membership = $MEMBERSHIP
swim_bind = $(site_wan_ip "$s"):$(( 7946 + k ))
swim_seeds = $SWIM_SEEDS
swim_key_file = $TB_ETC/swim.key
EOT
    run_logged "dvms config check $h" "$TB_LOG/config-check.log" "$DVMS" config check --host "$h" --config "$TB_ETC/$h.conf"
  done
done
cat > "$TB_DIR/testbed.env" <<EOT
# Written by devstack/testbed/up.sh: what the test bed is.
DVMS_TESTBED_SITES=$SITES
DVMS_TESTBED_PER_SITE=$PER_SITE
DVMS_TESTBED_NOVA_ADDR=$NOVA_ADDR
DVMS_TESTBED_NOVA_USER=dvms
DVMS_TESTBED_NOVA_PROJECT=dvms
DVMS_TESTBED_NOVA_PASSWORD=$NOVA_PASS
DVMS_TESTBED_WAN_DELAY_MS=$WAN_DELAY_MS
DVMS_TESTBED_DVMS=$DVMS
DVMS_TESTBED_HOSTS="${hosts[*]}"
EOT
log "up: agents' configs in $TB_ETC, demand files in $TB_DIR/demand, Nova expected at http://$NOVA_ADDR"
