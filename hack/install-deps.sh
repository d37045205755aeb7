#!/usr/bin/env bash
# Installs, with apt-get, the Debian packages of hack/deps.txt that PROFILE
# (demo or test) needs and this machine lacks, then runs hack/check-deps.sh,
# which fails naming whatever is still missing. No daemon is started by
# the install (Docker's is configured and started by hack/kind-docker.sh).
#
# Usage: hack/install-deps.sh [demo|test]   (default: test)
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PROFILE=${1:-test}
case "${PROFILE}" in
  demo | test) ;;
  *) echo "install-deps: unknown profile ${PROFILE} (demo or test)" >&2; exit 2 ;;
esac

# What is missing is decided where it is checked: hack/check-deps.sh.
packages=$("${ROOT}/hack/check-deps.sh" --packages "${PROFILE}" | tr '\n' ' ')
if [[ -n "${packages}" ]]; then
  echo "Installing system packages: ${packages}"
  sudo_() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }
  # policy-rc.d keeps packages (docker.io) from starting a daemon with their
  # stock configuration (docker0, iptables rules).
  policy=/usr/sbin/policy-rc.d
  created=false
  if [[ ! -e "${policy}" ]]; then
    printf '#!/bin/sh\nexit 101\n' | sudo_ tee "${policy}" >/dev/null
    sudo_ chmod 755 "${policy}"
    created=true
  fi
  status=0
  {
    sudo_ env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
      # shellcheck disable=SC2086
      sudo_ env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ${packages} >/dev/null
  } || status=$?
  if [[ "${created}" == true ]]; then sudo_ rm -f "${policy}"; fi
  if [[ ${status} -ne 0 ]]; then
    echo "install-deps: apt-get failed (exit ${status}); what is still missing:" >&2
  fi
  if [[ " ${packages} " == *" docker.io "* ]] && command -v systemctl >/dev/null && systemctl is-system-running >/dev/null 2>&1; then
    # Under systemd the package enables the stock units: ours runs instead.
    sudo_ systemctl disable --now docker.service docker.socket >/dev/null 2>&1 || true
  fi
fi
exec "${ROOT}/hack/check-deps.sh" "${PROFILE}"
