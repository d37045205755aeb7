#!/usr/bin/env bash
# Builds every binary the project and its tests use into _output/bin/: etcd
# and CoreDNS (hack/build-tools.sh) and this module's binaries
# (hack/build.sh), the two builds side by side: each leaves one core idle
# for much of its time (linking, the long tail of big packages), so a cold
# build on two cores finishes minutes sooner than one after the other.
# Their lines are prefixed with [tools] and [build].
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"

start=${SECONDS}
hack/build-tools.sh 2>&1 | sed -u 's/^/[tools] /' &
tools=$!
status=0
hack/build.sh "$@" 2>&1 | sed -u 's/^/[build] /' || status=$?
wait "${tools}" || status=$?
if [[ ${status} -ne 0 ]]; then
  echo "build failed" >&2
  exit "${status}"
fi
echo "all binaries built in $((SECONDS - start))s"
