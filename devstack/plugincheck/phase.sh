#!/usr/bin/env bash
# One DevStack phase of the dvms plugin, run the way DevStack's own scripts
# run it, on a node where DevStack is checked out at $TOP_DIR (run.sh runs
# this inside a root booted with systemd as PID 1, as the stack user).
#   usage: phase.sh prereqs|install|post-config|extra|unstack|clean
# What stack.sh (or unstack.sh, clean.sh) does before its plugins' phases,
# and nothing else: DevStack's function library, the distribution
# (GetDistro), local.conf's localrc section, stackrc, the service
# libraries, then `run_phase override_defaults` and `run_phase source`
# (every plugin's devstack/settings); then:
#   prereqs      install_package of get_plugin_packages (devstack/files/debs/<plugin>),
#                as tools/install_prereqs.sh does
#   install, post-config, extra   run_phase stack PHASE (stack.sh)
#   unstack      run_phase unstack (unstack.sh)
#   clean        run_phase clean (clean.sh)
# The DevStack checkout is not part of dvms: run.sh takes its path.
set -o errexit
set -o xtrace
phase=${1:?usage: phase.sh prereqs|install|post-config|extra|unstack|clean}
TOP_DIR=${TOP_DIR:?TOP_DIR: the DevStack checkout}
cd "$TOP_DIR"

# shellcheck source=/dev/null
source "$TOP_DIR/functions"
GetDistro
rm -f "$TOP_DIR/.localrc.auto"
extract_localrc_section "$TOP_DIR/local.conf" "$TOP_DIR/localrc" "$TOP_DIR/.localrc.auto"
# shellcheck source=/dev/null
source "$TOP_DIR/stackrc"
# The service libraries stack.sh sources before its plugins' settings (the
# plugin reads their variables: KEYSTONE_SERVICE_URI, NOVA_CONF, ...).
for lib in database rpc_backend apache tls infra keystone glance nova placement; do
    # shellcheck source=/dev/null
    source "$TOP_DIR/lib/$lib"
done
run_phase override_defaults
run_phase source

case $phase in
    prereqs)
        # shellcheck disable=SC2046 # a list of package names
        install_package $(get_plugin_packages)
        ;;
    install | post-config | extra) run_phase stack "$phase" ;;
    unstack) run_phase unstack ;;
    clean) run_phase clean ;;
    *) die $LINENO "unknown phase $phase" ;;
esac
