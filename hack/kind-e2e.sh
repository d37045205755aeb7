#!/usr/bin/env bash
# The kind path, for a machine with Docker, kind and kubectl: creates a
# clusterset of kind clusters with a flat network, swaps kube-proxy for this
# project's build with the MultiClusterServices gate on, installs the CRDs,
# ClusterProperties, CoreDNS with clusterset.local and the mcs-controller
# (hub mode, in the first cluster), then runs a kubectl smoke test (a
# Service exported from every cluster is reached from the last one by
# clusterset IP and clusterset.local name) and the end-to-end suite of
# test/e2e against the clusters (MCS_E2E_PROVIDER=kind). Everything it
# uses is in kind-config/.
#
# Usage: hack/kind-e2e.sh [--clusters N] [--keep] [--skip-tests]
#   --clusters N   2 (default) or 3
#   --keep         leave the clusters running afterwards
#   --skip-tests   set the clusterset up and stop
#
# The suite runs with cluster a = mcs-b (exporter; the outage case stops its
# kube-apiserver) and cluster b = mcs-a (importer; it runs the controller and
# holds its leader election Lease, which must outlive a's outage).
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"
CLUSTERS=2
KEEP=false
TESTS=true
while [[ $# -gt 0 ]]; do
  case "$1" in
    --clusters) CLUSTERS=$2; shift 2 ;;
    --keep) KEEP=true; shift ;;
    --skip-tests) TESTS=false; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
if [[ "${CLUSTERS}" != 2 && "${CLUSTERS}" != 3 ]]; then
  echo "--clusters must be 2 or 3" >&2
  exit 2
fi
for tool in docker kind kubectl go; do
  if ! command -v "${tool}" >/dev/null; then
    echo "hack/kind-e2e.sh needs ${tool}; without Docker use 'make demo' and 'make test' (the local clusterset)" >&2
    exit 1
  fi
done

NAMES=(mcs-a mcs-b mcs-c)
NAMES=("${NAMES[@]:0:${CLUSTERS}}")
WORK=_output/kind
mkdir -p "${WORK}"
step() { echo "==> $*"; }
ctx() { echo "kind-$1"; }

cleanup() {
  if [[ "${KEEP}" == false ]]; then
    for name in "${NAMES[@]}"; do kind delete cluster --name "${name}" >/dev/null 2>&1 || true; done
  fi
}
trap cleanup EXIT

step "Building images"
docker build -f kind-config/Dockerfile --target kube-proxy -t mcs-kube-proxy:dev .
docker build -f kind-config/Dockerfile --target mcs-controller -t mcs-controller:dev .
docker build -f kind-config/Dockerfile --target echoserver -t mcs-kube-proxy/echoserver:dev .
# The gate-off case runs upstream kube-proxy next to ours: the pinned base.
UPSTREAM_KUBE_PROXY=$(sed -n 's/^ARG KUBE_PROXY_BASE=//p' kind-config/Dockerfile)
docker image inspect "${UPSTREAM_KUBE_PROXY}" >/dev/null 2>&1 || docker pull "${UPSTREAM_KUBE_PROXY}"

for name in "${NAMES[@]}"; do
  step "Creating cluster ${name}"
  kind create cluster --config "kind-config/clusters/cluster-${name#mcs-}.yaml" --wait 120s
  kind load docker-image mcs-kube-proxy:dev mcs-controller:dev mcs-kube-proxy/echoserver:dev "${UPSTREAM_KUBE_PROXY}" --name "${name}"
done

step "Flat pod network between clusters"
# Every node routes every other cluster's node pod CIDRs to that node, as
# a flat-network clusterset does; kind's own CNI handles its cluster.
declare -A NODE_IP NODE_CIDR
for name in "${NAMES[@]}"; do
  for node in $(kind get nodes --name "${name}"); do
    NODE_IP[${node}]=$(docker inspect -f '{{.NetworkSettings.Networks.kind.IPAddress}}' "${node}")
    NODE_CIDR[${node}]=$(kubectl --context "$(ctx "${name}")" get node "${node}" -o jsonpath='{.spec.podCIDR}')
  done
done
for name in "${NAMES[@]}"; do
  for node in $(kind get nodes --name "${name}"); do
    for other in "${!NODE_IP[@]}"; do
      [[ "${other}" == "${name}"-* ]] && continue
      docker exec "${node}" ip route replace "${NODE_CIDR[${other}]}" via "${NODE_IP[${other}]}"
    done
  done
done

