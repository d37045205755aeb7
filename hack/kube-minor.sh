#!/usr/bin/env bash
# Writes the module that builds kube-proxy for one Kubernetes release:
# minors/vMAJOR.MINOR/go.mod requires this repository's module and pins
# k8s.io/kubernetes at VERSION, each of its staging modules at the
# matching v0.MINOR.PATCH, and every other module upstream's go.mod
# requires at upstream's own version (knftables, utils, kube-openapi, ...),
# so that the binary is that release's kube-proxy, built from its own
# dependency graph, plus our gate. Nothing of ours is copied: the module
# holds a go.mod (its `tool` lines name the two commands it builds) and a
# go.sum.
#
# Usage: hack/kube-minor.sh VERSION        e.g. 1.36.3 or v1.36.4
#        hack/kube-minor.sh --check        is every release the newest patch served?
#        hack/kube-minor.sh --update       move every release under minors/ to it
#
# The module proxy's version list is incomplete (k8s.io/kubernetes v1.34.12
# and v1.36.5 are served without being listed), so --check asks for exact
# versions: the patch after the newest known, until one is not served. It
# also says which pre-release of the next minor is served, and whether
# that minor's first release is, for a preview under minors/ (see
# docs/kubernetes-versions.md). It exits 1 when a release is behind.
#
# Run on an existing minor, it moves it to a newer patch release and says
# what changed in upstream's kube-proxy sources (cmd/kube-proxy, pkg/proxy)
# between the two; then `make kube-proxy KUBERNETES_VERSION=1.36` and
# `make test-minors` check the seam and the data plane on it. A new minor
# (1.38) is one run of this script.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"

upstream_dir() {
  GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$1" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p'
}

# kube_proxy_flags DIR: the flags upstream's kube-proxy in DIR (a
# k8s.io/kubernetes module) registers.
kube_proxy_flags() {
  grep -ohE 'fs\.[A-Za-z0-9]+Var[A-Za-z]*\([^,]+, *"[a-z0-9-]+"' "$1"/cmd/kube-proxy/app/options*.go |
    sed -E 's/.*"([a-z0-9-]+)"$/--\1/' | sort -u
}

# kube_proxy_gates DIR: each feature gate that cmd/kube-proxy or pkg/proxy
# of DIR reads, with its newest stage ("Gate 1.33 true GA").
kube_proxy_gates() {
  local used
  used=$(grep -rhoE 'features\.[A-Z][A-Za-z0-9]+' "$1"/pkg/proxy "$1"/cmd/kube-proxy | sed 's/^features\.//' | sort -u)
  awk '
    /^\t[A-Z][A-Za-z0-9]+: \{$/ { gate = $1; sub(":", "", gate); next }
    gate != "" && /Version: version.MustParse/ {
      v = $0; sub(/.*MustParse\("/, "", v); sub(/".*/, "", v)
      d = $0; sub(/.*Default: /, "", d); sub(/[,}].*/, "", d)
      p = $0; sub(/.*PreRelease: featuregate\./, "", p); sub(/[,}].*/, "", p)
      last[gate] = v " " d " " p
    }
    /^\t}/ { gate = "" }
    END { for (g in last) print g, last[g] }' "$1"/pkg/features/kube_features.go |
    grep -wFf <(echo "${used}") | sort
}

# served VERSION: whether the module proxy serves k8s.io/kubernetes VERSION
# (asked by its exact version, outside any module).
served() {
  (cd / && GOFLAGS= go list -m -f '{{.Version}}' "k8s.io/kubernetes@$1" >/dev/null 2>&1)
}

# newest_served PREFIX FIRST FOUND: the newest PREFIXn the proxy serves,
# asking for n = FIRST, FIRST+1, ... in turn, or FOUND when none is. The
# proxy may lack some versions and serve later ones (v1.34.6 missing,
# v1.34.7 to v1.34.12 served): asking stops only after PATCH_GAP versions
# in a row are not served.
PATCH_GAP=${KUBE_MINOR_PATCH_GAP:-4}
newest_served() {
  local prefix=$1 n=$2 found=$3 misses=0
  while ((misses < PATCH_GAP)); do
    if served "${prefix}${n}"; then
      found=${prefix}${n} misses=0
    else
      misses=$((misses + 1))
    fi
    n=$((n + 1))
  done
  echo "${found}"
}

