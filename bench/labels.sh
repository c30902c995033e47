#!/usr/bin/env bash
# Label benchmarks, side by side with the anchors of ../shared/bench (seed 000's labels table
# as Cloud Foundry's ADR leaves it), in one strata's embedded PostgreSQL cluster, in one run:
#
#   bash bench/labels.sh patch            # HTTP PATCH of one label vs raw INSERT … ON CONFLICT (pgbench)
#   bash bench/labels.sh select [SIZE]    # selector list queries vs the naive EXISTS query, SIZE resources (default 100000);
#                                         # STRATA_LIST_INDEX_MAX_BYTES=-1 measures lists without the list index
#   bash bench/labels.sh scale            # PATCH over HTTP at 1, 4, 16, 64 clients vs raw upsert+nextval at the same
#                                         # concurrency, fsync on, and how many of strata's busy backends wait on an advisory lock;
#                                         # CLIENTS="16" picks the concurrencies. Each line also gives the CPU time per PATCH of
#                                         # PostgreSQL's processes and of strata (from /proc, utime + stime, before and after),
#                                         # and how many PATCHes so far were written from the list index's copy of their node
#                                         # in one round trip and how many found that copy overtaken
#   bash bench/labels.sh runs             # ROUNDS (default 3) runs of N (6400) PATCHes at C (16) clients, fsync on, on
#                                         # 1,000 nodes, each with its CPU per PATCH (and the writes from the index copy, as
#                                         # scale); the first run is the warm-up. For
#                                         # comparing two builds: run it from a worktree of each, alternating
#
# Results and their reading are in docs/benchmarks.md. Needs the PostgreSQL server binaries and
# pgbench (Debian: postgresql, postgresql-contrib), and farm-bench for the side-by-side timing.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
mode=${1:-patch}
size=${2:-100000}
anchors=${ANCHORS:-../shared/bench}
work=$(mktemp -d /tmp/strata-labels-XXXXXX)
chmod 755 "$work"
cleanup() {
	[ -n "${pid:-}" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/strata" ./cmd/strata
go build -o "$work/labels" ./bench/labels
start_strata "$work"

case "$mode" in
patch)
	"$work/labels" setup -server "$server" -token "$token" -nodes 1000
	psql -f "$anchors/anchor-labels.sql" >/dev/null
	n=16000 c=8
	echo "== PATCH of one label over HTTP ($n requests, $c clients) vs raw INSERT … ON CONFLICT ($n transactions, $c clients)"
	farm-bench -n 7 --timeout 600 \
		--vs "pgbench -n -t $((n / c)) -c $c -j 2 -f $anchors/anchor-labels-upsert.sql $pg" \
		-- "$work/labels" patch -server "$server" -token "$token" -n $n -c $c
	echo "== one run of each with its own figures"
	"$work/labels" patch -server "$server" -token "$token" -n $n -c $c
	pgbench -n -t $((n / c)) -c $c -j 2 -f "$anchors/anchor-labels-upsert.sql" "$pg" 2>/dev/null | grep -E 'tps|latency average'
	;;
scale)
	# Durable defaults: the embedded cluster runs with fsync and synchronous_commit on.
	"$work/labels" setup -server "$server" -token "$token" -nodes 1000
	psql -c "SHOW fsync" -c "SHOW synchronous_commit" -t | tr -s '\n' ' '; echo
	psql <<'SQL' >/dev/null
CREATE SCHEMA IF NOT EXISTS raw;
CREATE TABLE IF NOT EXISTS raw.labels (resource_id int, key text, value text, rv bigint, PRIMARY KEY (resource_id, key));
CREATE SEQUENCE IF NOT EXISTS raw.rv;
SQL
	cat >"$work/raw.sql" <<'SQL'
\set r random(1, 1000)
\set k random(0, 9)
\set v random(0, 50)
INSERT INTO raw.labels VALUES (:r, 'k' || :k, 'v' || :v, nextval('raw.rv'))
  ON CONFLICT (resource_id, key) DO UPDATE SET value = excluded.value, rv = excluded.rv;
