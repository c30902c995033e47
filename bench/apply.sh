#!/usr/bin/env bash
# Wall time of `strata node apply -f FILE` for an inventory of NODES nodes (default 10,000),
# each with 5 labels and 2 static groups: the first apply (every node created) and a re-apply
# of the same file (every node unchanged), ROUNDS rounds (default 5), medians printed.
#
#   bash bench/apply.sh [ROUNDS] [NODES]
#
# Starts strata on the embedded default (needs the PostgreSQL server binaries, like strata
# serve), or uses a running one when STRATA_SERVER and STRATA_TOKEN are set (an admin token).
# Each round applies to a fresh org bench-<pid>-<round> with its own node names, so every
# first apply really creates; on a running server the orgs are deleted with --cascade at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
rounds=${1:-5}
nodes=${2:-10000}
work=$(mktemp -d /tmp/strata-bench-apply-XXXXXX)
chmod 755 "$work"
tag="bench-$$"
orgs=()
pid=
cleanup() {
	# On a server of the caller's, remove what this run made.
	[ -z "${pid:-}" ] && for o in "${orgs[@]}"; do "$work/strata" org delete "$o" --cascade >/dev/null 2>&1 || true; done
	[ -n "${pid:-}" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/strata" ./cmd/strata
if [ -z "${STRATA_SERVER:-}" ]; then
	start_strata "$work"
	STRATA_TOKEN=$token
	export STRATA_SERVER="http://$addr" STRATA_TOKEN
	where="embedded PostgreSQL (strata serve --data-dir)"
else
	: "${STRATA_TOKEN:?STRATA_TOKEN must be set with STRATA_SERVER}"
	where="$STRATA_SERVER"
fi
s="$work/strata"

# inventory ORG PREFIX: NODES lines, 5 labels and the 2 groups web and db each.
inventory() {
	awk -v org="$1" -v p="$2" -v n="$nodes" 'BEGIN {
		split("prod staging", env, " "); split("web db cache", role, " ")
		for (i = 1; i <= n; i++)
			printf "{\"metadata\":{\"name\":\"%s%05d\",\"labels\":{\"env\":\"%s\",\"rack\":\"r%02d\",\"role\":\"%s\",\"dc\":\"dc%d\",\"example.com/id\":\"%d\"}},\"spec\":{\"org\":\"%s\"},\"groups\":[\"web\",\"db\"]}\n",
				p, i, env[i % 2 + 1], i % 40, role[i % 3 + 1], i % 4, i, org
	}'
}

ms() { echo $((($2 - $1) / 1000000)); }
declare -a first again
for r in $(seq 1 "$rounds"); do
	org="$tag-$r"
	orgs+=("$org")
	"$s" org create "$org" >/dev/null
	"$s" group --org "$org" create web --priority 10 >/dev/null
	"$s" group --org "$org" create db >/dev/null
	inventory "$org" "$org-n" >"$work/inv.ndjson"
	t0=$(date +%s%N)
	out=$("$s" node apply -f "$work/inv.ndjson" -q)
	t1=$(date +%s%N)
	[ "$out" = "$nodes lines: $nodes created, 0 updated, 0 unchanged, 0 errors" ] || { echo "first apply: $out"; exit 1; }
	out=$("$s" node apply -f "$work/inv.ndjson" -q)
	t2=$(date +%s%N)
	[ "$out" = "$nodes lines: 0 created, 0 updated, $nodes unchanged, 0 errors" ] || { echo "re-apply: $out"; exit 1; }
	first+=("$(ms "$t0" "$t1")")
	again+=("$(ms "$t1" "$t2")")
done

median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mf=$(echo "${first[*]}" | median)
ma=$(echo "${again[*]}" | median)
echo "strata node apply, $nodes nodes (5 labels, 2 groups each), $rounds rounds, against $where"
printf 'first apply (all created)    median %6d ms  %6.0f nodes/s   (all: %s)\n' "$mf" "$(echo "$nodes $mf" | awk '{print $1 * 1000 / $2}')" "${first[*]}"
printf 're-apply   (all unchanged)   median %6d ms  %6.0f nodes/s   (all: %s)\n' "$ma" "$(echo "$nodes $ma" | awk '{print $1 * 1000 / $2}')" "${again[*]}"
