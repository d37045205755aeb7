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
# KUBERNETES_VERSION=1.MINOR builds kube-proxy and kube-proxy-upstream of
# that Kubernetes release instead (the module minors/v1.MINOR, written by
# hack/kube-minor.sh) into
# _output/v1.MINOR/bin/, with the tag kube1.MINOR that selects the
# release's seam files in pkg/kubeproxy. The pinned release (go.mod) is
# the default and builds into _output/bin/.
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
moddir=. out=_output/bin
if [[ -n "${KUBERNETES_VERSION:-}" ]]; then
  IFS=. read -r major minor _ <<<"${KUBERNETES_VERSION#v}"
  want=v${major}.${minor}
  pinned=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
  if [[ "${pinned}" != "${want}".* ]]; then
    moddir=minors/${want}
    out=_output/${want}/bin
    # A minor not released yet is built from its preview.
    if [[ ! -f "${moddir}/go.mod" && -f "${moddir}-preview/go.mod" ]]; then
      moddir=${moddir}-preview
      out=_output/${want}-preview/bin
    fi
    if [[ ! -f "${moddir}/go.mod" ]]; then
      echo "no kube-proxy for Kubernetes ${KUBERNETES_VERSION}: the releases built here are the pinned one (go.mod) and those under minors/ (add one with hack/kube-minor.sh)" >&2
      exit 2
    fi
    minor_toolchain "${moddir}"
    [[ ${#names[@]} -gt 0 ]] || names=(kube-proxy kube-proxy-upstream)
    for name in "${names[@]}"; do
      if [[ "${name}" != kube-proxy && "${name}" != kube-proxy-upstream ]]; then
        echo "KUBERNETES_VERSION=${KUBERNETES_VERSION} builds kube-proxy and kube-proxy-upstream only, not ${name}" >&2
        exit 2
      fi
    done
    export GOFLAGS="${GOFLAGS} -tags=kube1.${want#v1.}"
  fi
fi
mkdir -p "${out}"
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

ldflags=$(kube_ldflags "$(cd "${moddir}" && go list -m -f '{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}' k8s.io/kubernetes)")
start=$(date +%s)
# In a release's module, this repository's packages are named by import
# path (its module is a dependency there).
if [[ "${moddir}" != . ]]; then
  for i in "${!pkgs[@]}"; do
    pkgs[i]=github.com/mcs-kube-proxy/mcs-kube-proxy/${pkgs[i]#./}
  done
fi
if [[ ${#pkgs[@]} -gt 0 ]]; then
  (cd "${moddir}" && go_build "${ldflags}" "${ROOT}/${out}/" "${pkgs[@]}")
fi
if [[ "${upstream}" == true ]]; then
  (cd "${moddir}" && go_build "${ldflags}" "${ROOT}/${out}/kube-proxy-upstream" k8s.io/kubernetes/cmd/kube-proxy)
fi
# kubectl completes `kubectl mcs <TAB>` through kubectl_complete-mcs on
# the PATH: kubectl-mcs answers under that name.
if [[ " ${names[*]} " == *" kubectl-mcs "* ]]; then
  ln -sf kubectl-mcs "${out}/kubectl_complete-mcs"
fi
echo "built ${names[*]} into ${out} in $(($(date +%s) - start))s"
