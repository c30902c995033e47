#!/usr/bin/env bash
# What a kind's schema costs (issue 10): the write pipeline per write, the read pipeline per
# read, and the data-aware check of a registration over 100,000 stored objects.
#
#   bash bench/kinds.sh [COUNT]
#
# Go benchmarks on a throwaway PostgreSQL cluster (like the tests): COUNT runs each (default 5).
#   - BenchmarkAdmit / BenchmarkPresent (internal/kind/schema): the pipelines alone, 20 fields;
#   - BenchmarkWriteValidated vs BenchmarkWriteFreeForm (internal/kind): one PUT-equivalent
#     through the generic resource path of the same 20-field spec, as a user kind with its
#     schema and as an org (free-form schema) — the ratio is the schema's share of a write;
#   - BenchmarkRegisterScan100k: a dry-run registration that tightens a maximum, which
#     validates every one of 100,000 stored specs with the new revision.
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-5}
go test -run '^$' -bench 'BenchmarkAdmit|BenchmarkPresent' -benchtime 3000x -count "$count" ./internal/kind/schema/
go test -run '^$' -bench 'BenchmarkWrite' -benchtime 2000x -count "$count" ./internal/kind/
go test -run '^$' -bench 'BenchmarkRegisterScan100k' -benchtime 1x -count "$count" ./internal/kind/
