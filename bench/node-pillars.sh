#!/usr/bin/env bash
# strata.node_pillars (Salt's postgres ext_pillar, migration 0009) vs the Uyuni RFC's
# suse_minion_pillars, on the same data set in one strata's embedded PostgreSQL cluster, in
# one run (compare ratios, never absolute figures):
#
#   bash bench/node-pillars.sh             # static membership only (the anchor's shape)
#   SELECTORS=1 bash bench/node-pillars.sh # plus every 10th group selecting env=prod
#   STRATA_SESSION_DATABASE_URL=off ...     # no render cache: every HTTP render cold
#   EXEC_MODE=exec ...                      # the HTTP renders from a second strata that talks to
#                                           # the cluster as behind PgBouncer in transaction mode:
#                                           # no named prepared statements (pgx's
#                                           # default_query_exec_mode=exec; simple_protocol too)
#
# Each round runs pgbench for SECS seconds (default 15) with 8 clients on: the anchor's
# function (../shared/bench/anchor-uyuni-pgbench.sql), the anchor's unmerged UNION query (the
# floor of an SQL-only design, anchor-uyuni-union.sql), and node_pillars for a random minion;
# then the merged render over HTTP (GET /v1/nodes/minion-<random>/pillar, 8 clients) for as
# long, and the floor: a one-row authenticated GET (/v1/nodes/minion-<random>) for as long.
# Each figure comes with p50 and p99.
# Results and their reading are in docs/benchmarks.md ("node_pillars vs the RFC's function").
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
anchors=${ANCHORS:-../shared/bench}
[ -d "$anchors" ] || anchors=../../shared/bench # from a git worktree under wt/
anchors=$(cd "$anchors" && pwd)
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

echo "== loading the anchor (schema uyuni) and the same shape into strata's tables (selectors=${SELECTORS:-0})"
psql -f "$anchors/anchor-uyuni-pillars.sql" >/dev/null
psql -v selectors="${SELECTORS:-0}" -f bench/node-pillars-data.sql >/dev/null
cat >"$work/strata.sql" <<'SQL'
\set m random(1, 10000)
SELECT pillar FROM strata.node_pillars('minion-' || :m);
SQL
echo "== rows per call (minion-42 env=prod, minion-12 env=dev): anchor $(psql -tA -c "SET search_path = uyuni; SELECT count(*) FROM suse_minion_pillars('minion-42')"), node_pillars $(psql -tA -c "SELECT count(*) FROM strata.node_pillars('minion-42')") and $(psql -tA -c "SELECT count(*) FROM strata.node_pillars('minion-12')") (NULL rows: $(psql -tA -c "SELECT count(*) FROM strata.node_pillars('minion-42') WHERE pillar IS NULL"))"
# run SCRIPT: pgbench for $secs s with 8 clients; prints "tps p50_ms p99_ms" (latencies from
# pgbench's per-transaction log).
run() {
	rm -f "$work"/pgbench_log.*
	local tps
	tps=$(cd "$work" && PGOPTIONS="-c search_path=uyuni" pgbench -n -T "$secs" -c 8 -j 2 -l -f "$1" "$pg" 2>/dev/null |
		grep -E '^tps' | sed 's/tps = \([0-9.]*\).*/\1/')
	cat "$work"/pgbench_log.* | awk '{print $3}' | sort -n >"$work/lat"
	local n
	n=$(wc -l <"$work/lat")
	echo "$tps $(sed -n "$(((n + 1) / 2))p" "$work/lat" | awk '{printf "%.2f", $1/1000}') $(sed -n "$(((n * 99 + 99) / 100))p" "$work/lat" | awk '{printf "%.2f", $1/1000}')"
}
go build -o "$work/labels" ./bench/labels
render_server=$server
render_pid=$pid
if [ -n "${EXEC_MODE:-}" ]; then
	# A second replica on the same database, in the pooler's query mode, without a session
	# (so without a render cache, as a transaction-mode pooler gives none).
	"$work/strata" serve --database-url "$pg&default_query_exec_mode=$EXEC_MODE" --session-database-url off \
		--listen 127.0.0.1:0 2>"$work/serve2.log" &
	pid2=$!
	trap 'kill -TERM "$pid2" 2>/dev/null; wait "$pid2" 2>/dev/null; cleanup' EXIT
	for _ in $(seq 1 300); do
		addr2=$(grep -o '"msg":"strata serving","addr":"[^"]*"' "$work/serve2.log" | sed 's/.*"addr":"//; s/"$//' || true)
		[ -n "$addr2" ] && curl -sf "http://$addr2/readyz" >/dev/null && break
		sleep 0.1
	done
	[ -n "$addr2" ] || { echo "the second strata did not start"; cat "$work/serve2.log"; exit 1; }
	render_server="http://$addr2"
	render_pid=$pid2
	echo "== HTTP renders from a replica in query mode $EXEC_MODE, no render cache"
fi
for round in $(seq 1 "$rounds"); do
	read -r a ap50 ap99 <<<"$(run "$anchors/anchor-uyuni-pgbench.sql")"
	read -r u up50 up99 <<<"$(run "$anchors/anchor-uyuni-union.sql")"
	read -r s sp50 sp99 <<<"$(run "$work/strata.sql")"
	echo "round=$round anchor_function tps=$a p50=${ap50}ms p99=${ap99}ms | anchor_union tps=$u p50=${up50}ms p99=${up99}ms | node_pillars tps=$s p50=${sp50}ms p99=${sp99}ms ratio=$(echo "scale=1; $s / $a" | bc)"
	# The merged render over HTTP (GET /v1/nodes/{node}/pillar, 8 clients, random minion):
	# strata merges in Go and caches per replica; the first round starts with a cold cache.
	# Each HTTP run also reports the CPU time per request of the serving strata, of
	# PostgreSQL's processes and of the load generator (from /proc): on a shared machine
	# these are far steadier than the rates, and on a machine the three saturate the rates'
	# ratio is the inverse of the CPU times' ratio.
	http_run() {
		local out s0 p0 s1 p1 n
		s0=$(cpu_ms "$render_pid") p0=$(cpu_ms $(pg_pids "$work"))
		out=$( { TIMEFORMAT='%U %S'; time "$work/labels" get -server "$render_server" -token "$token" -c 8 -n 100000000 -duration "${secs}s" -path "$1" -range 10000 2>&1; } 2>&1)
		s1=$(cpu_ms "$render_pid") p1=$(cpu_ms $(pg_pids "$work"))
		n=$(echo "$out" | grep -o 'requests=[0-9]*' | cut -d= -f2)
		local lg
		lg=$(echo "$out" | tail -1 | awk '{printf "%d", ($1 + $2) * 1000}')
		echo "$(echo "$out" | grep requests=) cpu_per_request_ms: strata=$(echo "scale=3; ($s1 - $s0) / $n" | bc) postgres=$(echo "scale=3; ($p1 - $p0) / $n" | bc) loadgen=$(echo "scale=3; $lg / $n" | bc) total=$(echo "scale=3; ($s1 - $s0 + $p1 - $p0 + $lg) / $n" | bc)"
	}
	echo "round=$round http_render $(http_run '/v1/nodes/minion-{r}/pillar')"
	# The floor: the cheapest authenticated read, one node's row (GET /v1/nodes/minion-<random>),
	# from the same server for as long, so a render's figure reads as a share of it.
	echo "round=$round http_get_floor $(http_run '/v1/nodes/minion-{r}')"
done