SQL
	for c in ${CLIENTS:-1 4 16 64}; do
		n=$((c < 8 ? 3000 : c * 300))
		# Sample strata's backends while the PATCHes run: active ones, and those waiting on an
		# advisory lock (the commit-order lock of next_resource_version()).
		# Also those waiting on a lock of type object: the database-wide lock PostgreSQL's
		# NOTIFY takes at commit (async.c, PreCommit_Notify) and holds across the commit's
		# WAL flush, which every strata write takes (its change and render notifications).
		(while :; do psql -At -c "SELECT count(*) FILTER (WHERE state = 'active'), count(*) FILTER (WHERE wait_event = 'advisory'), count(*) FILTER (WHERE wait_event_type = 'Lock' AND wait_event = 'object') FROM pg_stat_activity WHERE application_name = 'strata'"; sleep 0.1; done) >"$work/waits" 2>/dev/null &
		sampler=$!
		pg_before=$(cpu_ms $(pg_pids "$work")) strata_before=$(cpu_ms "$pid")
		out=$("$work/labels" patch -server "$server" -token "$token" -n "$n" -c "$c")
		pg_after=$(cpu_ms $(pg_pids "$work")) strata_after=$(cpu_ms "$pid")
		kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null || true
		waits=$(awk -F'|' '{a += $1; w += $2; o += $3} END {if (a > 0) printf "%.0f%% of %d active samples waiting on an advisory lock, %.0f%% on the NOTIFY commit lock", 100 * w / a, a, 100 * o / a; else print "no samples"}' "$work/waits")
		raw=$(pgbench -n -t $((n / c)) -c "$c" -j 2 -f "$work/raw.sql" "$pg" 2>/dev/null | grep -E '^tps' | sed 's/tps = \([0-9.]*\).*/\1/')
		cpu="CPU per PATCH: PostgreSQL $(echo "scale=3; ($pg_after - $pg_before) / $n" | bc) ms, strata $(echo "scale=3; ($strata_after - $strata_before) / $n" | bc) ms (the sampler's queries included)"
		based=$(curl -sf "$server/metrics" | awk '/^strata_list_index_based_writes_total/ {b = $2} /^strata_list_index_stale_bases_total/ {s = $2} END {printf "%d from the index copy, %d overtaken", b, s}')
		echo "clients=$c strata: $out | $waits | $cpu | writes so far: $based | raw upsert+nextval tps=$raw"
	done
	;;
runs)
	"$work/labels" setup -server "$server" -token "$token" -nodes 1000
	psql -c "SHOW fsync" -c "SHOW synchronous_commit" -t | tr -s '\n' ' '; echo
	n=${N:-6400} c=${C:-16}
	for r in $(seq 1 "${ROUNDS:-3}"); do
		wal_before=$(psql -At -c "SELECT pg_current_wal_lsn() - '0/0'")
		# What strata's active backends are doing, sampled every 0.1 s: on a processor (CPU) or
		# waiting (type:event, e.g. IO:WALSync for the commit flush, Lock:object for NOTIFY's).
		(while :; do psql -At -c "SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU') FROM pg_stat_activity WHERE application_name = 'strata' AND state = 'active' AND pid <> pg_backend_pid()"; sleep 0.1; done) >"$work/waits" 2>/dev/null &
		sampler=$!
		pg_before=$(cpu_ms $(pg_pids "$work")) strata_before=$(cpu_ms "$pid")
		out=$("$work/labels" patch -server "$server" -token "$token" -n "$n" -c "$c")
		pg_after=$(cpu_ms $(pg_pids "$work")) strata_after=$(cpu_ms "$pid")
		wal_after=$(psql -At -c "SELECT pg_current_wal_lsn() - '0/0'")
		kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null || true
		waits=$(sort "$work/waits" | uniq -c | sort -rn | head -5 | awk -v t="$(wc -l <"$work/waits")" '{printf "%s %.0f%%, ", $2, 100 * $1 / t}')
		based=$(curl -sf "$server/metrics" | awk '/^strata_list_index_based_writes_total/ {b = $2} /^strata_list_index_stale_bases_total/ {s = $2} END {printf "%d from the index copy, %d overtaken", b, s}')
		echo "run $r: $out | CPU per PATCH: PostgreSQL $(echo "scale=3; ($pg_after - $pg_before) / $n" | bc) ms, strata $(echo "scale=3; ($strata_after - $strata_before) / $n" | bc) ms | WAL bytes per PATCH $(echo "($wal_after - $wal_before) / $n" | bc) | backends: ${waits%, } | writes so far: $based"
	done
	;;
