# shellcheck shell=bash
# DevStack plugin of dvms: a dvms agent beside every nova-compute, and the
# region's NATS server (the distribution's nats-server) on the controller;
# with `enable_service dvms-scheduler-api` (opt-in), dvms scheduler-api on
# the controller and its weigher in nova-scheduler (nova/dvms_nova).
# settings: define_plugin dvms, the services and DVMS_* defaults;
# files/debs/dvms: the packages every node needs. Phases:
#   stack install      dvms from $DVMS_PACKAGE (a .deb) or go build
#                      ./cmd/dvms (GOTOOLCHAIN); nats-server (controller)
#   stack post-config  /etc/dvms/dvms.conf, the key pair of
#                      $DVMS_AGENT_HOST, nats-server's config (and
#                      nova.conf's weigher)
#   stack extra        nats-server.service (controller),
#                      devstack@dvms-agent (compute nodes) and
#                      devstack@dvms-scheduler-api: Restart=on-failure,
#                      systemctl reload re-reads the config
#   unstack            stop (and disable) them
#   clean              remove the units, config, keys and dvms itself

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
