# shellcheck shell=bash
# DevStack plugin of dvms: a dvms agent beside every nova-compute, and a
# NATS server on the controller; with `enable_service dvms-scheduler-api`
# (opt-in), dvms scheduler-api on the controller and its weigher in
# nova-scheduler (nova/dvms_nova). Phases:
#   stack install      build bin/dvms (go build ./cmd/dvms)
#   stack post-config  write /etc/dvms/dvms.conf (and nova.conf's weigher)
#   stack extra        start devstack@dvms-nats (controller) and
#                      devstack@dvms-agent (compute nodes) and
#                      devstack@dvms-scheduler-api
#   unstack / clean    stop them / remove config and binary

_XTRACE_DVMS=$(set +o | grep xtrace)
set -o xtrace

# shellcheck source=devstack/lib/dvms
source "$DVMS_DIR/devstack/lib/dvms"

if is_service_enabled dvms-agent dvms-nats dvms-scheduler-api; then
    if [[ "$1" == "stack" && "$2" == "install" ]]; then
        echo_summary "Building dvms"
        install_dvms
    elif [[ "$1" == "stack" && "$2" == "post-config" ]]; then
        echo_summary "Configuring dvms"
        configure_dvms
    elif [[ "$1" == "stack" && "$2" == "extra" ]]; then
        echo_summary "Starting dvms"
        start_dvms
    fi
    if [[ "$1" == "unstack" ]]; then
        stop_dvms
    fi
    if [[ "$1" == "clean" ]]; then
        cleanup_dvms
    fi
fi

$_XTRACE_DVMS
