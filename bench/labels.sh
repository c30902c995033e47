#!/usr/bin/env bash
# Label benchmarks, side by side with the anchors of ../shared/bench (seed 000's labels table
# as Cloud Foundry's ADR leaves it), in one strata's embedded PostgreSQL cluster, in one run:
#
#   bash bench/labels.sh patch            # HTTP PATCH of one label vs raw INSERT … ON CONFLICT (pgbench)
#   bash bench/labels.sh select [SIZE]    # selector list queries vs the naive EXISTS query, SIZE resources (default 100000)
#   bash bench/labels.sh scale            # PATCH over HTTP at 1, 4, 16, 64 clients vs raw upsert+nextval at the same
#                                         # concurrency, fsync on, and how many of strata's busy backends wait on an advisory lock;
#                                         # CLIENTS="16" picks the concurrencies. Each line also gives the CPU time per PATCH of
#                                         # PostgreSQL's processes and of strata (from /proc, utime + stime, before and after)
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
		echo "clients=$c strata: $out | $waits | $cpu | raw upsert+nextval tps=$raw"
	done
	;;
select)
	echo "== loading $size resources x 5 labels: the anchor (schema cc) and strata's nodes"
	sed "s/generate_series(1,100000)/generate_series(1,$size)/" "$anchors/anchor-labels.sql" | psql >/dev/null 2>&1
	psql -v size="$size" -f bench/labels-data.sql >/dev/null
	# The anchor's selector (k1=v<0..19>, k2 in (v1,v2,v3): no resource has k2 in v1..v3) and a
	# selector that matches 10% of the resources, each as the anchor's naive EXISTS query
	# (pgbench) and as strata's list endpoint over HTTP (limit 50, the same page size).
	cat >"$work/anchor-s1.sql" <<'SQL'
SELECT r.guid FROM cc.resources r WHERE EXISTS (SELECT 1 FROM cc.labels l WHERE l.resource_id = r.id AND l.key_prefix = '' AND l.key_name = 'k1' AND l.value = 'v4')
 AND EXISTS (SELECT 1 FROM cc.labels l WHERE l.resource_id = r.id AND l.key_prefix = '' AND l.key_name = 'k2' AND l.value IN ('v5','v10')) LIMIT 50;
SQL
	secs=${SECS:-15}
	for round in 1 2 3; do
		for s in anchor s1; do
			if [ $s = anchor ]; then script="$anchors/anchor-labels-select.sql"; sel='k1=v{r},k2 in (v1,v2,v3)'; else script="$work/anchor-s1.sql"; sel='k1=v4,k2 in (v5,v10)'; fi
			a=$(pgbench -n -T "$secs" -c 8 -j 2 -f "$script" "$pg" 2>/dev/null | grep -E '^tps' | sed 's/tps = \([0-9.]*\).*/\1/')
			# strata: as many requests as fit in the same time, measured by the tool itself
			b=$(timeout $((secs * 4)) "$work/labels" select -server "$server" -token "$token" -c 8 -n 1000000 -duration "${secs}s" -selector "$sel")
			echo "size=$size round=$round selector=$s anchor_tps=$a strata: $b"
		done
	done
	;;
*)
	echo "unknown mode $mode" >&2
	exit 2
	;;
esac
