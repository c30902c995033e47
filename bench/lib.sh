# Shared by the bench scripts (source it): start_strata DIR starts "$DIR/strata serve" on the
# embedded default with its data in DIR/data, listening on a free loopback port, waits until
# it is ready and sets pid, addr, server (http://addr), token (the admin token) and pg (a URL
# of its embedded PostgreSQL over the unix socket, which psql below uses). The caller stops it
# (kill -TERM "$pid") in its cleanup.
start_strata() {
	"$1/strata" serve --data-dir "$1/data" --listen 127.0.0.1:0 2>"$1/serve.log" &
	pid=$!
	addr=
	for _ in $(seq 1 300); do
		addr=$(grep -o '"msg":"strata serving","addr":"[^"]*"' "$1/serve.log" | sed 's/.*"addr":"//; s/"$//' || true)
		[ -n "$addr" ] && curl -sf "http://$addr/readyz" >/dev/null && break
		sleep 0.1
	done
	[ -n "$addr" ] || { echo "strata did not start"; cat "$1/serve.log"; exit 1; }
	server="http://$addr"
	token=$(cat "$1/data/admin-token")
	pg="postgresql://strata@/strata?host=$1/data/pg-socket&port=5432&sslmode=disable"
}

# psql runs psql on the started strata's database, stopping at the first error.
psql() { command psql -X -q -v ON_ERROR_STOP=1 "$pg" "$@"; }

# cpu_ms PID...: the CPU time (user + system, ms) the processes have used so far, from
# /proc/PID/stat; a CPU time per request is far steadier than a rate on a shared machine.
cpu_ms() {
	local tck total=0 p
	tck=$(getconf CLK_TCK)
	for p in "$@"; do
		[ -r "/proc/$p/stat" ] || continue
		total=$((total + $(sed 's/^.*) //' "/proc/$p/stat" | awk '{print $12 + $13}')))
	done
	echo $((total * 1000 / tck))
}

# pg_pids DIR: the PostgreSQL processes of the strata started in DIR: the postmaster and its
# children (backends, WAL writer, checkpointer…).
pg_pids() {
	local pm
	pm=$(head -1 "$(dirname "$(find "$1/data" -name postmaster.pid | head -1)")/postmaster.pid")
	echo "$pm" $(pgrep -P "$pm")
}

# restart_strata DIR stops the strata started by start_strata DIR and starts it again on the
# same data (a replica's restart), setting the same variables.
restart_strata() {
	kill -TERM "$pid" && wait "$pid" 2>/dev/null || true
	start_strata "$1"
}
