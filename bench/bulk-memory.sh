#!/usr/bin/env bash
# Peak memory growth of a strata server while one bulk apply streams MIB MiB (default 1024) at it,
# for this checkout and for an older build (the anchor: OLD_REF, by default the last commit
# before the bulk budget of issue 15), side by side on the same machine in the same run.
#
#   bash bench/bulk-memory.sh [MIB] [OLD_REF]
#
# Two bodies, each sent in one POST /v1/nodes:apply by curl from a pipe (chunked, never on
# disk), the answer read as it streams:
#   refused  1 MiB lines naming an org that does not exist: each parses, is held until its
#            batch reaches the database, and is refused there (422);
#   valid    8 KiB lines over 2,000 node names: the first of each name creates the node, the
#            rest leave it unchanged.
# For each binary and body: a fresh server on the embedded default (strata serve --data-dir),
# a warm-up apply of 100 small lines, then VmHWM (the peak resident set) of the strata
# process before and after the stream; the growth is the difference. The embedded
# PostgreSQL's processes are not counted. Needs the PostgreSQL server binaries and curl.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
mib=${1:-1024}
old_ref=${2:-${OLD_REF:-0d650e4}}
work=$(mktemp -d /tmp/strata-bench-bulkmem-XXXXXX)
chmod 755 "$work"
pid=
cleanup() {
	[ -n "${pid:-}" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/new" "$work/old" "$work/src-old"
go build -o "$work/new/strata" ./cmd/strata
git archive "$old_ref" | tar -x -C "$work/src-old"
(cd "$work/src-old" && go build -o "$work/old/strata" ./cmd/strata)

total=$((mib << 20))
# body KIND: the lines of KIND, about $total bytes in all, on stdout.
body() {
	case $1 in
	refused)
		awk -v n=$((total >> 20)) 'BEGIN {
			pad = "x"; while (length(pad) < 1040000) pad = pad pad; pad = substr(pad, 1, 1040000)
			for (i = 1; i <= n; i++)
				printf "{\"metadata\":{\"name\":\"r%06d\"},\"spec\":{\"org\":\"nosuch\",\"pad\":\"%s\"}}\n", i, pad
		}' ;;
	valid)
		awk -v n=$((total >> 13)) 'BEGIN {
			pad = "y"; while (length(pad) < 8100) pad = pad pad; pad = substr(pad, 1, 8100)
			for (i = 1; i <= n; i++)
				printf "{\"metadata\":{\"name\":\"v%05d\",\"labels\":{\"env\":\"prod\"}},\"spec\":{\"org\":\"acme\",\"pad\":\"%s\"}}\n", i % 2000, pad
		}' ;;
	esac
}

hwm() { awk '/^VmHWM/ {print $2}' "/proc/$1/status"; } # KiB

# measure BUILD KIND sets res to "growth_MiB summary-line".
measure() {
	local dir="$work/$1/run-$2"
	mkdir -p "$dir"
	cp "$work/$1/strata" "$dir/strata"
	start_strata "$dir"
	curl -sf -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
		-d '{"metadata":{"name":"acme"}}' "$server/v1/orgs" >/dev/null
	awk 'BEGIN { for (i = 1; i <= 100; i++) printf "{\"metadata\":{\"name\":\"w%03d\"},\"spec\":{\"org\":\"acme\"}}\n", i }' |
		curl -sf -N -H "Authorization: Bearer $token" -H 'Content-Type: application/x-ndjson' \
			--data-binary @- "$server/v1/nodes:apply" >/dev/null
	local before after summary t0 t1
	before=$(hwm "$pid")
	t0=$(date +%s%N)
	summary=$(body "$2" | curl -sf -N -H "Authorization: Bearer $token" -H 'Content-Type: application/x-ndjson' \
		-H 'Transfer-Encoding: chunked' --data-binary @- "$server/v1/nodes:apply" | tail -n 1)
	t1=$(date +%s%N)
	after=$(hwm "$pid")
	local want=$((total >> 20))
	[ "$2" = valid ] && want=$((total >> 13))
	case $summary in
	*"\"lines\":$want,"*) ;;
	*) echo "$1 $2: not every line was answered: $summary" >&2; exit 1 ;; # the trap stops the server
	esac
	kill -TERM "$pid" && wait "$pid" 2>/dev/null || true
	pid=
	res="$(((after - before) / 1024)) $(((t1 - t0) / 1000000)) $summary"
}

echo "peak RSS growth of strata serve during one bulk apply of $mib MiB (VmHWM after - before, MiB), and the apply's wall time"
printf '%-8s %-28s %-28s %s\n' body "old ($old_ref)" "new ($(git rev-parse --short HEAD))" "new/old (memory, time)"
for kind in refused valid; do
	measure old "$kind"
	o=$res
	measure new "$kind"
	n=$res
	read -r om ot osum <<<"$o"
	read -r nm nt nsum <<<"$n"
	printf '%-8s %-28s %-28s %s\n' "$kind" "$om MiB in $ot ms" "$nm MiB in $nt ms" \
		"$(awk -v a="$nm" -v b="$om" -v c="$nt" -v d="$ot" 'BEGIN { printf "%.3f, %.2f", a / b, c / d }')"
	echo "         old: $osum"
	echo "         new: $nsum"
done
