#!/usr/bin/env bash
# Builds the third-party binaries that the local clusterset harness and the
# integration tests run (etcd, kube-apiserver, kube-controller-manager,
# CoreDNS) from the pinned versions in hack/tools/go.mod into _output/bin/.
#
# Usage: hack/build-tools.sh [BINARY...]
#   BINARY is one of: etcd kube-apiserver kube-controller-manager coredns
#   (default: all four, in that order).
#
# A binary is rebuilt only when it is missing or when its stamp file does not
# match the sha256 of hack/tools/go.mod, hack/tools/go.sum, this script and
# the Go version. Set FORCE=1 to rebuild anyway.
#
# These are big builds (kube-apiserver takes several minutes on 2 cores), so
# binaries are built one after the other, never in parallel.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS_DIR="${ROOT}/hack/tools"
BIN_DIR="${ROOT}/_output/bin"
ALL_BINARIES=(etcd kube-apiserver kube-controller-manager coredns)

# The module builds on its own: a go.work elsewhere must not pull it in.
export GOWORK=off

# package prints the Go main package that provides binary $1.
package() {
  case "$1" in
    etcd) echo "go.etcd.io/etcd/server/v3" ;;
    kube-apiserver) echo "k8s.io/kubernetes/cmd/kube-apiserver" ;;
    kube-controller-manager) echo "k8s.io/kubernetes/cmd/kube-controller-manager" ;;
    coredns) echo "github.com/coredns/coredns" ;;
    *) return 1 ;;
  esac
}

# kube_ldflags stamps the Kubernetes version into the k8s binaries; without
# it they report v0.0.0-master (also in the apiserver's /version and user
# agent). The version comes from hack/tools/go.mod so that it cannot drift.
kube_ldflags() {
  local version major minor
  version=$(cd "${TOOLS_DIR}" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
  major=${version#v}
  major=${major%%.*}
  minor=${version#v*.}
  minor=${minor%%.*}
  echo "-X k8s.io/component-base/version.gitVersion=${version}" \
    "-X k8s.io/component-base/version.gitMajor=${major}" \
    "-X k8s.io/component-base/version.gitMinor=${minor}" \
    "-X k8s.io/component-base/version.gitTreeState=clean"
}

# inputs_hash identifies everything a build depends on.
inputs_hash() {
  {
    cat "${TOOLS_DIR}/go.mod" "${TOOLS_DIR}/go.sum" "${BASH_SOURCE[0]}"
    go version
  } | sha256sum | cut -d' ' -f1
}

main() {
  local binaries=("$@")
  if [[ ${#binaries[@]} -eq 0 ]]; then
    binaries=("${ALL_BINARIES[@]}")
  fi
  local b
  for b in "${binaries[@]}"; do
    if ! package "${b}" >/dev/null; then
      echo "unknown binary '${b}'; valid: ${ALL_BINARIES[*]}" >&2
      exit 2
    fi
  done

  mkdir -p "${BIN_DIR}"
  local hash
  hash=$(inputs_hash)

  local pkg stamp out ldflags start
  for b in "${binaries[@]}"; do
    pkg=$(package "${b}")
    out="${BIN_DIR}/${b}"
    stamp="${BIN_DIR}/.${b}.stamp"
    if [[ "${FORCE:-}" != 1 && -x "${out}" && -f "${stamp}" && "$(cat "${stamp}")" == "${hash}" ]]; then
      echo "${b}: up to date (${out})"
      continue
    fi
    ldflags=""
    if [[ "${b}" == kube-* ]]; then
      ldflags=$(kube_ldflags)
    fi
    echo "${b}: building ${pkg} ..."
    start=$(date +%s)
    # Build next to the target and rename, so an interrupted build never
    # leaves a truncated binary that looks up to date.
    rm -f "${stamp}"
    (cd "${TOOLS_DIR}" && go build -ldflags "${ldflags}" -o "${out}.tmp" "${pkg}")
    mv -f "${out}.tmp" "${out}"
    echo "${hash}" >"${stamp}"
    echo "${b}: built in $(($(date +%s) - start))s -> ${out}"
  done
}

main "$@"
