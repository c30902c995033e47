#!/usr/bin/env bash
# The robustness harness's long form (docs/robustness.md): real strata replicas on one
# PostgreSQL (fsync on, a synchronous standby), concurrent clients issuing a random mix
# through the HTTP API and the pg backend's SQL, random faults one per history, every
# history checked (Porcupine per key, memberships included; lists; watches, filtered ones
# included; cached renders; bulk applies; statuses). The short form with fixed
# seeds runs in CI (.ci/run); this one takes a random seed unless given one, so each run
# explores new interleavings.
#
#   bash bench/robustness.sh DURATION [SEED]
#
#   bash bench/robustness.sh 10m              # the published figures: 4 replicas × 256 clients
#   bash bench/robustness.sh 3m 12345         # repeat a run by its seed
#
# Environment: REPLICAS (default 4), CLIENTS (default 256), FAULTS (comma-separated fault
# names, default every fault: pg-restart-fast, pg-restart-immediate, kill9-replica-N,
# cut-connections, delay-replica-N, blackhole-replica-N, terminate-backends,
# promote-standby), EXTRA=1 (add the extra faults: pause-replica-N, lose-commit-answers,
# stop-standby, cut-client-connections), OUT (the directory that keeps every history, watch stream, list page,
# ground truth and the cluster's log; default a new directory under /tmp, kept).
# The last line of output is the summary: histories, operations, faults, violations.
# A failing history prints its violations and where its files are; the exit status is then
# non-zero. Needs the PostgreSQL 15+ server binaries (as the other benches do) and Go.
set -euo pipefail
cd "$(dirname "$0")/.."

duration=${1:?usage: bash bench/robustness.sh DURATION [SEED]}
seed=${2:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
out=${OUT:-$(mktemp -d /tmp/strata-robustness-XXXXXX)}
mkdir -p "$out" # OUT may name a directory that does not exist yet
replicas=${REPLICAS:-4}
clients=${CLIENTS:-256}
extra=false
if [ -n "${EXTRA:-}" ]; then extra=true; fi

echo "robustness: duration=$duration seed=$seed replicas=$replicas clients=$clients out=$out"
echo "repeat with: REPLICAS=$replicas CLIENTS=$clients${FAULTS:+ FAULTS=$FAULTS}${EXTRA:+ EXTRA=1} bash bench/robustness.sh $duration $seed"
# -timeout: the traffic, plus each history's check (at most 5 minutes) and the cluster's start.
set +e
go test -tags robustness -count=1 -timeout 0 -run 'TestRobustness$' ./internal/robustness/ -v \
	-robustness.duration="$duration" -robustness.seed="$seed" \
	-robustness.replicas="$replicas" -robustness.clients="$clients" \
	-robustness.faults="${FAULTS:-}" -robustness.extra="$extra" -robustness.out="$out" 2>&1 |
	tee "$out/run.log" | grep --line-buffered -E '^(=== RUN|\s*--- |\s+robustness_test|FAIL|ok|PASS)'
status=${PIPESTATUS[0]}
set -e
grep -o 'robustness: replicas=.*' "$out/run.log" | tail -1
echo "everything is kept in $out"
exit "$status"
