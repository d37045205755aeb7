# shellcheck shell=bash
# Sourced by hack/build.sh and hack/build-tools.sh: the one set of build
# flags every binary and `make test` use, so that they share the Go build
# cache (a package compiled with other flags is compiled again).

# The flags `go test` must also use to reuse what the builds compiled
# (the Makefile exports the same).
export CGO_ENABLED=${CGO_ENABLED:-0}
export GOFLAGS="${GOFLAGS:--trimpath}"

# kube_ldflags VERSION stamps a Kubernetes version into a binary; without it
# they report v0.0.0-master (also in the apiserver's /version and user
# agents).
kube_ldflags() {
  local version=$1 major minor
  major=${version#v}
  major=${major%%.*}
  minor=${version#v*.}
  minor=${minor%%.*}
  echo "-X k8s.io/component-base/version.gitVersion=${version}" \
    "-X k8s.io/component-base/version.gitMajor=${major}" \
    "-X k8s.io/component-base/version.gitMinor=${minor}" \
    "-X k8s.io/component-base/version.gitTreeState=clean"
}

# go_build LDFLAGS OUTPUT PACKAGE... runs one `go build` and, since a cold
# build compiles for minutes without a word, prints how far it has got
# every 250 packages. Other output (errors) passes through.
go_build() {
  local ldflags=$1 out=$2
  shift 2
  local start=${SECONDS} count=0 line
  # -s -w: no symbol table or DWARF (stack traces and profiles still
  # work), as Kubernetes' release builds; linking is much quicker.
  # BUILD_TRACE_DIR, if set, gets a trace of the build's actions (compile,
  # link) with their times, to see where a cold build spends them.
  local trace=()
  if [[ -n "${BUILD_TRACE_DIR:-}" ]]; then
    mkdir -p "${BUILD_TRACE_DIR}"
    trace=("-debug-trace=${BUILD_TRACE_DIR}/$(basename "${out}")-$$.json")
  fi
  go build -v -buildvcs=false "${trace[@]}" -ldflags "-s -w ${ldflags}" -o "${out}" "$@" 2>&1 |
    while IFS= read -r line; do
      if [[ "${line}" =~ ^[A-Za-z0-9._~/-]+$ ]]; then
        count=$((count + 1))
        if ((count % 250 == 0)); then
          echo "  ... ${count} packages compiled ($((SECONDS - start))s)"
        fi
      else
        echo "${line}"
      fi
    done
  return "${PIPESTATUS[0]}"
}

# release_image MINOR names this project's kube-proxy image of an older
# Kubernetes release (minors/): mcs-kube-proxy:v1.36.5-mcs.dev, its version
# read from the binary hack/build.sh built into _output/vMINOR/bin.
release_image() {
  echo "mcs-kube-proxy:$("_output/v$1/bin/kube-proxy" --version | awk '{print $2}')-mcs.dev"
}

# minor_toolchain DIR exports GOTOOLCHAIN for the go commands run in the
# release module DIR when its go.mod names a toolchain (a release that
# needs a newer Go than this machine's, see minors/substitutes.txt): the
# go command then takes that toolchain from the module proxy. This
# machine's go.env says GOTOOLCHAIN=local, which ignores the line.
minor_toolchain() {
  local t
  t=$(sed -n 's/^toolchain \(go[0-9.]*\)$/\1/p' "$1/go.mod")
  if [[ -n "${t}" ]]; then
    export GOTOOLCHAIN=${t}
  fi
}
