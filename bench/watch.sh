#!/usr/bin/env bash
# Watch benchmarks (docs/benchmarks.md, "Watch"):
#
#   bash bench/watch.sh fanout [WATCHERS] [WRITES]  # events/s to WATCHERS watches (default 100) and write->event latency
#   bash bench/watch.sh fsync [SECONDS]             # write throughput with fsync on: next_resource_version() vs plain nextval(), 8 clients
#
# Both run one strata on its embedded PostgreSQL, which runs with PostgreSQL's defaults
# (fsync=on, synchronous_commit=on), in a directory on disk (not tmpfs). fsync needs pgbench.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
mode=${1:-fanout}
work=$(mktemp -d "${BENCH_DIR:-/var/tmp}/strata-watch-XXXXXX")
chmod 755 "$work"
cleanup() {
	[ -n "${pid:-}" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/strata" ./cmd/strata
start_strata "$work"
echo "fsync=$(psql -At -c 'SHOW fsync') synchronous_commit=$(psql -At -c 'SHOW synchronous_commit') wal_sync_method=$(psql -At -c 'SHOW wal_sync_method')"

case "$mode" in
fanout)
	watchers=${2:-100}
	writes=${3:-2000}
	go build -o "$work/watch" ./bench/watch
	for c in 1 4; do
		"$work/watch" -server "$server" -token "$token" -watchers "$watchers" -n "$writes" -c "$c" -prefix "c$c"
	done
	;;
fsync)
	secs=${2:-20}
	# The write of strata's stamp, reduced to what the order costs: a row, a version drawn
	# last, the change record (with the NOTIFY trigger of migration 0012), commit.
	psql -c "CREATE TABLE strata.bench (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v bigint)"
	cat >"$work/ordered.sql" <<'SQL'
BEGIN;
INSERT INTO strata.bench (v) VALUES (0);
SELECT strata.next_resource_version() AS rv \gset
INSERT INTO strata.changes (resource_version, kind, name, type, object) VALUES (:rv, 'Bench', :rv::text, 'ADDED', '{}');
COMMIT;
SQL
	sed 's/strata.next_resource_version()/nextval('"'"'strata.resource_version_seq'"'"')/' "$work/ordered.sql" >"$work/plain.sql"
	# Alternating runs, so that a disturbance from other work on the machine hits both.
	for round in $(seq 1 "${ROUNDS:-3}"); do
		for c in 1 8; do
			for s in ordered plain; do
				out=$(pgbench -n -T "$secs" -c $c -j $((c < 2 ? 1 : 2)) -f "$work/$s.sql" "$pg" 2>&1)
				tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out")
				lat=$(sed -n 's/^latency average = //p' <<<"$out")
				echo "round $round  $c clients  $s: $tps tps, latency average $lat"
			done
		done
	done
	;;
*)
	echo "usage: bench/watch.sh fanout|fsync" >&2
	exit 2
	;;
esac
