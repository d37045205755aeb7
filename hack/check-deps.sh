#!/usr/bin/env bash
# Fails in seconds, naming the Debian package to install, when anything the
# build or the tests of PROFILE (demo or test, see hack/deps.txt) use is
# missing: commands, pkg-config modules for cgo, kernel features (probed in
# a network namespace of its own, so the host is left as it is), root, and
# the Go version go.mod asks for. `make demo` and `make test` run it first,
# after hack/install-deps.sh, so that a missing install step stops them in
# the first minute rather than half an hour in.
#
# Usage: hack/check-deps.sh [--packages] [demo|test]   (default: test)
#   --packages  only print the Debian packages of hack/deps.txt that are
#               missing, one per line (what hack/install-deps.sh installs)
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PACKAGES_ONLY=false
if [[ "${1:-}" == --packages ]]; then
  PACKAGES_ONLY=true
  shift
fi
PROFILE=${1:-test}
case "${PROFILE}" in
  demo | test) ;;
  *) echo "check-deps: unknown profile ${PROFILE} (demo or test)" >&2; exit 2 ;;
esac

problems=()
missing_packages=()
add() { problems+=("$1"); [[ -n "${2:-}" ]] && missing_packages+=("$2"); return 0; }
have() { command -v "$1" >/dev/null 2>&1; }

# in_profile P: whether a row of profile P belongs to PROFILE (test
# includes demo).
in_profile() { [[ "$1" == demo || "${PROFILE}" == test ]]; }

kernel=()
while read -r profile kind name package why; do
  [[ -z "${profile}" || "${profile}" == \#* ]] && continue
  in_profile "${profile}" || continue
  case "${kind}" in
    cmd) have "${name}" || add "command ${name} not found: install Debian package ${package} (${why})" "${package}" ;;
    pc)
      if ! have pkg-config; then
        add "pkg-config module ${name} cannot be looked up without pkg-config: install Debian packages pkg-config ${package} (${why})" "${package}"
      elif ! pkg-config --exists "${name}"; then
        add "pkg-config module ${name} not found: install Debian package ${package} (${why})" "${package}"
      fi
      ;;
    kernel) kernel+=("${name}") ;;
    *) echo "check-deps: hack/deps.txt: unknown kind ${kind} for ${name}" >&2; exit 2 ;;
  esac
done <"${ROOT}/hack/deps.txt"

if [[ "${PACKAGES_ONLY}" == true ]]; then
  if [[ ${#missing_packages[@]} -gt 0 ]]; then
    printf '%s\n' "${missing_packages[@]}" | sort -u
  fi
  exit 0
fi

# Go itself is not a Debian package here: the version go.mod names.
want=$(sed -n 's/^go \([0-9.]*\).*/\1/p' "${ROOT}/go.mod")
if ! have go; then
  add "command go not found: install Go ${want} or newer (https://go.dev/dl) and put it on PATH"
else
  got=$(go env GOVERSION 2>/dev/null)
  got=${got#go}
  if [[ "$(printf '%s\n%s\n' "${want}" "${got%%[-+ ]*}" | sort -V | head -1)" != "${want}" ]]; then
    add "Go ${got} is older than go.mod's go ${want}: install Go ${want} or newer (https://go.dev/dl)"
  fi
fi

# Kernel features, in a network namespace of the probe's own. They need
# root and the commands above; without those, they were reported already.
if [[ $(id -u) -ne 0 ]]; then
  add "the local clusterset and the data-plane tests need root (CAP_NET_ADMIN): run as root"
elif have unshare && have ip && have nft && [[ ${#kernel[@]} -gt 0 ]]; then
  for feature in "${kernel[@]}"; do
    case "${feature}" in
      netns) probe='true' ;;
      veth) probe='ip link add mcs-check0 type veth peer name mcs-check1' ;;
      nf_tables) probe='nft add table ip mcs_check && nft add chain ip mcs_check nat "{ type nat hook prerouting priority -100; }"' ;;
      *) echo "check-deps: hack/deps.txt: unknown kernel feature ${feature}" >&2; exit 2 ;;
    esac
    if ! out=$(unshare --net -- sh -c "${probe}" 2>&1); then
      add "kernel feature ${feature} is not available (${out:-no output}): the host's kernel must provide it (no package does)"
    fi
  done
fi

if [[ ${#problems[@]} -eq 0 ]]; then
  exit 0
fi
{
  echo "check-deps (${PROFILE}): $(( ${#problems[@]} )) missing:"
  printf '  - %s\n' "${problems[@]}"
  if [[ ${#missing_packages[@]} -gt 0 ]]; then
    echo "Install them with: apt-get install $(printf '%s\n' "${missing_packages[@]}" | sort -u | tr '\n' ' ')(hack/install-deps.sh ${PROFILE} does)"
  fi
} >&2
exit 1
