#!/bin/sh
# Checks a Grafana dashboard's JSON against Grafana's own schema: the
# Dashboard type of the @grafana/schema npm package (generated from
# Grafana's CUE kinds), with TypeScript's excess-property checks, so an
# unknown key, a missing required one or a wrong type is refused.
#
#   etc/grafana/schema-check.sh [DASHBOARD.json]   (default: etc/grafana/dvms.json)
#
# Needs node and npm; installs @grafana/schema and typescript into
# $DVMS_GRAFANA_SCHEMA_DIR (default: a temporary directory, removed after).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dashboard=${1:-$here/dvms.json}
schema_version=${GRAFANA_SCHEMA_VERSION:-13.2.3}
dir=${DVMS_GRAFANA_SCHEMA_DIR:-}
if [ -z "$dir" ]; then
	dir=$(mktemp -d)
	trap 'rm -rf "$dir"' EXIT
fi
cd "$dir"
if [ ! -d node_modules/@grafana/schema ]; then
	[ -f package.json ] || npm init -y >/dev/null
	npm install --no-audit --no-fund --silent "@grafana/schema@$schema_version" typescript@5 >/dev/null
fi
{
	printf "import type { Dashboard } from '@grafana/schema';\nexport const dashboard = ("
	cat "$dashboard"
	printf ") satisfies Dashboard;\n"
} >check.ts
npx --no-install tsc --noEmit --strict --skipLibCheck --moduleResolution bundler --module esnext --target es2022 check.ts
echo "$dashboard: Grafana schema @grafana/schema@$schema_version: ok"
