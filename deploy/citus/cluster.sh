#!/usr/bin/env bash
# cluster.sh starts (or stops) a Citus cluster on loopback from installed Citus binaries: one
# coordinator and two workers, each an initdb data dir under $DIR, on ports $PORT, $PORT+1 and
# $PORT+2. Citus's own regression harness sets nodes up the same way (see docs/scale-out.md).
#
#   deploy/citus/cluster.sh start DIR PORT   # prints the coordinator URL
#   deploy/citus/cluster.sh db DIR PORT NAME # creates database NAME on every node, registers workers
#   deploy/citus/cluster.sh stop DIR
#
# Run as root, the servers run as the postgres user. Needs citus.so in PostgreSQL's lib dir.
set -euo pipefail
cmd=${1:?start|db|stop}
DIR=${2:?data dir}
BIN=${PGBIN:-/usr/lib/postgresql/15/bin}
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

case $cmd in
start)
	PORT=${3:?port}
	mkdir -p "$DIR"
	[ "$(id -u)" = 0 ] && chown postgres "$DIR"
	i=0
	for n in c w1 w2; do
		p=$((PORT + i)); i=$((i + 1))
		if [ ! -d "$DIR/$n" ]; then
			as_pg "$BIN/initdb" -D "$DIR/$n" -U postgres --auth=trust >/dev/null
			cat >>"$DIR/$n/postgresql.conf" <<CONF
port = $p
listen_addresses = '127.0.0.1'
unix_socket_directories = '$DIR'
shared_preload_libraries = 'citus'
wal_level = logical
max_prepared_transactions = 100
max_connections = 200
fsync = off
synchronous_commit = off
full_page_writes = off
citus.node_conninfo = 'sslmode=disable'
CONF
		fi
		as_pg "$BIN/pg_ctl" -D "$DIR/$n" -l "$DIR/$n.log" -w start >/dev/null
	done
	"$0" db "$DIR" "$PORT" postgres
	echo "postgres://postgres@127.0.0.1:$PORT/postgres?sslmode=disable"
	;;
db)
	PORT=${3:?port}
	NAME=${4:?database}
	for p in "$PORT" $((PORT + 1)) $((PORT + 2)); do
		if [ "$NAME" != postgres ]; then
			psql -qAt -h 127.0.0.1 -p "$p" -U postgres -d postgres -c "CREATE DATABASE \"$NAME\"" >/dev/null
		fi
		psql -qAt -h 127.0.0.1 -p "$p" -U postgres -d "$NAME" -c 'CREATE EXTENSION IF NOT EXISTS citus' >/dev/null
	done
	psql -qAt -h 127.0.0.1 -p "$PORT" -U postgres -d "$NAME" \
		-c "SELECT citus_set_coordinator_host('127.0.0.1', $PORT)" \
		-c "SELECT citus_add_node('127.0.0.1', $((PORT + 1)))" \
		-c "SELECT citus_add_node('127.0.0.1', $((PORT + 2)))" >/dev/null
	;;
stop)
	for n in c w1 w2; do
		[ -d "$DIR/$n" ] && as_pg "$BIN/pg_ctl" -D "$DIR/$n" -m fast -w stop >/dev/null || true
	done
	;;
*)
	echo "usage: $0 start|db|stop DIR [PORT] [NAME]" >&2
	exit 2
	;;
esac
