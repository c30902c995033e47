#!/usr/bin/env bash
# Patroni on loopback, scripted and measured (issue 21 item 3):
#
#   bash deploy/patroni/failover.sh            # needs Debian's patroni, etcd-server, postgresql
#
# Starts etcd, two Patroni members (PostgreSQL in synchronous_mode) and two strata replicas
# on one multi-host URL, puts a mixed load on them (bench/failover: label PATCHes, Terraform
# LOCK/POST/UNLOCK rounds, pillar renders, a resuming watch), does a `patronictl switchover`
# and then a `kill -9` of the primary's postmaster under that load, and prints what clients
# saw: answers by status, seconds without a successful write, acknowledged writes lost, watch
# events repeated or missed, locks reported protected while their key was free. Figures:
# docs/operations.md ("Failover with Patroni, measured").
set -euo pipefail
cd "$(dirname "$0")/../.."
for c in patroni patronictl etcd; do command -v $c >/dev/null || { echo "needs $c (apt-get install -y patroni etcd-server)"; exit 1; }; done
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
work=$(mktemp -d /tmp/strata-patroni-XXXXXX)
chmod 755 "$work"
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
[ "$(id -u)" = 0 ] && chown postgres "$work"
# shellcheck source=deploy/patroni/daemons.sh
. deploy/patroni/daemons.sh
cleanup() {
	# strata replicas, Patroni (which stops its PostgreSQL) and etcd, each with whatever it
	# forked; then any PostgreSQL left behind.
	stop_daemons
	for m in m1 m2; do [ -f "$work/$m/postmaster.pid" ] && as_pg "$bin/pg_ctl" -D "$work/$m" -m immediate stop >/dev/null 2>&1 || true; done
	rm -rf "$work"
}
trap cleanup EXIT
free() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
etcd_port=$(free) etcd_peer=$(free)
start_daemon_as_pg "$work/etcd.log" etcd --name e1 --data-dir "$work/etcd" --enable-v2=true \
	--listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
	--listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
	--initial-cluster "e1=http://127.0.0.1:$etcd_peer"
declare -A pg rest
for m in m1 m2; do
	pg[$m]=$(free); rest[$m]=$(free)
	sed -e "s|@NAME@|$m|g; s|@REST@|${rest[$m]}|g; s|@ETCD@|$etcd_port|g; s|@PG@|${pg[$m]}|g; s|@DIR@|$work|g; s|@BIN@|$bin|g" \
		deploy/patroni/member.yml.in >"$work/$m.yml"
done
for m in m1 m2; do
	start_daemon_as_pg "$work/$m.log" patroni "$work/$m.yml"
	sleep 3
done
leader() { for m in m1 m2; do curl -sf "http://127.0.0.1:${rest[$m]}/primary" >/dev/null 2>&1 && { echo $m; return; }; done; echo ""; }
for _ in $(seq 1 120); do
	sync=$(curl -sf "http://127.0.0.1:${rest[m1]}/cluster" 2>/dev/null | python3 -c 'import json,sys; c=json.load(sys.stdin); print(sum(1 for m in c["members"] if m.get("role")=="sync_standby" and m.get("state") in ("running","streaming")))' 2>/dev/null || echo 0)
	[ -n "$(leader)" ] && [ "$sync" = 1 ] && break
	sleep 1
done
[ -n "$(leader)" ] || { echo "no Patroni leader"; tail -20 "$work"/m*.log; exit 1; }
echo "Patroni $(patroni --version | awk '{print $2}'): leader $(leader), synchronous standby up"
patronictl -c "$work/m1.yml" list

go build -o "$work/strata" ./cmd/strata
go build -o "$work/failover" ./bench/failover
url="postgres://postgres:postgres@127.0.0.1:${pg[m1]},127.0.0.1:${pg[m2]}/postgres?target_session_attrs=read-write&sslmode=disable&connect_timeout=2"
token="strata_$(head -c 64 /dev/urandom | base64 | tr -dc A-Za-z0-9 | head -c 43)"
export STRATA_BOOTSTRAP_TOKEN=$token
urls=()
for r in a b; do
	start_daemon "$work/strata-$r.log" "$work/strata" serve --database-url "$url" --data-dir "$work/data-$r" --listen 127.0.0.1:0
	a=
	for _ in $(seq 1 300); do
		a=$(grep -o '"msg":"strata serving","addr":"[^"]*"' "$work/strata-$r.log" | sed 's/.*"addr":"//; s/"$//' || true)
		[ -n "$a" ] && curl -sf "http://$a/readyz" >/dev/null && break
		sleep 0.1
	done
	[ -n "$a" ] || { echo "strata $r did not start"; cat "$work/strata-$r.log"; exit 1; }
	urls+=("http://$a")
done
# The faults: a switchover at 10 s, a kill -9 of the (new) primary's postmaster at 30 s.
kill_primary="m=\$(for m in m1 m2; do curl -sf http://127.0.0.1:\$(grep -o 'listen: 127.0.0.1:[0-9]*' $work/\$m.yml | head -1 | cut -d: -f3)/primary >/dev/null && echo \$m; done | head -1); kill -9 \$(head -1 $work/\$m/postmaster.pid) && echo killed postmaster of \$m"
# Is workspace {ws}'s advisory key held (by strata's lock keeper) on the primary?
keyheld="psql '$url' -Atc \"SELECT count(*) FROM pg_locks l, fo.states s WHERE s.name = '{ws}' AND l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND ((l.classid::bigint << 32) | l.objid::bigint) = s.id\""
"$work/failover" -servers "$(IFS=,; echo "${urls[*]}")" -token "$token" -duration 50s -keyheld "$keyheld" \
	-fault "10s=patronictl -c $work/m1.yml switchover --force --candidate \$(patronictl -c $work/m1.yml list -f json | python3 -c 'import json,sys; print([m[\"Member\"] for m in json.load(sys.stdin) if m[\"Role\"]!=\"Leader\"][0])')" \
	-fault "30s=$kill_primary"
patronictl -c "$work/m1.yml" list
grep -h '"status":500' "$work"/strata-*.log | head -5 || true
