# shellcheck shell=bash
# For scripts that use a running functional cloud (pkg/check.sh,
# plugincheck/run.sh): its address is the one up.sh wrote into
# $DVMS_FUNC_DIR/clouds.yaml (loopback, or the test bed's bridge in CI),
# then lib.sh's settings and helpers.
DVMS_FUNC_DIR="${DVMS_FUNC_DIR:-/tmp/dvms-functional}"
if [ -z "${DVMS_FUNC_HOST_IP:-}" ] && [ -r "$DVMS_FUNC_DIR/clouds.yaml" ]; then
  DVMS_FUNC_HOST_IP=$(sed -n 's|^ *auth_url: http://\([^:/]*\).*|\1|p' "$DVMS_FUNC_DIR/clouds.yaml" | head -n 1)
fi
export DVMS_FUNC_HOST_IP="${DVMS_FUNC_HOST_IP:-127.0.0.1}"
# shellcheck source=devstack/functional/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
