#!/usr/bin/env bash
# Brings up a local clusterset in the foreground and keeps it until Ctrl-C,
# then stops every process and removes everything it made. No Docker: real
# etcd, kube-apiservers and kube-controller-managers on this machine, a fake
# kubelet per node running pods as processes in network namespaces, this
# project's kube-proxy (nftables) and CoreDNS per cluster (test/clusterset).
#
# Usage: hack/local-up-clusterset.sh [--clusters=2] [--nodes=1]
#          [--proxy-mode=nftables|iptables] [--dir=_output/clusterset]
#          [--prefix=cset] [--ip-family=ipv4|ipv6|dual] [--kube-proxy-arg=--v=4 ...]
#          [--inventory-hub=cluster-a]  (members as ClusterProfiles; prints the controller command)
#          [--with-demo]  (also the demo's Service demo/web, exported from the first two
#                          clusters, a client pod and the mcs-controller: the README's tour)
# Needs root. Builds what is missing first (once: several minutes).
# After a crash: hack/local-down-clusterset.sh.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"
source hack/lib-clusterset.sh
ensure_binaries
exec _output/bin/clusterset up "$@"
