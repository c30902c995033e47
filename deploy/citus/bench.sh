#!/usr/bin/env bash
# bench.sh measures strata on a Citus cluster side by side with one PostgreSQL, in one run on
# one machine (docs/scale-out.md, "On a real Citus cluster"):
#
#   bash deploy/citus/bench.sh [PROJECTS] [ROUNDS]     (default 8 projects, 3 rounds)
#
# It starts a Citus coordinator and two workers (cluster.sh) and one plain PostgreSQL, all on
# loopback from the installed binaries, runs `strata serve` on each in turn and drives the same
# mix on both: Terraform rounds over PROJECTS projects through both backends (http, and pg
# straight to the database), 4 projects at a time, while a watch follows org writes; then label
# PATCHes, selector lists and pillar renders (bench/labels). It prints wall times and
# throughputs per target, where each project's shards live, and per shard the rows written and
# the scans (pg_stat_user_tables on each worker) as the statements each shard served.
#
# Needs terraform on PATH, citus.so in PostgreSQL's lib dir, psql, and to run as root (the
# servers run as postgres) or as a user that may run initdb. PORT (default 58700) and the
# three ports after it must be free.
set -euo pipefail
cd "$(dirname "$0")/../.."
projects=${1:-8}
rounds=${2:-3}
PORT=${PORT:-58700}
BIN=${PGBIN:-/usr/lib/postgresql/15/bin}
work=$(mktemp -d /tmp/strata-citus-XXXXXX)
chmod 755 "$work"
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
pid=
cleanup() {
	[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	deploy/citus/cluster.sh stop "$work/citus" || true
	[ -d "$work/plain" ] && as_pg "$BIN/pg_ctl" -D "$work/plain" -m fast -w stop >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/strata" ./cmd/strata
go build -o "$work/labels" ./bench/labels
go build -o "$work/watch" ./bench/watch

# The Citus cluster and its strata database.
deploy/citus/cluster.sh start "$work/citus" "$PORT" >/dev/null
deploy/citus/cluster.sh db "$work/citus" "$PORT" strata 2>/dev/null
citus_url="postgres://postgres@127.0.0.1:$PORT/strata?sslmode=disable"
# One PostgreSQL, same settings, no Citus.
plain_port=$((PORT + 3))
[ "$(id -u)" = 0 ] && chown postgres "$work"
as_pg "$BIN/initdb" -D "$work/plain" -U postgres --auth=trust >/dev/null
cat >>"$work/plain/postgresql.conf" <<CONF
port = $plain_port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$work'
max_connections = 200
fsync = off
synchronous_commit = off
full_page_writes = off
CONF
as_pg "$BIN/pg_ctl" -D "$work/plain" -l "$work/plain.log" -w start >/dev/null
psql -qAt -h 127.0.0.1 -p "$plain_port" -U postgres -d postgres -c 'CREATE DATABASE strata'
plain_url="postgres://postgres@127.0.0.1:$plain_port/strata?sslmode=disable"

resources() {
	for i in $(seq 1 10); do printf 'resource "terraform_data" "r%d" {\n  input = "%s-%d"\n}\n' "$i" "$2" "$i"; done
}
# -lock-timeout: the pg backend holds its workspace-creation key (-1, one for the whole
# database) for a workspace's whole first apply, so first applies in different projects wait
# for each other (and strata's LOCK answers 423 meanwhile): Terraform's design, on one
# PostgreSQL as on Citus.
export TF_IN_AUTOMATION=1 TF_INPUT=0 CHECKPOINT_DISABLE=1 TF_CLI_CONFIG_FILE="$work/terraformrc"
: >"$work/terraformrc"

# tf_run TARGET PROJECT ROUND BACKEND: terraform init + apply in a fresh directory.
tf_run() {
	local t=$1 p=$2 r=$3 b=$4 d="$work/tf/$1/$2-$4-$3"
	mkdir -p "$d"
	if [ "$b" = http ]; then
		printf 'terraform {\n  backend "http" {\n    address = "%s"\n    lock_address = "%s"\n    unlock_address = "%s"\n    username = "strata"\n  }\n}\n' \
			"$server/v1/state/$p/w$r" "$server/v1/state/$p/w$r" "$server/v1/state/$p/w$r" >"$d/main.tf"
	else
		printf 'terraform {\n  backend "pg" {\n    conn_str = "%s"\n    schema_name = "%s"\n    skip_schema_creation = true\n    skip_table_creation = true\n    skip_index_creation = true\n  }\n}\n' \
			"$url" "$p" >"$d/main.tf"
	fi
	resources "$p" "$r" >>"$d/main.tf"
	(cd "$d" && terraform init -no-color >"$d/log" 2>&1 && terraform apply -auto-approve -no-color -lock-timeout=300s >>"$d/log" 2>&1) || { echo "terraform $t $p $b round $r failed:"; cat "$d/log"; return 1; }
}
export -f tf_run resources
export work

ms() { echo $((($(date +%s%N) - $1) / 1000000)); }

bench_target() { # TARGET URL
	local t=$1
	url=$2
	export url
	STRATA_BOOTSTRAP_TOKEN=strata_benchtoken${t}0123456789abcdefghijklmnopqrstuv "$work/strata" serve --database-url "$url" --data-dir "$work/$t-data" --listen 127.0.0.1:0 2>"$work/$t-serve.log" &
	pid=$!
	local addr=
	for _ in $(seq 1 600); do
		addr=$(grep -o '"msg":"strata serving","addr":"[^"]*"' "$work/$t-serve.log" | sed 's/.*"addr":"//; s/"$//' || true)
		[ -n "$addr" ] && curl -sf "http://$addr/readyz" >/dev/null && break
		sleep 0.1
	done
	[ -n "$addr" ] || { echo "strata did not start on $t"; cat "$work/$t-serve.log"; exit 1; }
	server="http://$addr"
	token=strata_benchtoken${t}0123456789abcdefghijklmnopqrstuv
	export server TF_HTTP_PASSWORD=$token
	echo "== $t"
	grep -o '"msg":"Citus detected[^}]*' "$work/$t-serve.log" | head -1 || true
	"$work/labels" setup -server "$server" -token "$token" -nodes 1000
	local start
	start=$(date +%s%N)
	for i in $(seq 1 "$projects"); do
		curl -sf -X PUT -H "Authorization: Bearer $token" "$server/v1/projects/p$i" >/dev/null
	done
	echo "create $projects projects: $(ms "$start") ms"
	# A watch of org writes runs during the Terraform rounds.
	"$work/watch" -server "$server" -token "$token" -watchers 20 -n 400 -c 2 -prefix "w$t" >"$work/$t-watch.out" 2>&1 &
	local wpid=$!
	start=$(date +%s%N)
	for r in $(seq 1 "$rounds"); do
		for i in $(seq 1 "$projects"); do printf 'p%d http\np%d pg\n' "$i" "$i"; done |
			xargs -P 4 -n 2 bash -c 'tf_run '"$t"' "$0" '"$r"' "$1"'
	done
	local tf_ms
	tf_ms=$(ms "$start")
	echo "terraform: $((projects * rounds * 2)) init+apply runs (http and pg, 4 at a time): $tf_ms ms, $(awk -v n=$((projects * rounds * 2)) -v m="$tf_ms" 'BEGIN{printf "%.2f", n*1000/m}') runs/s"
	wait "$wpid" || { cat "$work/$t-watch.out"; exit 1; }
	sed 's/^/watch: /' "$work/$t-watch.out" | head -1
	# Every state write recorded as a version, by either backend.
	local versions=0 v
	for i in $(seq 1 "$projects"); do
		v=$(psql -qAt "$url" -c "SELECT count(*) FROM p$i.tf_state_versions")
		versions=$((versions + v))
	done
	echo "versions recorded: $versions (pg: $(psql -qAt "$url" -c "SELECT count(*) FROM p1.tf_state_versions WHERE source = 'pg'") in p1, http: $(psql -qAt "$url" -c "SELECT count(*) FROM p1.tf_state_versions WHERE source = 'http'") in p1)"
	echo "state reads: $("$work/labels" get -server "$server" -token "$token" -path "/v1/state/p{r}/w1" -range "$projects" -n 2000 -c 8 | sed 's/ p50.*//')"
	echo "label PATCH: $("$work/labels" patch -server "$server" -token "$token" -n 2000 -c 8)"
	echo "selector list: $("$work/labels" select -server "$server" -token "$token" -n 2000 -c 8)"
	echo "render (no cache): $("$work/labels" get -server "$server" -token "$token" -path '/v1/nodes/n{r4}/pillar' -range 1000 -n 2000 -c 8 -no-cache)"
	if [ "$t" = citus ]; then
		echo "placement (project: worker):"
		psql -qAt "$url" -c "SELECT DISTINCT split_part(table_name::text, '.', 1) || ': ' || nodename || ':' || nodeport FROM citus_shards WHERE citus_table_type = 'schema' ORDER BY 1" | sed 's/^/  /'
		echo "per shard on the workers (rows inserted+updated+deleted, scans):"
		for w in $((PORT + 1)) $((PORT + 2)); do
			# Citus hides shards from catalog reads of other applications; show them here.
			psql -qAt -h 127.0.0.1 -p "$w" -U postgres -d strata -F ' ' -c "SET citus.show_shards_for_app_name_prefixes = '*'" -c "SELECT '127.0.0.1:$w', schemaname || '.' || relname, n_tup_ins + n_tup_upd + n_tup_del, coalesce(seq_scan, 0) + coalesce(idx_scan, 0) FROM pg_stat_user_tables WHERE relname ~ '^(states|tf_state_versions|tf_placeholders|tf_project)_[0-9]+$' AND (n_tup_ins + n_tup_upd + n_tup_del + coalesce(seq_scan, 0) + coalesce(idx_scan, 0)) > 0 ORDER BY 2" | sed 's/^/  /'
		done
		echo "transactions per node (pg_stat_database.xact_commit of strata):"
		for p in "$PORT" $((PORT + 1)) $((PORT + 2)); do
			echo "  127.0.0.1:$p $(psql -qAt -h 127.0.0.1 -p "$p" -U postgres -d postgres -c "SELECT xact_commit FROM pg_stat_database WHERE datname = 'strata'")"
		done
	fi
	kill -TERM "$pid"
	wait "$pid" 2>/dev/null || true
	pid=
}

echo "strata $(git rev-parse --short HEAD), $(terraform version | head -1), $projects projects, $rounds rounds, $(nproc) cores"
bench_target plain "$plain_url"
bench_target citus "$citus_url"