select)
	echo "== loading $size resources x 5 labels: the anchor (schema cc) and strata's nodes"
	sed "s/generate_series(1,100000)/generate_series(1,$size)/" "$anchors/anchor-labels.sql" | psql >/dev/null 2>&1
	psql -v size="$size" -f bench/labels-data.sql >/dev/null
	# The nodes went straight into the tables, not through the changes log: restart strata so
	# that its list index loads them (a replica's start), and wait until it has.
	restart_strata "$work"
	for _ in $(seq 1 1200); do
		m=$(curl -sf "$server/metrics")
		# ready, or off (STRATA_LIST_INDEX_MAX_BYTES=-1: no such series)
		grep -q '^strata_list_index_ready 1' <<<"$m" || ! grep -q '^strata_list_index_ready' <<<"$m" && break
		sleep 0.5
	done
	curl -sf "$server/metrics" | grep -E '^strata_list_index_(ready|objects|bytes) ' || echo "list index off"
	echo "strata serve RSS after the load: $(ps -o rss= -p "$pid" | awk '{printf "%.0f MiB", $1 / 1024}')"
	# Each selector as the anchor's naive EXISTS query (pgbench; NOT EXISTS for notin and !k)
	# and as strata's list endpoint over HTTP (limit 50, the same page size):
	# - anchor: the anchor's own (k1=v<0..19>, k2 in (v1,v2,v3): no resource has k2 in v1..v3)
	# - s1: k1=v4,k2 in (v5,v10), 10 % of the resources
	# - s50: k2 in (v0,v10), 50 %
	# - notin: k3 notin (v0,v6),!k9, 80 % (k3 takes ten values, each 10 %; no resource has k9)
	# - nosel: no selector at all (strata only: the list path's own cost)
	# - floor: GET of one node by name (strata only: the cheapest authenticated one-row read)
	cat >"$work/anchor-s1.sql" <<'SQL'
SELECT r.guid FROM cc.resources r WHERE EXISTS (SELECT 1 FROM cc.labels l WHERE l.resource_id = r.id AND l.key_prefix = '' AND l.key_name = 'k1' AND l.value = 'v4')
 AND EXISTS (SELECT 1 FROM cc.labels l WHERE l.resource_id = r.id AND l.key_prefix = '' AND l.key_name = 'k2' AND l.value IN ('v5','v10')) LIMIT 50;
SQL
	cat >"$work/anchor-s50.sql" <<'SQL'
SELECT r.guid FROM cc.resources r WHERE EXISTS (SELECT 1 FROM cc.labels l WHERE l.resource_id = r.id AND l.key_prefix = '' AND l.key_name = 'k2' AND l.value IN ('v0','v10')) LIMIT 50;
SQL
	cat >"$work/anchor-notin.sql" <<'SQL'
SELECT r.guid FROM cc.resources r WHERE NOT EXISTS (SELECT 1 FROM cc.labels l WHERE l.resource_id = r.id AND l.key_prefix = '' AND l.key_name = 'k3' AND l.value IN ('v0','v6'))
 AND NOT EXISTS (SELECT 1 FROM cc.labels l WHERE l.resource_id = r.id AND l.key_prefix = '' AND l.key_name = 'k9') LIMIT 50;
SQL
	secs=${SECS:-15}
	fallbacks() { curl -sf "$server/metrics" | awk '/^strata_list_index_fallback_total/ {n += $2} END {print n + 0}'; }
	served() { curl -sf "$server/metrics" | awk '/^strata_list_index_served_total/ {n += $2} END {print n + 0}'; }
	for round in $(seq 1 "${ROUNDS:-3}"); do
		for s in ${SHAPES:-anchor s1 s50 notin nosel floor}; do
			script= sel=
			case $s in
			anchor) script="$anchors/anchor-labels-select.sql" sel='k1=v{r},k2 in (v1,v2,v3)' ;;
			s1) script="$work/anchor-s1.sql" sel='k1=v4,k2 in (v5,v10)' ;;
			s50) script="$work/anchor-s50.sql" sel='k2 in (v0,v10)' ;;
			notin) script="$work/anchor-notin.sql" sel='k3 notin (v0,v6),!k9' ;;
			esac
			a=-
			if [ -n "$script" ]; then
				a=$(pgbench -n -T "$secs" -c 8 -j 2 -f "$script" "$pg" 2>/dev/null | grep -E '^tps' | sed 's/tps = \([0-9.]*\).*/\1/')
			fi
			f0=$(fallbacks)
			# strata: as many requests as fit in the same time, measured by the tool itself
			if [ $s = floor ]; then
				b=$(timeout $((secs * 4)) "$work/labels" get -server "$server" -token "$token" -c 8 -n 100000000 -duration "${secs}s" -path '/v1/nodes/n{r7}' -range "$size")
			else
				b=$(timeout $((secs * 4)) "$work/labels" select -server "$server" -token "$token" -c 8 -n 100000000 -duration "${secs}s" -selector "$sel")
			fi
			echo "size=$size round=$round selector=$s anchor_tps=$a strata: $b fell_back=$(($(fallbacks) - f0))"
		done
	done
	echo "lists served from the index: $(served); answered by the database instead: $(fallbacks)"
	;;
*)
	echo "unknown mode $mode" >&2
	exit 2
	;;
esac
