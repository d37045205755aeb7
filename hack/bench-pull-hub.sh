#!/usr/bin/env bash
# Benchmarks pull mode's hub (docs/benchmarks.md, "Pull mode"): one real hub
# apiserver, 250 member agents by default (the real agent, each with its own
# hub identity and watches; their own clusters simulated in memory), 100
# names exported from every member, and the real planner as a process.
# Reports the agents' publishing, the planner's convergence, CPU, peak RSS
# and writes, the apiserver's and etcd's CPU and memory, and the limit: the
# planner's writes made straight into the hub in the same run.
#
# Needs _output/bin/{etcd,kube-apiserver} (hack/build-tools.sh). Extra
# arguments go to the driver, e.g. --members=50 --names=100.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"

for bin in etcd kube-apiserver; do
  if [[ ! -x "_output/bin/${bin}" ]]; then
    echo "_output/bin/${bin} is missing; run hack/build-tools.sh" >&2
    exit 1
  fi
done

mkdir -p _output/bin
# The controller as hack/build.sh builds it (its flags), so that the
# binary the suite and the images use is not replaced by another build.
hack/build.sh mcs-controller
go build -o _output/bin/bench-pull-hub ./test/bench/pullhub

exec _output/bin/bench-pull-hub --planner=_output/bin/mcs-controller "$@"
