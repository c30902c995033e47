#!/usr/bin/env bash
# Reliability of the Terraform state service under faults, on two replicas sharing one
# PostgreSQL cluster that this script starts (fsync on, loopback only) and removes again:
#
#   restart  64 Terraform-protocol clients (LOCK, GET, POST ?ID=, UNLOCK) alternate between
#            the replicas; mid-load PostgreSQL is restarted with `pg_ctl restart -m fast`.
#            Checks: every acknowledged write is in the final state or its versions, no 5xx
#            other than 503, each replica writes again within 5 s of PostgreSQL accepting
#            connections.
#   kill     replica A holds 4 HTTP locks and is killed with SIGKILL: replica B shows them,
#            force-unlock works on B, a restarted A answers /readyz and serves LOCK/UNLOCK.
#
#   bash bench/reliability.sh [flags of the Go program]
#
#   bash bench/reliability.sh                                  # both scenarios, defaults
#   bash bench/reliability.sh -scenarios restart -clients 32 -duration 20s -restart-at 8s
#   bash bench/reliability.sh -scenarios kill -locks 4
#
# Flags (see `go run ./bench/reliability -h`): -scenarios, -clients, -shared, -share-group,
# -duration, -restart-at, -recovery-limit, -request-timeout, -locks, -kill-watch, -v. Each scenario prints
# a one-line summary starting with PASS or FAIL; the script exits non-zero when one fails.
# Set KEEP=1 to keep the work directory (logs of PostgreSQL and both replicas) afterwards.
#
# Needs the PostgreSQL 15+ server binaries (initdb, pg_ctl, pg_isready, psql) on PATH or
# where `pg_config --bindir` says. As root, PostgreSQL runs as the "postgres" user.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d /tmp/strata-reliab-XXXXXX)
chmod 755 "$work"
pg_owner=""
if [ "$(id -u)" = 0 ]; then pg_owner=postgres; fi
bindir=$(pg_config --bindir 2>/dev/null || dirname "$(command -v pg_ctl)")

# asowner runs a PostgreSQL command as the cluster's owner.
asowner() {
	if [ -n "$pg_owner" ]; then runuser -u "$pg_owner" -- "$@"; else "$@"; fi
}

cleanup() {
	set +e
	for f in "$work"/a.pid "$work"/b.pid; do
		[ -f "$f" ] || continue
		p=$(cat "$f")
		[ -n "$p" ] && kill -TERM "$p" 2>/dev/null
		for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -0 "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null
	done
	if [ -f "$work/pg/postmaster.pid" ]; then
		asowner "$bindir/pg_ctl" -D "$work/pg" -m fast -w -t 60 stop >/dev/null 2>&1
	fi
	if [ -n "${KEEP:-}" ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

# freeport prints a TCP port on 127.0.0.1 that nothing listens on.
freeport() {
	local p
	for _ in $(seq 1 200); do
		p=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
	done
	echo "no free port found" >&2
	exit 1
}

go build -o "$work/strata" ./cmd/strata
go build -o "$work/reliability" ./bench/reliability

# PostgreSQL: its own cluster, TCP on loopback only, trust auth (nothing else can reach it).
pgport=$(freeport)
mkdir -p "$work/pg" "$work/pgrun"
[ -n "$pg_owner" ] && chown "$pg_owner" "$work/pg" "$work/pgrun"
asowner "$bindir/initdb" -D "$work/pg" -U strata --auth=trust -E UTF8 --no-instructions >"$work/initdb.log" 2>&1 ||
	{ cat "$work/initdb.log"; exit 1; }
asowner "$bindir/pg_ctl" -D "$work/pg" -l "$work/pgrun/pg.log" -w -t 60 \
	-o "-c listen_addresses=127.0.0.1 -c port=$pgport -c unix_socket_directories=$work/pgrun -c max_connections=200" \
	start >/dev/null
"$bindir/psql" -X -q -h 127.0.0.1 -p "$pgport" -U strata -d postgres -c 'CREATE DATABASE strata' >/dev/null
dburl="postgres://strata@127.0.0.1:$pgport/strata?sslmode=disable"

# Two replicas with one bootstrap admin token.
token="strata_$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')"
export STRATA_BOOTSTRAP_TOKEN="$token"
porta=$(freeport)
portb=$(freeport)

# Hooks the Go program runs at the right moment; each is a small script in the work dir.
cat >"$work/hook-start-a" <<EOF
#!/usr/bin/env bash
# Starts replica A (again) in the background and records its pid for the cleanup.
STRATA_BOOTSTRAP_TOKEN='$token' "$work/strata" serve --database-url '$dburl' --listen 127.0.0.1:$porta \\
	--data-dir "$work/data-a" >>"$work/a.log" 2>&1 </dev/null &
echo \$! >"$work/a.pid"
EOF
cat >"$work/hook-kill-a" <<EOF
#!/usr/bin/env bash
# SIGKILL of replica A by its recorded pid.
kill -KILL "\$(cat "$work/a.pid")"
EOF
cat >"$work/hook-pg-restart" <<EOF
#!/usr/bin/env bash
exec $([ -n "$pg_owner" ] && echo "runuser -u $pg_owner --") "$bindir/pg_ctl" -D "$work/pg" -l "$work/pgrun/pg.log" -w -t 120 restart -m fast
EOF
cat >"$work/hook-pg-isready" <<EOF
#!/usr/bin/env bash
exec "$bindir/pg_isready" -q -h 127.0.0.1 -p $pgport -d strata -U strata -t 1
EOF
cat >"$work/hook-psql" <<EOF
#!/usr/bin/env bash
# Runs one SQL statement (\$1), unaligned output.
exec "$bindir/psql" -X -q -At -h 127.0.0.1 -p $pgport -U strata -d strata -c "\$1"
EOF
chmod 700 "$work"/hook-* # hook-start-a holds the token

waitready() { # url name
	for _ in $(seq 1 300); do
		curl -sf "$1/readyz" >/dev/null && return
		sleep 0.1
	done
	echo "replica $2 did not become ready"; cat "$work/$2.log"; exit 1
}
"$work/hook-start-a"
waitready "http://127.0.0.1:$porta" a
"$work/strata" serve --database-url "$dburl" --listen "127.0.0.1:$portb" \
	--data-dir "$work/data-b" >>"$work/b.log" 2>&1 </dev/null &
echo $! >"$work/b.pid"
waitready "http://127.0.0.1:$portb" b

echo "PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') on 127.0.0.1:$pgport (fsync on), replicas A 127.0.0.1:$porta, B 127.0.0.1:$portb; $(nproc) CPUs"
rc=0
STRATA_TOKEN="$token" "$work/reliability" \
	-a "http://127.0.0.1:$porta" -b "http://127.0.0.1:$portb" \
	-hook-pg-restart "$work/hook-pg-restart" -hook-pg-isready "$work/hook-pg-isready" \
	-hook-kill-a "$work/hook-kill-a" -hook-start-a "$work/hook-start-a" -hook-psql "$work/hook-psql" \
	"$@" || rc=$?
if [ "$rc" != 0 ]; then
	for r in a b; do
		echo "--- replica $r: last log lines other than request lines (KEEP=1 keeps $work/$r.log)"
		grep -v '"msg":"request"' "$work/$r.log" | tail -n 15
	done
fi
exit "$rc"
