#!/usr/bin/env bash
# Installs and starts the dvms agent in hosts of the bed as an operator
# would (up.sh runs it; usable by hand, e.g. after a rebuild of dvms):
#   agents.sh install DVMS_BIN HOST...
# In each host: /usr/local/bin/dvms; its key pair made there with `dvms
# keygen --host HOST --dir /etc/dvms/keys` (the private key never leaves
# the host), the other hosts' and the bed operator's public keys copied
# in; /etc/dvms/dvms.conf (written by devstack/lib/dvms's
# dvms_write_config: [monitor] source = cgroup, the default);
# /etc/openstack/clouds.yaml with the agents' keystone user only (role
# dvms, no admin); the unit etc/systemd/dvms-agent@.service copied
# unchanged; `systemctl enable --now dvms-agent@HOST`; then waits until
# every agent is active (Type=notify: READY=1 sent).
# Here, in $DVMS_HOSTS_DIR: keys/ (every host's .pub), keys/operators/
# operator.key (the bed operator's key: dvms pause/mode ... --key),
# observer/ops.key (NATS observer: dvms status/events), nats/ (the bed's
# NATS: TLS certificate for 10.79.0.1, nats.conf from `dvms nats-config`),
# dvms.conf (for dvms status/events/plans run here).
# Needs root.
set -euo pipefail
# shellcheck source=devstack/hosts/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=devstack/lib/dvms
. "$BED_DIR/../lib/dvms"

