#!/usr/bin/env bash
# Benchmarks the mcs-controller against real apiservers: 3 member clusters x
# 1,000 exports x 10 endpoints by default. Reports the time from controller
# start to every import and slice present in every member, the p50/p99
# latency from an endpoint change in one member to the imported slice being
# updated in every member, and the controller's peak RSS; and, measured
# before and after convergence in the same run, the limit: the same writes
# made straight into the same apiservers, convergence being reported as a
# ratio to it.
#
# Needs _output/bin/{etcd,kube-apiserver} (hack/build-tools.sh). Extra
# arguments go to the driver, e.g. --exports=5000 --changes=500.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"

for bin in etcd kube-apiserver; do
  if [[ ! -x "_output/bin/${bin}" ]]; then
    echo "_output/bin/${bin} is missing; run hack/build-tools.sh" >&2
    exit 1
  fi
done

# Only the controller and the driver are built; both are small next to
# kube-proxy, which this script leaves alone.
mkdir -p _output/bin
# The controller as hack/build.sh builds it (its flags), so that the
# binary the suite and the images use is not replaced by another build.
hack/build.sh mcs-controller
go build -o _output/bin/bench-mcs-controller ./test/bench/mcscontroller

exec _output/bin/bench-mcs-controller --controller=_output/bin/mcs-controller "$@"