step "CRDs, ClusterProperties, kube-proxy, CoreDNS and RBAC in every member"
go mod download sigs.k8s.io/mcs-api
MCS_CRDS=$(go list -m -f '{{.Dir}}' sigs.k8s.io/mcs-api)/config/crd
fill() { sed -e "s|\${CLUSTER}|$1|g" -e "s|\${POD_SUBNET}|$2|g" -e "s|\${KUBECONFIG_B64}|${3:-}|g" "$4"; }
for name in "${NAMES[@]}"; do
  c=$(ctx "${name}")
  pod_subnet=$(grep podSubnet "kind-config/clusters/cluster-${name#mcs-}.yaml" | awk '{print $2}')
  kubectl --context "${c}" apply --server-side -f "${MCS_CRDS}/multicluster.x-k8s.io_serviceexports.yaml" -f "${MCS_CRDS}/multicluster.x-k8s.io_serviceimports.yaml" \
    -f staging/src/k8s.io/multiclusterservices/crds/clusterproperty.yaml
  kubectl --context "${c}" wait --for condition=Established crd --all --timeout 60s
  fill "${name}" "${pod_subnet}" "" kind-config/clusterproperty.yaml | kubectl --context "${c}" apply --server-side -f -
  kubectl --context "${c}" apply --server-side -f kind-config/kube-proxy-rbac.yaml -f kind-config/mcs-controller-rbac.yaml -f kind-config/mcs-admission-policy.yaml -f kind-config/coredns.yaml
  fill "${name}" "${pod_subnet}" "" kind-config/kube-proxy.yaml | kubectl --context "${c}" apply --server-side --force-conflicts -f -
  kubectl --context "${c}" apply --server-side --force-conflicts -f kind-config/kube-proxy-daemonset.yaml
  kubectl --context "${c}" -n kube-system set image deployment/coredns coredns=coredns/coredns:1.15.0
  kubectl --context "${c}" -n kube-system rollout status daemonset/kube-proxy --timeout 120s
  kubectl --context "${c}" -n kube-system rollout status deployment/coredns --timeout 120s
  # The controller's identity in this member: a ServiceAccount bound to
  # kind-config/mcs-controller-rbac.yaml, nothing more.
  kubectl --context "${c}" create namespace mcs-system --dry-run=client -o yaml | kubectl --context "${c}" apply -f -
  kubectl --context "${c}" -n mcs-system create serviceaccount mcs-controller --dry-run=client -o yaml | kubectl --context "${c}" apply -f -
done

step "mcs-controller (hub mode) in ${NAMES[0]}"
KUBECONFIG_FILE="${WORK}/mcs-controller.kubeconfig"
rm -f "${KUBECONFIG_FILE}"
for name in "${NAMES[@]}"; do
  c=$(ctx "${name}")
  server="https://${name}-control-plane:6443"
  ca=$(kubectl --context "${c}" config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
  token=$(kubectl --context "${c}" -n mcs-system create token mcs-controller --duration 24h)
  echo "${ca}" | base64 -d >"${WORK}/${name}-ca.crt"
  kubectl --kubeconfig "${KUBECONFIG_FILE}" config set-cluster "${name}" --server "${server}" --certificate-authority "${WORK}/${name}-ca.crt" --embed-certs >/dev/null
  kubectl --kubeconfig "${KUBECONFIG_FILE}" config set-credentials "${name}" --token "${token}" >/dev/null
  kubectl --kubeconfig "${KUBECONFIG_FILE}" config set-context "${name}" --cluster "${name}" --user "${name}" >/dev/null
done
kubectl --context "$(ctx "${NAMES[0]}")" apply --server-side -f kind-config/mcs-controller-deployment.yaml
fill "${NAMES[0]}" "" "$(base64 -w0 "${KUBECONFIG_FILE}")" kind-config/mcs-controller.yaml | kubectl --context "$(ctx "${NAMES[0]}")" apply --server-side -f -
kubectl --context "$(ctx "${NAMES[0]}")" -n mcs-system rollout status deployment/mcs-controller --timeout 120s

if [[ "${TESTS}" == true ]]; then
  # First the quick check across every cluster, with stock images only...
  step "Smoke test: export from every cluster, requests from ${NAMES[-1]}"
  AGNHOST=registry.k8s.io/e2e-test-images/agnhost:2.53
  for name in "${NAMES[@]}"; do
    c=$(ctx "${name}")
    kubectl --context "${c}" create namespace demo --dry-run=client -o yaml | kubectl --context "${c}" apply -f -
    kubectl --context "${c}" -n demo create deployment web --image "${AGNHOST}" --replicas 2 -- /agnhost netexec --http-port=8080
    kubectl --context "${c}" -n demo expose deployment web --port 80 --target-port 8080
    kubectl --context "${c}" -n demo rollout status deployment/web --timeout 120s
    printf 'apiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceExport\nmetadata: {name: web, namespace: demo}\n' | kubectl --context "${c}" apply -f -
  done
  client=$(ctx "${NAMES[-1]}")
  for _ in $(seq 60); do
    vip=$(kubectl --context "${client}" -n demo get serviceimport web -o jsonpath='{.spec.ips[0]}' 2>/dev/null || true)
    [[ -n "${vip}" ]] && break
    sleep 2
  done
  if [[ -z "${vip:-}" ]]; then
    echo "no ServiceImport demo/web with a clusterset IP in ${NAMES[-1]}" >&2
    exit 1
  fi
  answers=$(kubectl --context "${client}" -n demo run client --rm -i --restart Never --image "${AGNHOST}" --command -- \
    sh -c "for i in \$(seq 40); do wget -qO- -T 2 http://${vip}/hostname; echo; wget -qO- -T 2 http://web.demo.svc.clusterset.local/hostname; echo; done")
  echo "${answers}" | sort | uniq -c
  for name in "${NAMES[@]}"; do
    answered=false
    for pod in $(kubectl --context "$(ctx "${name}")" -n demo get pods -l app=web -o jsonpath='{.items[*].metadata.name}'); do
      grep -qxF "${pod}" <<<"${answers}" && answered=true
    done
    if [[ "${answered}" == false ]]; then
      echo "no answer from any pod of ${name}" >&2
      exit 1
    fi
  done
  echo "every cluster's pods answered through the clusterset IP ${vip} and web.demo.svc.clusterset.local"

  # ...then the same end-to-end suite CI runs on the local clusterset.
  step "End-to-end suite (test/e2e) against kind-mcs-b (a) and kind-mcs-a (b)"
  MCS_E2E_PROVIDER=kind MCS_E2E_CONTEXTS=kind-mcs-b,kind-mcs-a \
    go test ./test/e2e/ -run 'TestMultiClusterServices$' -count=1 -timeout 60m -v
fi
