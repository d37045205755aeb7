#!/usr/bin/env bash
# Installs the system packages the project's binaries and tests use, with
# apt-get, when any is missing: nftables and iptables (kube-proxy's
# backends), iproute2 and util-linux (network namespaces and veth pairs),
# conntrack (kube-proxy clears stale UDP flows with it), and the tools of a
# debug image that `kubectl exec` into a local clusterset's pod runs (curl,
# dig, nc: the fake kubelet runs exec'd commands from the host).
set -o errexit -o nounset -o pipefail

declare -A PACKAGE_OF=(
  [nft]=nftables
  [iptables]=iptables
  [ip6tables]=iptables
  [ip]=iproute2
  [conntrack]=conntrack
  [unshare]=util-linux
  [nsenter]=util-linux
  [curl]=curl
  [dig]=bind9-dnsutils
  [nc]=netcat-openbsd
)

missing=()
for tool in "${!PACKAGE_OF[@]}"; do
  if ! command -v "${tool}" >/dev/null 2>&1 && ! [[ -x "/usr/sbin/${tool}" || -x "/sbin/${tool}" ]]; then
    missing+=("${PACKAGE_OF[${tool}]}")
  fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi
packages=$(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')
echo "Installing system packages: ${packages}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
${SUDO} apt-get update -qq
# shellcheck disable=SC2086
${SUDO} apt-get install -y -qq --no-install-recommends ${packages} >/dev/null
