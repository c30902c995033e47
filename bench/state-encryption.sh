#!/usr/bin/env bash
# State writes and reads of an encrypted project against a plain one, on one strata's
# embedded cluster with fsync and synchronous_commit on, in one run (compare the ratio):
#
#   bash bench/state-encryption.sh [ROUNDS] [N]     (default 3 rounds of 200 POSTs and GETs)
#
# The state is ~27 KB (100 terraform_data resources, as BenchmarkStateGetPost). Each round
# POSTs N new serials to a workspace of each project, alternating which goes first, then GETs
# it N times; one curl per request, so both sides carry the same client overhead.
# Results in docs/benchmarks.md ("Encrypted projects").
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
rounds=${1:-3}
n=${2:-200}
work=$(mktemp -d /tmp/strata-state-enc-XXXXXX)
chmod 755 "$work"
cleanup() {
	[ -n "${pid:-}" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/strata" ./cmd/strata
start_strata "$work"
echo "== fsync=$(psql -tA -c 'SHOW fsync') synchronous_commit=$(psql -tA -c 'SHOW synchronous_commit')"
export STRATA_SERVER=$server STRATA_TOKEN=$token
"$work/strata" project create plain >/dev/null
"$work/strata" project create vault --encrypt >/dev/null

# state SERIAL: a ~27 KB state.
state() {
	printf '{"version":4,"terraform_version":"1.11.4","serial":%d,"lineage":"bench-lineage","outputs":{},"resources":[' "$1"
	for i in $(seq 1 100); do
		[ "$i" -gt 1 ] && printf ','
		printf '{"mode":"managed","type":"terraform_data","name":"r%d","provider":"provider[\\"terraform.io/builtin/terraform\\"]","instances":[{"schema_version":0,"attributes":{"id":"3f2a6c1e-%04d-4b7a-9c1d-2e5f8a7b6c%02d","input":{"value":"value-%d-padding-padding-padding-padding-padding-padding-padding-padding-padding-padding-padding","type":"string"},"output":null,"triggers_replace":null},"sensitive_attributes":[]}]}' "$i" "$i" "$((i % 100))" "$i"
	done
	printf ']}'
}
for s in $(seq 1 $((rounds * n))); do state "$s" >"$work/s$s.json"; done
echo "== state size: $(wc -c <"$work/s1.json") bytes"

posts() { # PROJECT FIRST LAST: seconds for POSTs of serials FIRST..LAST
	local t0
	t0=$(date +%s.%N)
	for s in $(seq "$2" "$3"); do
		curl -sf -X POST -H "Authorization: Bearer $token" --data-binary "@$work/s$s.json" "$server/v1/state/$1/default" >/dev/null
	done
	echo "$(date +%s.%N) - $t0" | bc
}
gets() { # PROJECT: seconds for N GETs
	local t0
	t0=$(date +%s.%N)
	for _ in $(seq 1 "$n"); do
		curl -sf -H "Authorization: Bearer $token" "$server/v1/state/$1/default" >/dev/null
	done
	echo "$(date +%s.%N) - $t0" | bc
}
for r in $(seq 1 "$rounds"); do
	first=$(((r - 1) * n + 1))
	last=$((r * n))
	if [ $((r % 2)) -eq 1 ]; then
		p=$(posts plain "$first" "$last"); e=$(posts vault "$first" "$last")
	else
		e=$(posts vault "$first" "$last"); p=$(posts plain "$first" "$last")
	fi
	gp=$(gets plain); ge=$(gets vault)
	echo "round=$r POST plain=$(echo "scale=2; 1000 * $p / $n" | bc)ms encrypted=$(echo "scale=2; 1000 * $e / $n" | bc)ms ratio=$(echo "scale=2; $e / $p" | bc) | GET plain=$(echo "scale=2; 1000 * $gp / $n" | bc)ms encrypted=$(echo "scale=2; 1000 * $ge / $n" | bc)ms ratio=$(echo "scale=2; $ge / $gp" | bc)"
done
