#!/usr/bin/env bash
# Installs Debian's OpenStack Zed packages for the functional tier
# (Debian 12, root), without letting any package configure a database,
# rabbit, keystone or endpoints, and without starting any daemon.
# Idempotent: does nothing when every package is already installed.
# Logs: $DVMS_FUNC_DIR/logs/apt-*.log
set -euo pipefail
_t0=$(date +%s)
# shellcheck source=devstack/functional/lib.sh
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || die "install.sh must run as root (apt-get)"
export DEBIAN_FRONTEND=noninteractive
pkgs=(
  mariadb-server mariadb-client rabbitmq-server uwsgi uwsgi-plugin-python3
  keystone glance-api placement-api
  nova-api nova-conductor nova-scheduler nova-compute nova-compute-ironic
  python3-openstackclient python3-osc-placement python3-openstacksdk python3-pymysql
  curl procps nats-server openssl
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
  log "all ${#pkgs[@]} packages already installed"
  exit 0
fi
log "to install: ${missing[*]}"

log "pre-answering debconf: no package configures a db, rabbit, keystone auth or endpoint"
{
  for pkg in keystone glance-common glance-api placement-common placement-api nova-common nova-api nova-compute; do
    for q in configure_db dbconfig-install dbconfig-upgrade dbconfig-remove configure_rabbit \
      configure_ksat register-endpoint configure_api-endpoint; do
      echo "$pkg $pkg/$q boolean false"
    done
  done
} | debconf-set-selections

# Package scripts must not start daemons (there is no systemd here, and
# up.sh runs its own). Keep an existing policy-rc.d as it was.
policy=/usr/sbin/policy-rc.d
if [ -e "$policy" ]; then
  log "keeping the existing $policy (saved as $policy.dvms-saved)"
  cp -p "$policy" "$policy.dvms-saved"
fi
restore_policy() {
  if [ -e "$policy.dvms-saved" ]; then
    mv -f "$policy.dvms-saved" "$policy"
  else
    rm -f "$policy"
  fi
}
trap restore_policy EXIT
log "blocking daemon start-up during install ($policy exits 101)"
printf '#!/bin/sh\nexit 101\n' > "$policy"
chmod +x "$policy"

run_logged "apt-get update" "$LOG_DIR/apt-update.log" apt-get update -q
for attempt in 1 2; do
  log "apt-get install ${#missing[@]} packages, attempt $attempt (about 2 minutes; log $LOG_DIR/apt-install.log)"
  if apt-get install -y -q --no-install-recommends -o Dpkg::Options::=--force-confdef \
    -o Dpkg::Options::=--force-confold "${missing[@]}" >>"$LOG_DIR/apt-install.log" 2>&1; then
    break
  fi
  [ "$attempt" = 2 ] && fail_with_log "apt-get install" "$LOG_DIR/apt-install.log"
  log "apt-get install failed; repairing with dpkg --configure -a and retrying"
  dpkg --configure -a >>"$LOG_DIR/apt-install.log" 2>&1 || true
  apt-get update -q >>"$LOG_DIR/apt-update.log" 2>&1 || true
done
log "installed in $(( $(date +%s) - _t0 ))s"
