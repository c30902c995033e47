# Background daemons a script starts and must stop again, sourced by failover.sh.
#
# Each daemon runs in a session (and process group) of its own, whose id is the pid $! names,
# and is stopped by signalling that whole group: whatever wrapper started it (runuser, as root)
# and whatever it forked go together. Collecting $! of `runuser … &` and signalling that pid
# alone leaked the daemons behind the wrapper (etcd and Patroni kept running after the script,
# and the next run found "No Patroni leader"). TestPatroniDaemonsStop checks this file.

daemon_groups=()

# start_daemon LOG CMD ARGS…: run CMD in a new session, output to LOG.
start_daemon() {
	local log=$1
	shift
	# Started from a non-interactive shell, the background child is not a process group
	# leader, so setsid makes it one without forking: $! is the new group's id.
	setsid "$@" >"$log" 2>&1 </dev/null &
	daemon_groups+=($!)
}

# start_daemon_as_pg LOG CMD ARGS…: as start_daemon, as the postgres user when run as root.
start_daemon_as_pg() {
	local log=$1
	shift
	if [ "$(id -u)" = 0 ]; then
		start_daemon "$log" runuser -u postgres -- "$@"
	else
		start_daemon "$log" "$@"
	fi
}

# group_alive PGID: whether any live (non-zombie) process is in the group.
group_alive() {
	local want=$1 stat line state ppid pgrp
	for stat in /proc/[0-9]*/stat; do
		{ read -r line <"$stat"; } 2>/dev/null || continue
		# pid (comm) state ppid pgrp …: comm may hold spaces, so read after the last ')'.
		read -r state ppid pgrp _ <<<"${line##*) }"
		[ "$state" != Z ] && [ "$pgrp" = "$want" ] && return 0
	done
	return 1
}

# stop_daemons: SIGTERM every daemon's group, wait up to 20 s for them to exit (Patroni stops
# its PostgreSQL first), then SIGKILL what is left.
stop_daemons() {
	local g i alive
	for g in "${daemon_groups[@]}"; do kill -TERM -- "-$g" 2>/dev/null || true; done
	for i in $(seq 1 200); do
		alive=0
		for g in "${daemon_groups[@]}"; do group_alive "$g" && alive=1; done
		[ "$alive" = 0 ] && break
		sleep 0.1
	done
	for g in "${daemon_groups[@]}"; do kill -KILL -- "-$g" 2>/dev/null || true; done
	daemon_groups=()
}
