#!/usr/bin/env bash
# Secret pillar categories (issue 22), on one strata's embedded cluster (fsync and
# synchronous_commit on), in one run — compare ratios, never absolute figures:
#
#   bash bench/secrets.sh
#
# Data: the node_pillars benchmark's shape (bench/node-pillars-data.sql: 10 orgs, 1,000
# groups, 10,000 nodes, ~1 KB rows), whose node rows are category "minion".
#  1. HTTP renders of random minions (8 clients, SECS seconds each, bench/labels): warm (1,000
#     minions, from the replica's cache) and cold (Cache-Control: no-cache: computed from the
#     database), with "minion" plain;
#  2. `strata pillar category set minion --secret` (10,000 rows sealed in one transaction);
#  3. the same renders with "minion" secret: by the admin token (every render opens the node's
#     sealed row) and by a token without pillars:read-secrets (the masked render);
#  4. nine more categories at every node made secret (100,000 sealed rows in all), a second
#     key first on the ring, and `strata keys rotate` timed: re-wrapping 100,000 values.
# Results and their reading are in docs/benchmarks.md ("Secrets at rest").
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
anchors=${ANCHORS:-../shared/bench}
[ -d "$anchors" ] || anchors=../../shared/bench
anchors=$(cd "$anchors" && pwd)
secs=${SECS:-10}
work=$(mktemp -d /tmp/strata-secrets-XXXXXX)
chmod 755 "$work"
cleanup() {
	[ -n "${pid:-}" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/strata" ./cmd/strata
go build -o "$work/labels" ./bench/labels
start_strata "$work"
echo "== fsync=$(psql -tA -c 'SHOW fsync') synchronous_commit=$(psql -tA -c 'SHOW synchronous_commit')"
psql -f "$anchors/anchor-uyuni-pillars.sql" >/dev/null
psql -f bench/node-pillars-data.sql >/dev/null
export STRATA_SERVER=$server STRATA_TOKEN=$token
reader=$("$work/strata" token create bench-reader -q --scope 'pillars:render:*')

renders() { # LABEL TOKEN
	# Warm: 1,000 minions, whose renders the first pass puts in the cache; the figure is the
	# second pass. Cold: every render computed from the database, any of the 10,000.
	"$work/labels" get -server "$server" -token "$2" -c 8 -n 100000000 -duration "${secs}s" -path '/v1/nodes/minion-{r}/pillar' -range 1000 >/dev/null
	echo "$1 warm: $("$work/labels" get -server "$server" -token "$2" -c 8 -n 100000000 -duration "${secs}s" -path '/v1/nodes/minion-{r}/pillar' -range 1000)"
	echo "$1 cold: $("$work/labels" get -server "$server" -token "$2" -c 8 -n 100000000 -duration "${secs}s" -no-cache -path '/v1/nodes/minion-{r}/pillar' -range 10000)"
}

echo "== 1. renders, category minion plain"
renders "plain (admin)" "$token"
echo "== 2. making minion secret (10,000 rows)"
start_s=$(date +%s.%N)
"$work/strata" pillar category set minion --secret >/dev/null
echo "converted 10000 rows in $(echo "$(date +%s.%N) - $start_s" | bc) s"
echo "== 3. renders, category minion secret"
renders "secret revealed (admin)" "$token"
renders "secret masked (no read-secrets)" "$reader"

echo "== 4. rotation of 100,000 sealed values"
psql -c "INSERT INTO strata.pillars (target_kind, resource_id, category, data)
         SELECT 'Node', r.id, 's' || c, jsonb_build_object('password', md5(r.name || c), 'user', r.name)
         FROM strata.resources r, generate_series(1, 9) c WHERE r.kind = 'Node'" >/dev/null
for c in $(seq 1 9); do "$work/strata" pillar category set "s$c" --secret >/dev/null; done
"$work/strata" keys status
"$work/strata" keys generate "$work/new.key" >/dev/null
# serve_with KEY... restarts strata on the same data with the key files in that order.
serve_with() {
	kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
	local args=()
	for k in "$@"; do args+=(--encryption-key-file "$k"); done
	"$work/strata" serve --data-dir "$work/data" --listen "$addr" "${args[@]}" 2>>"$work/serve.log" &
	pid=$!
	for _ in $(seq 1 300); do curl -sf "$server/readyz" >/dev/null && break; sleep 0.1; done
}
old="$work/data/encryption-key"
n=$(psql -tA -c "SELECT count(*) FROM strata.pillars WHERE sealed IS NOT NULL")
serve_with "$work/new.key" "$old"
start_s=$(date +%s.%N)
"$work/strata" keys rotate -q --batch 1000 >/dev/null
echo "rotate to the new key, --batch 1000: $(echo "$(date +%s.%N) - $start_s" | bc) s for $n values"
serve_with "$old" "$work/new.key"
start_s=$(date +%s.%N)
"$work/strata" keys rotate -q --batch 10000 >/dev/null
echo "rotate back, --batch 10000: $(echo "$(date +%s.%N) - $start_s" | bc) s for $n values"
"$work/strata" keys status
