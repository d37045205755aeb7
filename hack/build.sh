#!/usr/bin/env bash
# Builds the project's binaries into _output/bin/: kube-proxy (upstream
# kube-proxy plus the MultiClusterServices gate), kube-proxy-upstream (the
# unmodified upstream command, which the tests compare against) and every
# other command under cmd/ (mcs-controller, ...), and the test images'
# commands under test/cmd/ (echoserver).
#
# Usage: hack/build.sh [NAME...]   (default: all of them)
#
# Builds are reproducible (-trimpath, no VCS stamp): the same sources give
# the same binary here, in CI and in the image build (kind-config/Dockerfile).
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"
mkdir -p _output/bin

version=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
major=${version#v}; major=${major%%.*}
minor=${version#v*.}; minor=${minor%%.*}
ldflags="-X k8s.io/component-base/version.gitVersion=${version} -X k8s.io/component-base/version.gitMajor=${major} -X k8s.io/component-base/version.gitMinor=${minor}"

package() {
  case "$1" in
    kube-proxy-upstream) echo "k8s.io/kubernetes/cmd/kube-proxy" ;;
    *)
      if [[ -d "cmd/$1" ]]; then echo "./cmd/$1"
      elif [[ -d "test/cmd/$1" ]]; then echo "./test/cmd/$1"
      else return 1
      fi ;;
  esac
}

build() {
  local name=$1 pkg start
  if ! pkg=$(package "${name}"); then
    echo "unknown binary ${name}" >&2
    exit 2
  fi
  start=$(date +%s)
  CGO_ENABLED=${CGO_ENABLED:-0} go build -trimpath -buildvcs=false -ldflags "${ldflags}" -o "_output/bin/${name}" "${pkg}"
  echo "built _output/bin/${name} in $(( $(date +%s) - start ))s"
}

names=("$@")
if [[ ${#names[@]} -eq 0 ]]; then
  names=(kube-proxy kube-proxy-upstream)
  for dir in cmd/*/; do
    name=$(basename "${dir}")
    [[ "${name}" == kube-proxy ]] || names+=("${name}")
  done
  for dir in test/cmd/*/; do
    names+=("$(basename "${dir}")")
  done
fi
for name in "${names[@]}"; do
  build "${name}"
done
