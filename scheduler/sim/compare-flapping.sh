#!/bin/sh
# compare-flapping.sh: `dvms simulate` on the flapping workload with the
# defaults (off) and with the ON flags (by default the destination peak
# window, the move cost and the server cooldown), per seed, side by side,
# and the ratios (on / off) of migrations and overloaded host-seconds.
#
#   scheduler/sim/compare-flapping.sh [DVMS] [SEEDS] -- [ON FLAGS...]
#
# DVMS is the dvms binary (default: dvms on PATH), SEEDS a list ("1 2 3").
# HOSTS, SERVERS, DURATION and WORKLOAD set the cloud (1000, 12000, 10m,
# flapping:4m). Needs jq. Runs one arm after the other (nice it).
set -eu
dvms=${1:-dvms}
seeds=${2:-1 2 3}
shift 2 2>/dev/null || shift $#
[ "${1:-}" = "--" ] && shift
# The default ON flags: a peak window of one flap period (the profile has
# seen both halves of a swing), a cooldown a little longer than half a
# period (a server cannot follow one swing back), moves priced.
[ $# -gt 0 ] || set -- --destination-peak-window 4m --move-cost 0.5 --move-cost-per-second 0.1 --server-cooldown 3m
hosts=${HOSTS:-1000}
servers=${SERVERS:-12000}
duration=${DURATION:-10m}
workload=${WORKLOAD:-flapping:4m}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf '%-4s %-3s %10s %12s %10s %10s %10s %10s %10s\n' seed arm migrations overload_hs events relieved3x moved_back moved_again violations
for seed in $seeds; do
	for arm in off on; do
		if [ "$arm" = on ]; then
			"$dvms" simulate --hosts "$hosts" --servers "$servers" --duration "$duration" --clock virtual \
				--workload "$workload" --oracle=false --report "" -f json --seed "$seed" "$@" >"$out/$arm-$seed.json" 2>"$out/$arm-$seed.err" || true
		else
			"$dvms" simulate --hosts "$hosts" --servers "$servers" --duration "$duration" --clock virtual \
				--workload "$workload" --oracle=false --report "" -f json --seed "$seed" >"$out/$arm-$seed.json" 2>"$out/$arm-$seed.err" || true
		fi
		jq -r --arg seed "$seed" --arg arm "$arm" \
			'[$seed, $arm, .migrations.total, .overload_seconds, .events.total, .oscillations.host_relieved, .oscillations.server_moved_back, .oscillations.moved_again_within_window, .oscillations.cooldown_violations] | @tsv' \
			"$out/$arm-$seed.json" | awk -F'\t' '{printf "%-4s %-3s %10s %12s %10s %10s %10s %10s %10s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9}'
	done
	jq -rs --arg seed "$seed" '"\($seed)    on/off: migrations \(.[1].migrations.total / .[0].migrations.total * 1000 | round / 10) %, overload \(.[1].overload_seconds / .[0].overload_seconds * 1000 | round / 10) %"' \
		"$out/off-$seed.json" "$out/on-$seed.json"
done