# newest_patch VERSION: the newest patch release of VERSION's minor that
# is served (VERSION itself when none is newer).
newest_patch() {
  local v=$1
  [[ "${v}" =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || { echo "${v}"; return; }
  newest_served "v1.${BASH_REMATCH[1]}." "$((BASH_REMATCH[2] + 1))" "${v}"
}

# pins: "DIR VERSION" of every release this tree builds: the pinned one
# (go.mod) and each under minors/.
pins() {
  echo ". $(sed -n 's/^\tk8s.io\/kubernetes \(v[0-9.]*\)$/\1/p' go.mod | head -1)"
  local d
  for d in minors/v1.*/; do
    d=${d%/}
    [[ -f "${d}/go.mod" ]] || continue
    echo "${d} $(sed -n 's/^\tk8s.io\/kubernetes => k8s.io\/kubernetes \(v[0-9a-z.-]*\)$/\1/p' "${d}/go.mod")"
  done
}

check() {
  local behind=0 dir pin newest highest=0 m
  while read -r dir pin; do
    [[ -n "${pin}" ]] || continue
    m=${pin#v1.}
    m=${m%%.*}
    ((m > highest)) && highest=${m}
    if [[ "${pin}" == *-* ]]; then
      echo "1.${m}: ${dir} is a preview of ${pin}; $(served "v1.${m}.0" && echo "v1.${m}.0 is served: hack/kube-minor.sh 1.${m}.0 makes it a supported release" || echo "v1.${m}.0 is not served yet")"
      continue
    fi
    newest=$(newest_patch "${pin}")
    if [[ "${newest}" == "${pin}" ]]; then
      echo "1.${m}: ${pin} (${dir}) is the newest patch served: up to date"
    else
      behind=1
      if [[ "${dir}" == "." ]]; then
        echo "1.${m}: ${newest} is served, the pinned release (go.mod) is ${pin}: move go.mod's k8s.io/kubernetes and its staging modules to it"
      else
        echo "1.${m}: ${newest} is served, ${dir} builds ${pin}: hack/kube-minor.sh ${newest#v} moves it"
      fi
    fi
  done < <(pins)
  # The next minor: its first release, else its newest pre-release.
  local next=$((highest + 1)) pre="" kind
  if served "v1.${next}.0"; then
    echo "1.${next}: v1.${next}.0 is served: hack/kube-minor.sh 1.${next}.0 adds it"
    behind=1
  else
    for kind in alpha beta rc; do
      pre=$(newest_served "v1.${next}.0-${kind}." 0 "${pre}")
    done
    if [[ -n "${pre}" ]]; then
      echo "1.${next}: not released; ${pre} is the newest pre-release served (hack/kube-minor.sh ${pre#v} builds a preview)"
    else
      echo "1.${next}: nothing served yet"
    fi
  fi
  return "${behind}"
}

case "${1:-}" in
--check)
  check
  exit
  ;;
--update)
  while read -r dir pin; do
    [[ "${dir}" != "." && -n "${pin}" && "${pin}" != *-* ]] || continue
    newest=$(newest_patch "${pin}")
    [[ "${newest}" == "${pin}" ]] || "$0" "${newest}"
  done < <(pins)
  exit
  ;;
esac

version=${1:?usage: hack/kube-minor.sh VERSION (for example 1.36.3) | --check | --update}
version=v${version#v}
if [[ ! "${version}" =~ ^v1\.([0-9]+)\.([0-9]+)(-(alpha|beta|rc)\.[0-9]+)?$ ]]; then
  echo "kube-minor: ${version} is not a Kubernetes release (v1.MINOR.PATCH, or v1.MINOR.0-beta.N for a preview)" >&2
  exit 2
fi
minor=${BASH_REMATCH[1]} patch=${BASH_REMATCH[2]} prerelease=${BASH_REMATCH[3]}
# A pre-release is a preview, in a directory of its own name: it is no
# supported release until its minor's first release replaces it.
dir=minors/v1.${minor}
if [[ -n "${prerelease}" ]]; then
  dir=minors/v1.${minor}-preview
elif [[ -d minors/v1.${minor}-preview ]]; then
  git rm -rq "minors/v1.${minor}-preview" 2>/dev/null || rm -rf "minors/v1.${minor}-preview"
  echo "==> v1.${minor} is released: minors/v1.${minor}-preview removed"
fi
staging_version=v0.${minor}.${patch}${prerelease}

previous=""
if [[ -f "${dir}/go.mod" ]]; then
  previous=$(sed -n 's/^\tk8s.io\/kubernetes => k8s.io\/kubernetes \(v[0-9a-z.-]*\)$/\1/p' "${dir}/go.mod")
fi

echo "==> k8s.io/kubernetes ${version}"
# A release may need a newer Go than this machine's (1.38 needs 1.27):
# its module then names a toolchain, the newest patch of that Go the
# module proxy serves, which the go command fetches from there like any
# module (GOTOOLCHAIN, set by hack/lib-build.sh's minor_toolchain for
# every go command run in the module).
upstream_go=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$(cd / && GOFLAGS= go mod download -json "k8s.io/kubernetes@${version}" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')")
our_go=$(sed -n 's/^go \([0-9.]*\)$/\1/p' go.mod)
go_version=${our_go} toolchain=""
if [[ -n "${upstream_go}" && "$(printf '%s\n%s\n' "${our_go}" "${upstream_go}" | sort -V | tail -1)" != "${our_go}" ]]; then
  go_version=${upstream_go}
  IFS=. read -r gomajor gominor _ <<<"${upstream_go}"
  # The toolchain this project builds with for that Go (minors/substitutes.txt).
  toolchain=$(awk -v want="go${gomajor}.${gominor}" '$1 == "toolchain" && $2 == want {print $3}' minors/substitutes.txt)
  if [[ -z "${toolchain}" ]]; then
    echo "kube-minor: ${version} needs Go ${upstream_go}: name the toolchain to build it with in minors/substitutes.txt (toolchain go${gomajor}.${gominor} goX.Y.Z)" >&2
    exit 1
  fi
  export GOTOOLCHAIN=${toolchain}
  echo "==> it needs Go ${upstream_go}: toolchain ${toolchain}"
fi
kdir=$(upstream_dir "${version}")
if [[ -z "${kdir}" ]]; then
  echo "kube-minor: the module proxy does not serve k8s.io/kubernetes ${version}" >&2
  exit 1
fi
kmod="${kdir}/go.mod"

mkdir -p "${dir}"
{
  echo "// Generated by hack/kube-minor.sh ${version#v}: kube-proxy of Kubernetes ${version}"
  echo "// plus the MultiClusterServices gate. Regenerate, do not edit."
  echo "module github.com/mcs-kube-proxy/mcs-kube-proxy/${dir}"
  echo
  echo "go ${go_version}"
  [[ -z "${toolchain}" ]] || echo "toolchain ${toolchain}"
  echo
  # The GODEBUG defaults upstream's binaries are built with.
  grep -E '^godebug ' "${kmod}" || true
  echo
  echo "require ("
  echo "	github.com/mcs-kube-proxy/mcs-kube-proxy v0.0.0"
  echo "	k8s.io/kubernetes ${version}"
  echo ")"
  echo
  echo "tool ("
  echo "	github.com/mcs-kube-proxy/mcs-kube-proxy/cmd/kube-proxy"
  echo "	k8s.io/kubernetes/cmd/kube-proxy"
  echo ")"
  echo
  echo "replace ("
  echo "	github.com/mcs-kube-proxy/mcs-kube-proxy => ../.."
  echo "	k8s.io/multiclusterservices => ../../staging/src/k8s.io/multiclusterservices"
  echo "	k8s.io/kubernetes => k8s.io/kubernetes ${version}"
  # Upstream's staging modules, at the release's own tag.
  staging=$(grep -oE '^\s+k8s.io/[a-z-]+ => ./staging' "${kmod}" | awk '{print $1}' | grep -v '^k8s.io/sample-' | sort)
  for m in ${staging}; do
    echo "	${m} => ${m} ${staging_version}"
  done
  # Staging modules of ours that this release does not have yet keep the
  # version this repository pins (nothing in kube-proxy imports them).
  for m in $(sed -n 's/^\t\(k8s.io\/[a-z-]*\) => k8s.io\/[a-z-]* v.*$/\1/p' go.mod); do
    if ! grep -qx "${m}" <<<"${staging}"; then
      sed -n "s|^\t${m} => |\t${m} => |p" go.mod
    fi
  done
  # Every other module upstream requires, at upstream's version.
  awk '/^require \(/{r=1; next} r && /^\)/{r=0} r && $1 !~ /^k8s.io\// {print $1, $2} /^require [^(]/ {print $2, $3}' "${kmod}" |
    grep -v '^k8s.io/' | sort -u | while read -r m v; do
      echo "	${m} => ${m} ${v}"
    done
  # k8s.io modules that are not staging (klog, utils, kube-openapi, ...).
  awk '/^require \(/{r=1; next} r && /^\)/{r=0} r && $1 ~ /^k8s.io\// && $2 != "v0.0.0" {print $1, $2}' "${kmod}" | sort -u | while read -r m v; do
    echo "	${m} => ${m} ${v}"
  done
  echo ")"
} >"${dir}/go.mod.new"
# Versions upstream names that the module proxy does not serve whole (its
# .zip refused), and the served one each is built with instead.
while read -r kind module wanted served _; do
  [[ "${kind}" == module ]] || continue
  sed -i "s|^\t${module} => ${module} ${wanted}\$|\t${module} => ${module} ${served}|" "${dir}/go.mod.new"
done <minors/substitutes.txt
mv "${dir}/go.mod.new" "${dir}/go.mod"

echo "==> go mod tidy in ${dir}"
# -e: tidy reads every build-tagged file, also the other releases' seam
# files (pkg/kubeproxy/flagz*.go), whose imports this release lacks; the
# build, with this release's tag, is what must compile.
(cd "${dir}" && GOFLAGS=-mod=mod go mod tidy -e 2>&1) |
  grep -v -e '^go: downloading' -e '/flagz' -e 'pkg/kubeproxy imports$' -e 'cmd/kube-proxy imports$' -e '^go: finding module for package' || true

if [[ -n "${previous}" && "${previous}" != "${version}" ]]; then
  echo "==> upstream kube-proxy sources, ${previous} -> ${version}"
  pdir=$(upstream_dir "${previous}")
  changed=$(diff -rq "${pdir}/cmd/kube-proxy" "${kdir}/cmd/kube-proxy" | sed "s|${pdir}/||; s|${kdir}/||" || true)
  changed+=$'\n'$(diff -rq "${pdir}/pkg/proxy" "${kdir}/pkg/proxy" | sed "s|${pdir}/||; s|${kdir}/||" || true)
  grep -v '^$' <<<"${changed}" | sed -E 's/^Files ([^ ]+) and .* differ$/  changed: \1/; s/^Only in (.*): (.*)$/  only in one release: \1\/\2/' ||
    echo "  nothing changed in cmd/kube-proxy and pkg/proxy"
  echo "  (diff -ru ${pdir}/pkg/proxy ${kdir}/pkg/proxy shows each change)"
  echo "==> kube-proxy's flags, ${previous} -> ${version}"
  diff <(kube_proxy_flags "${pdir}") <(kube_proxy_flags "${kdir}") | sed -n 's/^< /  removed: /p; s/^> /  added: /p' | grep . ||
    echo "  the same flags"
  echo "==> the feature gates kube-proxy reads, ${previous} -> ${version} (each gate's newest stage)"
  diff <(kube_proxy_gates "${pdir}") <(kube_proxy_gates "${kdir}") | sed -n 's/^< /  was: /p; s/^> /  now: /p' | grep . ||
    echo "  no change"
fi
echo "${dir}: kube-proxy ${version}; build it with: make kube-proxy KUBERNETES_VERSION=1.${minor}"
