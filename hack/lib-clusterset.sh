# shellcheck shell=bash
# Sourced by the clusterset scripts: makes sure the binaries they run exist.

# ensure_binaries builds etcd and CoreDNS when missing (hack/build-tools.sh
# keeps them) and this module's binaries (kube-apiserver,
# kube-controller-manager, kubectl, kube-proxy, the clusterset command...),
# which a warm build cache makes quick when they are up to date.
ensure_binaries() {
  hack/build-tools.sh
  hack/build.sh
}
