#!/usr/bin/env bash
# Builds the third-party binaries that the local clusterset harness and the
# tests run and that are not part of this module's graph (etcd and CoreDNS,
# from the versions pinned in hack/tools/go.mod; Helm 3 and Helm 4 (helm4),
# from hack/tools/helm/go.mod and hack/tools/helm4/go.mod), into
# _output/bin/. (kube-apiserver,
# kube-controller-manager and kubectl come from this module: hack/build.sh.)
#
# Usage: hack/build-tools.sh [BINARY...]
#   BINARY is etcd, coredns, helm or helm4 (default: etcd and coredns, which
#   the demo needs; `make test` adds helm, the kind suite helm4). Those of one module build in one
#   `go build`.
#
# The binaries are rebuilt only when one is missing or its stamp file does
# not match the sha256 of its module's go.mod and go.sum, the build scripts
# and the Go version. Set FORCE=1 to rebuild anyway.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS_DIR="${ROOT}/hack/tools"
BIN_DIR="${ROOT}/_output/bin"
ALL_BINARIES=(etcd coredns helm helm4)
DEFAULT_BINARIES=(etcd coredns)
source "${ROOT}/hack/lib-build.sh"

# The module builds on its own: a go.work elsewhere must not pull it in.
export GOWORK=off

# package prints the Go main package that provides binary $1, and
# built_as the name `go build -o DIR` gives it (a module path's major
# version suffix is skipped).
package() {
  case "$1" in
    etcd) echo "go.etcd.io/etcd/server/v3" ;;
    coredns) echo "./coredns" ;; # CoreDNS with a cluster DNS's plugins (hack/tools/coredns)
    helm) echo "helm.sh/helm/v3/cmd/helm" ;;
    helm4) echo "helm.sh/helm/v4/cmd/helm" ;;
    *) return 1 ;;
  esac
}
# module_of prints the module directory binary $1 is built in.
module_of() {
  case "$1" in
    helm) echo "${TOOLS_DIR}/helm" ;;
    helm4) echo "${TOOLS_DIR}/helm4" ;;
    *) echo "${TOOLS_DIR}" ;;
  esac
}
built_as() {
  case "$1" in
    etcd) echo "server" ;;
    helm4) echo "helm" ;;
    *) echo "$1" ;;
  esac
}

# inputs_hash BINARY identifies everything its build depends on: a move of
# Helm's module rebuilds Helm, not etcd.
inputs_hash() {
  local dir
  dir=$(module_of "$1")
  {
    cat "${dir}/go.mod" "${dir}/go.sum" "${BASH_SOURCE[0]}" "${ROOT}/hack/lib-build.sh"
    go version
  } | sha256sum | cut -d' ' -f1
}

main() {
  local binaries=("$@")
  if [[ ${#binaries[@]} -eq 0 ]]; then
    binaries=("${DEFAULT_BINARIES[@]}")
  fi
  mkdir -p "${BIN_DIR}"
  local b stale=()
  for b in "${binaries[@]}"; do
    if ! package "${b}" >/dev/null; then
      echo "unknown binary '${b}'; valid: ${ALL_BINARIES[*]}" >&2
      exit 2
    fi
    if [[ "${FORCE:-}" != 1 && -x "${BIN_DIR}/${b}" && "$(cat "${BIN_DIR}/.${b}.stamp" 2>/dev/null)" == "$(inputs_hash "${b}")" ]]; then
      echo "${b}: up to date (${BIN_DIR}/${b})"
      continue
    fi
    stale+=("${b}")
  done
  if [[ ${#stale[@]} -eq 0 ]]; then
    return
  fi
  echo "building ${stale[*]} ..."
  local start=${SECONDS}
  # Build into a scratch directory and rename, so an interrupted build
  # never leaves a truncated binary that looks up to date.
  SCRATCH=$(mktemp -d "${BIN_DIR}/.tools.XXXXXX")
  trap 'rm -rf "${SCRATCH}"' EXIT
  local dir group
  for dir in $(for b in "${stale[@]}"; do module_of "${b}"; done | sort -u); do
    group=()
    for b in "${stale[@]}"; do
      [[ "$(module_of "${b}")" == "${dir}" ]] && group+=("$(package "${b}")")
    done
    # Each module into its own directory: Helm 3 and 4 are both "helm".
    mkdir -p "${SCRATCH}/${dir##*/}"
    (cd "${dir}" && go_build "" "${SCRATCH}/${dir##*/}/" "${group[@]}")
  done
  for b in "${stale[@]}"; do
    dir=$(module_of "${b}")
    rm -f "${BIN_DIR}/.${b}.stamp"
    mv -f "${SCRATCH}/${dir##*/}/$(built_as "${b}")" "${BIN_DIR}/${b}"
    inputs_hash "${b}" >"${BIN_DIR}/.${b}.stamp"
  done
  echo "built ${stale[*]} in $((SECONDS - start))s -> ${BIN_DIR}"
}

main "$@"
