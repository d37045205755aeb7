#!/usr/bin/env bash
# Builds the project's binaries into _output/bin/: kube-proxy (upstream
# kube-proxy plus the MultiClusterServices gate), kube-proxy-upstream (the
# unmodified upstream command, which the tests compare against) and, once
# it exists, mcs-controller.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"
mkdir -p _output/bin

version=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
major=${version#v}; major=${major%%.*}
minor=${version#v*.}; minor=${minor%%.*}
ldflags="-X k8s.io/component-base/version.gitVersion=${version} -X k8s.io/component-base/version.gitMajor=${major} -X k8s.io/component-base/version.gitMinor=${minor}"

build() {
  local out=$1 pkg=$2 start
  start=$(date +%s)
  go build -ldflags "${ldflags}" -o "_output/bin/${out}" "${pkg}"
  echo "built _output/bin/${out} in $(( $(date +%s) - start ))s"
}

build kube-proxy ./cmd/kube-proxy
build kube-proxy-upstream k8s.io/kubernetes/cmd/kube-proxy
for cmd in cmd/*/; do
  name=$(basename "${cmd}")
  if [[ "${name}" != kube-proxy ]]; then
    build "${name}" "./${cmd}"
  fi
done
