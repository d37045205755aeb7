#!/usr/bin/env bash
# Measures kube-proxy's live heap holding N ServiceImports against N plain
# Services (same run, fresh apiserver per path, 10 endpoints in two slices
# each, nftables), after a forced GC, minus kube-proxy's heap against an
# empty apiserver, and prints the per-object ratio. Needs root and the
# binaries of `make tools build`. Extra arguments go to the driver, e.g.
# -n=1000. With -restart it also restarts kube-proxy over its own rules, as
# a node's kube-proxy restarts, and prints the time to its first full sync
# against the same for the Services; -sources=10 -endpoints=20 gives each
# import 10 source clusters of 2 endpoints (and each Service 10 slices).
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"
for bin in etcd kube-apiserver kube-proxy; do
  if [[ ! -x "_output/bin/${bin}" ]]; then
    echo "_output/bin/${bin} is missing; run make tools build" >&2
    exit 1
  fi
done
go build -o _output/bin/bench-kube-proxy-memory ./test/bench/kubeproxymem
exec _output/bin/bench-kube-proxy-memory --kube-proxy=_output/bin/kube-proxy "$@"