[ "$(id -u)" = 0 ] || die "agents.sh must run as root"
if [ "${1:-}" != install ] || [ $# -lt 3 ]; then die "usage: agents.sh install DVMS_BIN HOST..."; fi
DVMS=$2
shift 2
hosts=("$@")
[ -x "$DVMS" ] || die "dvms binary $DVMS is not executable"
UNIT="$(cd "$BED_DIR/../.." && pwd)/etc/systemd/dvms-agent@.service"
[ -f "$UNIT" ] || die "no unit file $UNIT"
KEYS="$DVMS_HOSTS_DIR/keys"
OBS="$DVMS_HOSTS_DIR/observer"
mkdir -p "$KEYS" "$OBS" "$BED_NATS_DIR"

# 1. The binary and each host's own key pair, made in the host.
for h in "${hosts[@]}"; do
  r="$ROOTS_DIR/$h/root"
  install -m 0755 "$DVMS" "$r/usr/local/bin/dvms"
  install -d -m 0750 -o root -g root "$r/etc/dvms"
  if [ ! -s "$r/etc/dvms/keys/$h.key" ]; then
    hexec "$h" install -d -m 0750 /etc/dvms/keys
    hexec "$h" dvms keygen --host "$h" --dir /etc/dvms/keys >>"$HOSTS_LOG_DIR/agents.log" 2>&1 \
      || fail_with_log "dvms keygen in $h" "$HOSTS_LOG_DIR/agents.log"
    log "$h: dvms keygen --host $h --dir /etc/dvms/keys"
  fi
  cp "$r/etc/dvms/keys/$h.pub" "$KEYS/$h.pub"
done
dvms_keygen "$DVMS" "$KEYS/operators" operator || die "dvms keygen (the bed operator)"
dvms_keygen "$DVMS" "$OBS" ops || die "dvms keygen (the bed's NATS observer)"

# 2. The bed's NATS: TLS on 10.79.0.1, every host's key with its subject
# permissions, one observer key.
if [ ! -s "$BED_NATS_DIR/cert.pem" ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
    -subj "/CN=dvms-bed-nats" -addext "subjectAltName=IP:$BED_GW" \
    -keyout "$BED_NATS_DIR/key.pem" -out "$BED_NATS_DIR/cert.pem" >"$HOSTS_LOG_DIR/nats-cert.log" 2>&1 \
    || fail_with_log "making the NATS TLS certificate" "$HOSTS_LOG_DIR/nats-cert.log"
  chmod 600 "$BED_NATS_DIR/key.pem"
fi
"$DVMS" nats-config --keys-dir "$KEYS" --region "$DVMS_FUNC_REGION" --observer "$OBS/ops.pub" \
  --listen "$BED_GW:$BED_NATS_PORT" --tls-cert "$BED_NATS_DIR/cert.pem" --tls-key "$BED_NATS_DIR/key.pem" \
  > "$BED_NATS_DIR/nats.conf.new" || die "dvms nats-config"
if ! cmp -s "$BED_NATS_DIR/nats.conf.new" "$BED_NATS_DIR/nats.conf"; then
  mv -f "$BED_NATS_DIR/nats.conf.new" "$BED_NATS_DIR/nats.conf"
  bash "$BED_DIR/outage.sh" nats stop >/dev/null
fi
rm -f "$BED_NATS_DIR/nats.conf.new"
bash "$BED_DIR/outage.sh" nats start

# What dvms status/events/plans run here need (observer key, CA).
DVMS_KEYS_DIR="$KEYS" DVMS_NATS_NKEY_AUTH=true DVMS_NATS_NKEY_SEED="$OBS/ops.key" \
  DVMS_NATS_TLS_CA="$BED_NATS_DIR/cert.pem" DVMS_REGION="$DVMS_FUNC_REGION" \
  DVMS_OS_CLOUD="$DVMS_FUNC_CLOUD" DVMS_CLOUDS_YAML="$DVMS_FUNC_DIR/clouds.yaml" \
  DVMS_NATS_URL="nats://$BED_GW:$BED_NATS_PORT" dvms_write_config "$DVMS_HOSTS_DIR/dvms.conf"

# 3. Each host: public keys, CA, clouds.yaml, dvms.conf, the unit.
for h in "${hosts[@]}"; do
  r="$ROOTS_DIR/$h/root"
  ip=$(host_ip "${h#kvm-}")
  install -d -m 0750 "$r/etc/dvms/keys/operators"
  for p in "$KEYS"/*.pub; do install -m 0644 "$p" "$r/etc/dvms/keys/"; done
  install -m 0644 "$KEYS/operators/operator.pub" "$r/etc/dvms/keys/operators/"
  install -m 0644 "$BED_NATS_DIR/cert.pem" "$r/etc/dvms/nats-ca.pem"
  install -d -m 0755 "$r/etc/openstack"
  cat > "$r/etc/openstack/clouds.yaml" <<EOT
clouds:
  $DVMS_FUNC_AGENT_CLOUD:
    auth:
      auth_url: $KEYSTONE_URL
      username: dvms
      password: $DVMS_FUNC_AGENT_PASSWORD
      project_name: dvms
      user_domain_name: Default
      project_domain_name: Default
    region_name: $DVMS_FUNC_REGION
    interface: public
    identity_api_version: 3
EOT
  DVMS_KEYS_DIR=/etc/dvms/keys DVMS_NATS_NKEY_AUTH=true DVMS_NATS_TLS_CA=/etc/dvms/nats-ca.pem \
    DVMS_REGION="$DVMS_FUNC_REGION" DVMS_OS_CLOUD="$DVMS_FUNC_AGENT_CLOUD" \
    DVMS_CLOUDS_YAML=/etc/openstack/clouds.yaml DVMS_NATS_URL="nats://$BED_GW:$BED_NATS_PORT" \
    DVMS_MONITOR_SOURCE=cgroup DVMS_RAFT_ADVERTISE="$ip:7420" dvms_write_config "$r/etc/dvms/dvms.conf"
  # Its metrics and /healthz on the host's address (reachable from here).
  sed -i "0,/^\[DEFAULT\]$/s//[DEFAULT]\nmetrics_listen = $ip:9464/" "$r/etc/dvms/dvms.conf"
  # The agent runs as dvms: it reads its config, keys and clouds.yaml.
  chroot "$r" chown -R root:dvms /etc/dvms /etc/openstack/clouds.yaml
  chroot "$r" chown dvms:dvms "/etc/dvms/keys/$h.key"
  chmod 0640 "$r/etc/openstack/clouds.yaml" "$r/etc/dvms/dvms.conf"
  chmod 0600 "$r/etc/dvms/keys/$h.key"
  install -m 0644 "$UNIT" "$r/etc/systemd/system/dvms-agent@.service"
  hexec "$h" systemctl daemon-reload
  hexec "$h" systemctl enable --now --no-block "dvms-agent@$h" >>"$HOSTS_LOG_DIR/agents.log" 2>&1 \
    || fail_with_log "systemctl enable --now dvms-agent@$h" "$HOSTS_LOG_DIR/agents.log"
  log "$h: systemctl enable --now dvms-agent@$h"
done

for h in "${hosts[@]}"; do
  if ! wait_for 120 "dvms-agent@$h active (READY=1)" hexec "$h" systemctl is-active --quiet "dvms-agent@$h"; then
    hexec "$h" systemctl --no-pager status "dvms-agent@$h" >>"$HOSTS_LOG_DIR/agents.log" 2>&1 || true
    hexec "$h" journalctl --no-pager -n 40 -u "dvms-agent@$h" >>"$HOSTS_LOG_DIR/agents.log" 2>&1 || true
    fail_with_log "dvms-agent@$h did not become ready" "$HOSTS_LOG_DIR/agents.log"
  fi
done
