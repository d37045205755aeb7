#!/usr/bin/env bash
# Builds the binaries of this module into _output/bin/:
#   kube-proxy               upstream kube-proxy plus the MultiClusterServices gate
#   kube-proxy-upstream      the unmodified upstream command (the tests compare)
#   every command under cmd/ (mcs-controller, kubectl-mcs, ...) and test/cmd/
#   (echoserver, clusterset, ...)
#   kube-apiserver, kube-controller-manager, kubectl
#                            the pinned Kubernetes version (the `tool`s of go.mod)
#
# Usage: hack/build.sh [NAME...]   (default: all of them)
#
# Everything is built by one `go build`, so the Kubernetes packages that
# kube-proxy, the apiserver, the controller-manager and kubectl share are
# compiled once, with the flags `make test` also uses (-trimpath,
# CGO_ENABLED=0), so that the tests reuse them too. Builds are reproducible
# (-trimpath, no VCS stamp): the same sources give the same binary here, in
# CI and in the image build (kind-config/Dockerfile). A cold build prints
# its progress; a warm one only relinks what changed.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"
source hack/lib-build.sh
mkdir -p _output/bin

# package prints the main package of binary $1.
package() {
  case "$1" in
    kube-proxy-upstream) echo "k8s.io/kubernetes/cmd/kube-proxy" ;;
    kube-apiserver | kube-controller-manager | kubectl) echo "k8s.io/kubernetes/cmd/$1" ;;
    *)
      if [[ -d "cmd/$1" ]]; then echo "./cmd/$1"
      elif [[ -d "test/cmd/$1" ]]; then echo "./test/cmd/$1"
      else return 1
      fi ;;
  esac
}

names=("$@")
if [[ ${#names[@]} -eq 0 ]]; then
  names=(kube-proxy kube-proxy-upstream kube-apiserver kube-controller-manager kubectl)
  for dir in cmd/*/ test/cmd/*/; do
    name=$(basename "${dir}")
    [[ "${name}" == kube-proxy ]] || names+=("${name}")
  done
fi

# `go build -o DIR` names each binary after its package, so the two
# kube-proxy commands cannot share one invocation: the upstream one is
# linked second, from the packages the first already compiled.
pkgs=()
upstream=false
for name in "${names[@]}"; do
  if ! pkg=$(package "${name}"); then
    echo "unknown binary ${name}" >&2
    exit 2
  fi
  if [[ "${name}" == kube-proxy-upstream ]]; then
    upstream=true
  else
    pkgs+=("${pkg}")
  fi
done

ldflags=$(kube_ldflags "$(go list -m -f '{{.Version}}' k8s.io/kubernetes)")
start=$(date +%s)
if [[ ${#pkgs[@]} -gt 0 ]]; then
  go_build "${ldflags}" _output/bin/ "${pkgs[@]}"
fi
if [[ "${upstream}" == true ]]; then
  go_build "${ldflags}" _output/bin/kube-proxy-upstream k8s.io/kubernetes/cmd/kube-proxy
fi
echo "built ${names[*]} into _output/bin in $(($(date +%s) - start))s"
