#!/usr/bin/env bash
# Installs Debian's OpenStack Zed packages for the functional tier, without
# letting any package configure a database, rabbit, keystone or endpoints,
# and without starting any daemon. Idempotent.
set -euo pipefail
# shellcheck source=devstack/functional/lib.sh
. "$(dirname "$0")/lib.sh"

export DEBIAN_FRONTEND=noninteractive
pkgs=(
  mariadb-server rabbitmq-server uwsgi uwsgi-plugin-python3
  keystone glance-api placement-api
  nova-api nova-conductor nova-scheduler nova-compute nova-compute-ironic
  python3-openstackclient python3-osc-placement python3-pymysql
  curl procps
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
  log "all packages already installed"
  exit 0
fi

log "pre-answering debconf: no package configures a db, rabbit, keystone auth or endpoint"
{
  for pkg in keystone glance-common glance-api placement-common placement-api nova-common nova-api nova-compute; do
    for q in configure_db dbconfig-install configure_rabbit configure_ksat register-endpoint configure_api-endpoint; do
      echo "$pkg $pkg/$q boolean false"
    done
  done
} | debconf-set-selections

log "blocking daemon start-up during install (policy-rc.d)"
printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
chmod +x /usr/sbin/policy-rc.d
trap 'rm -f /usr/sbin/policy-rc.d' EXIT

log "apt-get update"
apt-get update -qq >"$LOG_DIR/apt-update.log" 2>&1 || fail_with_log "apt-get update" "$LOG_DIR/apt-update.log"
log "apt-get install ${#missing[@]} packages (about 2 minutes)"
apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$LOG_DIR/apt-install.log" 2>&1 \
  || fail_with_log "apt-get install" "$LOG_DIR/apt-install.log"
log "installed"
