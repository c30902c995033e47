#!/usr/bin/env bash
# Wall time of `terraform init` + `terraform apply` (10 terraform_data resources) with three
# backends, measured in one run on one machine: local (the floor), strata's http backend,
# and the pg backend on the same PostgreSQL cluster strata uses (the embedded one).
#
#   bash bench/terraform-backends.sh [ROUNDS]      (default 7 rounds; prints medians and ratios)
#
# Needs terraform on PATH and the PostgreSQL server binaries (like strata serve).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
rounds=${1:-7}
work=$(mktemp -d /tmp/strata-bench-XXXXXX)
chmod 755 "$work"
cleanup() {
	[ -n "${pid:-}" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/strata" ./cmd/strata
start_strata "$work"
curl -sf -X PUT -H "Authorization: Bearer $token" "$server/v1/projects/bench" >/dev/null
conn="host=$work/data/pg-socket port=5432 user=strata dbname=strata sslmode=disable"

resources() {
	for i in $(seq 1 10); do printf 'resource "terraform_data" "r%d" {\n  input = "%d"\n}\n' "$i" "$i"; done
}

config() { # backend round
	case "$1" in
	local) echo '' ;;
	http) printf 'terraform {\n  backend "http" {\n    address = "%s"\n    lock_address = "%s"\n    unlock_address = "%s"\n    username = "strata"\n  }\n}\n' \
		"$server/v1/state/bench/r$2" "$server/v1/state/bench/r$2" "$server/v1/state/bench/r$2" ;;
	pg) printf 'terraform {\n  backend "pg" {\n    conn_str = "%s"\n    schema_name = "bench_pg_%s"\n  }\n}\n' "$conn" "$2" ;;
	esac
}

export TF_IN_AUTOMATION=1 TF_INPUT=0 CHECKPOINT_DISABLE=1 TF_HTTP_PASSWORD="$token"
declare -A times
for r in $(seq 1 "$rounds"); do
	for b in local http pg; do
		d="$work/$b-$r"
		mkdir -p "$d"
		{ config "$b" "$r"; resources; } >"$d/main.tf"
		start=$(date +%s%N)
		(cd "$d" && terraform init -no-color >"$d/log" 2>&1 && terraform apply -auto-approve -no-color >>"$d/log" 2>&1) || { cat "$d/log"; exit 1; }
		end=$(date +%s%N)
		times[$b]+="$(((end - start) / 1000000)) "
	done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ml=$(echo "${times[local]}" | median)
mh=$(echo "${times[http]}" | median)
mp=$(echo "${times[pg]}" | median)
echo "terraform $(terraform version | head -1 | awk '{print $2}'), $rounds rounds, init+apply of 10 terraform_data resources"
printf '%-6s median %6d ms   (all: %s)\n' local "$ml" "${times[local]}"
printf '%-6s median %6d ms   (all: %s)\n' http "$mh" "${times[http]}"
printf '%-6s median %6d ms   (all: %s)\n' pg "$mp" "${times[pg]}"
awk -v l="$ml" -v h="$mh" -v p="$mp" 'BEGIN { printf "http/local = %.2f   pg/local = %.2f   http/pg = %.2f\n", h/l, p/l, h/p }'
