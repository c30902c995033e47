#!/usr/bin/env bash
# Throughput through Debian's PgBouncer (1.18, transaction mode) against a direct connection,
# side by side in one run (issue 21 item 4):
#
#   bash bench/pgbouncer.sh
#
# One embedded strata owns the cluster (fsync and synchronous commit on, its defaults) and
# loads the data: 1,000 nodes with labels in org bench, a pillar at the org and one per node.
# Two more replicas serve the load: one whose pool connects directly (default query mode),
# one whose pool goes through PgBouncer in transaction mode (default_query_exec_mode=exec,
# session features off on both, so neither has a render cache and every render reads the
# database). farm-bench times each pair: label PATCHes (8 clients) and pillar renders (8
# clients).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
command -v pgbouncer >/dev/null || { echo "needs pgbouncer (apt-get install -y pgbouncer)"; exit 1; }
work=$(mktemp -d /tmp/strata-pgb-XXXXXX)
chmod 755 "$work"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	[ -n "${pid:-}" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/strata" ./cmd/strata
go build -o "$work/labels" ./bench/labels
start_strata "$work"
sock="$work/data/pg-socket"

"$work/labels" setup -server "$server" -token "$token" -nodes 1000
echo '{"app": {"port": 80, "tls": true}}' | STRATA_SERVER=$server STRATA_TOKEN=$token "$work/strata" pillar set app --org bench -f - >/dev/null
psql -c "INSERT INTO strata.pillars (target_kind, resource_id, category, data, updated_by)
         SELECT 'Node', id, 'own', jsonb_build_object('name', name, 'n', id), 'bench' FROM strata.resources WHERE kind = 'Node'" >/dev/null

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$work/pgbouncer.ini" <<INI
[databases]
strata = host=$sock port=5432 connect_query='SET max_parallel_workers_per_gather = 0'
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $work/userlist.txt
pool_mode = transaction
max_client_conn = 500
default_pool_size = 20
server_reset_query =
ignore_startup_parameters = extra_float_digits,max_parallel_workers_per_gather
logfile = $work/pgbouncer.log
pidfile = $work/pgbouncer.pid
INI
echo '"strata" ""' >"$work/userlist.txt"
if [ "$(id -u)" = 0 ]; then chown -R postgres "$work/pgbouncer.ini" "$work/userlist.txt" "$work"; runuser -u postgres -- pgbouncer "$work/pgbouncer.ini" & else pgbouncer "$work/pgbouncer.ini" & fi
pids+=($!)

direct="postgresql://strata@/strata?host=$sock&port=5432&sslmode=disable"
replica() { # name URL: starts a replica, sets $url_<name>
	"$work/strata" serve --database-url "$2" --session-database-url off --listen 127.0.0.1:0 2>"$work/$1.log" &
	pids+=($!)
	local a=
	for _ in $(seq 1 300); do
		a=$(grep -o '"msg":"strata serving","addr":"[^"]*"' "$work/$1.log" | sed 's/.*"addr":"//; s/"$//' || true)
		[ -n "$a" ] && curl -sf "http://$a/readyz" >/dev/null && break
		sleep 0.1
	done
	[ -n "$a" ] || { echo "replica $1 did not start"; cat "$work/$1.log"; exit 1; }
	eval "url_$1=http://$a"
}
replica direct "$direct"
replica bouncer "postgresql://strata@127.0.0.1:$port/strata?sslmode=disable&default_query_exec_mode=exec"
echo "PgBouncer $(pgbouncer --version | head -1 | awk '{print $2}'), fsync=$(psql -tAc 'SHOW fsync'), synchronous_commit=$(psql -tAc 'SHOW synchronous_commit')"

n=8000 c=8
echo "== label PATCH, $n requests, $c clients: through PgBouncer (left) vs direct (--vs)"
farm-bench -n 5 --timeout 600 \
	--vs "$work/labels patch -server $url_direct -token $token -n $n -c $c" \
	-- "$work/labels" patch -server "$url_bouncer" -token "$token" -n $n -c $c
echo "== pillar render (no cache), $n requests, $c clients: through PgBouncer (left) vs direct (--vs)"
farm-bench -n 5 --timeout 600 \
	--vs "$work/labels get -server $url_direct -token $token -n $n -c $c -path /v1/nodes/n{r4}/pillar -range 1000" \
	-- "$work/labels" get -server "$url_bouncer" -token "$token" -n $n -c $c -path "/v1/nodes/n{r4}/pillar" -range 1000
echo "== one run of each with its own figures"
for r in bouncer direct; do
	u=url_$r
	echo "$r patch: $("$work/labels" patch -server "${!u}" -token "$token" -n $n -c $c)"
	echo "$r render: $("$work/labels" get -server "${!u}" -token "$token" -n $n -c $c -path '/v1/nodes/n{r4}/pillar' -range 1000)"
done
