#!/usr/bin/env bash
# Builds and tests kube-proxy of every Kubernetes release under minors/
# (or of those named: hack/test-minors.sh 1.35 1.36), one after the other:
#
#   1. kube-proxy and upstream's kube-proxy of the release
#      (KUBERNETES_VERSION=1.MINOR hack/build.sh, into _output/v1.MINOR/bin);
#   2. in the release's module, with its tag: the seam tests
#      (TestLinkedSignatures, TestUpstreamSeam, upstream's flags), the
#      proxier's unit tests and the data-plane suite (real nftables and
#      iptables in network namespaces), compiled against that release's
#      pkg/proxy;
#   3. its binaries against the pinned release's control plane (an older
#      kube-proxy against a newer apiserver is within the version skew
#      policy): the gate-off comparison with that release's upstream
#      kube-proxy, rule for rule, the ServiceImport CRD followed at run
#      time, and the local clusterset carrying clusterset traffic.
#
# The pinned release (go.mod) is tested by `make test` itself.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"
source hack/lib-build.sh

GO_TEST_FLAGS=${GO_TEST_FLAGS:--timeout 40m}
repo=github.com/mcs-kube-proxy/mcs-kube-proxy

minors=("$@")
if [[ ${#minors[@]} -eq 0 ]]; then
  for d in minors/v1.*/; do
    d=${d%/}
    minors+=("${d#minors/v}")
  done
fi

for m in "${minors[@]}"; do
  m=${m#v}
  dir=minors/v${m}
  [[ -f "${dir}/go.mod" ]] || { echo "no ${dir}: hack/kube-minor.sh adds a release" >&2; exit 2; }
  # A preview (v1.38-preview) is its minor's build tag and binaries.
  tag=${m%-preview}
  (
  minor_toolchain "${dir}"
  version=$(cd "${dir}" && go list -m -f '{{.Replace.Version}}' k8s.io/kubernetes)
  echo "==> kube-proxy ${version}"
  start=${SECONDS}
  KUBERNETES_VERSION=${tag} hack/build.sh
  # shellcheck disable=SC2086 # GO_TEST_FLAGS is a list of flags
  # Stamped with the release, as its binaries are: the seam test reads
  # the source of the release it was built with.
  (cd "${dir}" && GOFLAGS="${GOFLAGS} -tags=kube${tag}" go test ${GO_TEST_FLAGS} -ldflags "$(kube_ldflags "${version}")" \
    "${repo}/pkg/kubeproxy" "${repo}/pkg/proxy/multicluster" k8s.io/multiclusterservices/proxy)
  # shellcheck disable=SC2086
  # The control plane's tests are this module's, on this module's Go.
  MCS_KUBE_PROXY_DIR="${ROOT}/_output/v${m}/bin" env -u GOTOOLCHAIN go test ${GO_TEST_FLAGS} \
    -run '^(TestGateOffMatchesUpstream|TestKubeProxyFollowsTheServiceImportCRD|TestClusterSet)$' ./test/integration
  echo "==> kube-proxy ${version}: built and tested in $((SECONDS - start))s"
  )
done
