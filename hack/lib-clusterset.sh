# shellcheck shell=bash
# Sourced by the clusterset scripts: makes sure the binaries they run exist.

# CLUSTERSET_BINARIES are this module's binaries a local clusterset runs
# and kubectl-mcs, to look at it, and the credential plugin of
# --inventory-hub (the tests also build kube-proxy-upstream,
# which it does not need).
CLUSTERSET_BINARIES=(kube-proxy kube-apiserver kube-controller-manager kubectl mcs-controller kubectl-mcs clusterset echoserver credential-plugin)

# ensure_binaries builds etcd and CoreDNS when missing (hack/build-tools.sh
# keeps them) and CLUSTERSET_BINARIES, side by side (hack/build-all.sh);
# a warm build cache makes it quick when they are up to date.
ensure_binaries() {
  hack/build-all.sh "${CLUSTERSET_BINARIES[@]}"
}
