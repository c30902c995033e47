#!/usr/bin/env bash
# strata.node_pillars (Salt's postgres ext_pillar, migration 0009) vs the Uyuni RFC's
# suse_minion_pillars, on the same data set in one strata's embedded PostgreSQL cluster, in
# one run (compare ratios, never absolute figures):
#
#   bash bench/node-pillars.sh             # static membership only (the anchor's shape)
#   SELECTORS=1 bash bench/node-pillars.sh # plus every 10th group selecting env=prod
#
# Each round runs pgbench for SECS seconds (default 15) with 8 clients on: the anchor's
# function (../shared/bench/anchor-uyuni-pgbench.sql), the anchor's unmerged UNION query (the
# floor of an SQL-only design, anchor-uyuni-union.sql), and node_pillars for a random minion.
# Results and their reading are in docs/benchmarks.md ("node_pillars vs the RFC's function").
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
anchors=${ANCHORS:-../shared/bench}
[ -d "$anchors" ] || anchors=../../shared/bench # from a git worktree under wt/
secs=${SECS:-15}
rounds=${ROUNDS:-3}
work=$(mktemp -d /tmp/strata-node-pillars-XXXXXX)
chmod 755 "$work"
cleanup() {
	[ -n "${pid:-}" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/strata" ./cmd/strata
start_strata "$work"
pg="postgresql://strata@/strata?host=$work/data/pg-socket&port=5432&sslmode=disable"
psql() { command psql -X -q -v ON_ERROR_STOP=1 "$pg" "$@"; }

echo "== loading the anchor (schema uyuni) and the same shape into strata's tables (selectors=${SELECTORS:-0})"
psql -f "$anchors/anchor-uyuni-pillars.sql" >/dev/null
psql -v selectors="${SELECTORS:-0}" -f bench/node-pillars-data.sql >/dev/null
cat >"$work/strata.sql" <<'SQL'
\set m random(1, 10000)
SELECT pillar FROM strata.node_pillars('minion-' || :m);
SQL
echo "== rows per call (minion-42 env=prod, minion-12 env=dev): anchor $(psql -tA -c "SET search_path = uyuni; SELECT count(*) FROM suse_minion_pillars('minion-42')"), node_pillars $(psql -tA -c "SELECT count(*) FROM strata.node_pillars('minion-42')") and $(psql -tA -c "SELECT count(*) FROM strata.node_pillars('minion-12')") (NULL rows: $(psql -tA -c "SELECT count(*) FROM strata.node_pillars('minion-42') WHERE pillar IS NULL"))"
tps() {
	PGOPTIONS="-c search_path=uyuni" pgbench -n -T "$secs" -c 8 -j 2 -f "$1" "$pg" 2>/dev/null |
		grep -E '^tps' | sed 's/tps = \([0-9.]*\).*/\1/'
}
for round in $(seq 1 "$rounds"); do
	a=$(tps "$anchors/anchor-uyuni-pgbench.sql")
	u=$(tps "$anchors/anchor-uyuni-union.sql")
	s=$(tps "$work/strata.sql")
	echo "round=$round anchor_function_tps=$a anchor_union_tps=$u node_pillars_tps=$s ratio=$(echo "scale=1; $s / $a" | bc)"
done
