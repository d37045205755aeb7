#!/usr/bin/env bash
# Measures cluster selection (KEP-5939) failover to the next result and
# failback, from the EndpointSlice update to the node's nftables rules,
# against a plain local Service's endpoint change, in one run, and prints
# the ratio. Needs root and nft (it runs in a network namespace of its own).
set -o errexit -o nounset -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
MCS_MEASURE=1 go test -count=1 -run '^TestMeasureClusterSelectionFailover$' -v ./pkg/proxy/multicluster | grep -E 'cluster selection|plain local|RESULT|FAIL|SKIP'
