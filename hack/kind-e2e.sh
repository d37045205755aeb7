#!/usr/bin/env bash
# The kind path, run on this machine with nothing pulled and no packet
# leaving it: starts Docker if none answers (hack/kind-docker.sh), builds
# every image here (hack/kind-images.sh), creates a clusterset of
# single-node kind clusters with a flat network, swaps kube-proxy for this
# project's build with the MultiClusterServices gate on, installs the
# CRDs, ClusterProperties, admission policies, CoreDNS with
# clusterset.local (and no forwarding beyond the clusters) and the
# mcs-controller (hub mode, in the first cluster), then runs a smoke test
# (a Service exported from every cluster reached from the last one by
# clusterset IP and clusterset.local name) and the end-to-end suite of
# test/e2e against the clusters (MCS_E2E_PROVIDER=kind), with the kind-only
# tests (test/e2e/kind*_test.go). Everything it applies is in kind-config/.
#
# Usage: hack/kind-e2e.sh [--clusters N] [--keep] [--skip-tests] [--clean-images] [--no-build]
#        hack/kind-e2e.sh --down [--clusters N] [--clean-images]
#   --clusters N      2 (default) or 3
#   --down            only the clean-up (after --keep)
#   --no-build        image the binaries of _output/bin as they are
#   --keep            leave the clusters (and Docker) running afterwards
#   --skip-tests      set the clusterset up and stop
#   --clean-images    also remove every image built (the next run is cold)
#
# Clean-up leaves nothing of the run: the clusters, the host rule and kind
# network, the host sysctls kubelet and kind changed (restored), the
# /lib/modules Docker created, dockerd if this run started it.
#
# The suite runs with cluster a = mcs-b (exporter; the outage case stops its
# kube-apiserver) and cluster b = mcs-a (importer; it runs the controller and
# holds its leader election Lease, which must outlive a's outage).
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"
# The suite compiles with the build's flags, reusing its packages.
source hack/lib-build.sh
CLUSTERS=2
KEEP=false
TESTS=true
CLEAN_IMAGES=false
IMAGES_ARGS=()
DOWN=false
while [[ $# -gt 0 ]]; do
  case "$1" in
    --clusters) CLUSTERS=$2; shift 2 ;;
    --keep) KEEP=true; shift ;;
    --down) DOWN=true; shift ;;
    --skip-tests) TESTS=false; shift ;;
    --clean-images) CLEAN_IMAGES=true; shift ;;
    --no-build) IMAGES_ARGS=(--no-build); shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
if [[ "${CLUSTERS}" != 2 && "${CLUSTERS}" != 3 ]]; then
  echo "--clusters must be 2 or 3" >&2
  exit 2
fi

NAMES=(mcs-a mcs-b mcs-c)
NAMES=("${NAMES[@]:0:${CLUSTERS}}")
WORK=_output/kind
mkdir -p "${WORK}"
# kind, kubectl and the node image of this tree's builds.
export PATH="${ROOT}/${WORK}/bin:${ROOT}/_output/bin:${PATH}"
# kind's own network would masquerade and forward to the world; ours
# (hack/kind-docker.sh) does neither and is watched by the host rule.
export KIND_EXPERIMENTAL_DOCKER_NETWORK=mcs-kind
K8S_VERSION=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
NODE_IMAGE=${MCS_KIND_NODE_IMAGE:-mcs-kind/node:${K8S_VERSION}}
PROJECT_IMAGES=(mcs-kube-proxy:dev mcs-controller:dev mcs-kube-proxy/echoserver:dev)
step() { echo "==> $* ($(date +%T))"; }
ctx() { echo "kind-$1"; }
kc() { local c=$1; shift; kubectl --context "$(ctx "${c}")" "$@"; }

# Host state kind and the kubelets change, to put back: recorded before
# the first cluster of a run (or of an earlier --keep run, whose kubelets
# have changed it already) and restored at clean-up.
SYSCTLS=(fs.inotify.max_user_instances vm.overcommit_memory kernel.panic kernel.panic_on_oops)
HOST_STATE=/run/mcs-kind-host.state
if [[ ! -f "${HOST_STATE}" ]]; then
  {
    for s in "${SYSCTLS[@]}"; do echo "${s}=$(sysctl -n "${s}")"; done
    [[ -e /lib/modules ]] && echo "lib-modules=existed" || echo "lib-modules=absent"
  } >"${HOST_STATE}"
fi
restore_host() {
  local line
  while IFS= read -r line; do
    case "${line}" in
      lib-modules=absent) rmdir /lib/modules 2>/dev/null || true ;;
      lib-modules=*) ;;
      *) sysctl -qw "${line}" || true ;;
    esac
  done <"${HOST_STATE}"
  rm -f "${HOST_STATE}"
}

cleanup() {
  local status=$?
  if [[ "${KEEP}" == true ]]; then
    echo "kept: clusters ${NAMES[*]}; remove them and the rest with: hack/kind-e2e.sh --down --clusters ${CLUSTERS}"
    exit "${status}"
  fi
  step "Clean-up"
  for name in "${NAMES[@]}"; do kind delete cluster --name "${name}" >/dev/null 2>&1 || true; done
  restore_host
  if [[ "${CLEAN_IMAGES}" == true ]]; then
    hack/kind-images.sh --remove >/dev/null 2>&1 || true
    hack/kind-docker.sh down --clean-images
  else
    hack/kind-docker.sh down
  fi
  exit "${status}"
}
trap cleanup EXIT
if [[ "${DOWN}" == true ]]; then
  KEEP=false
  exit 0
fi

step "Docker"
hack/kind-docker.sh up
step "Images"
start=${SECONDS}
hack/kind-images.sh "${IMAGES_ARGS[@]}" 2>&1 | grep -v -e 'DEPRECATED: The legacy builder' -e 'Install the buildx component' -e 'docs.docker.com/go/buildx' -e '^ *$'
echo "images: $((SECONDS - start))s"

# kind's nodes watch many files (kind asks for 512 inotify instances).
if [[ "$(sysctl -n fs.inotify.max_user_instances)" -lt 512 ]]; then
  sysctl -qw fs.inotify.max_user_instances=512
fi
for name in "${NAMES[@]}"; do
  step "Creating cluster ${name}"
  kind delete cluster --name "${name}" >/dev/null 2>&1 || true
  start=${SECONDS}
  kind create cluster --config "kind-config/clusters/cluster-${name#mcs-}.yaml" --image "${NODE_IMAGE}" --wait 120s
  echo "cluster ${name} Ready in $((SECONDS - start))s"
  kind load docker-image "${PROJECT_IMAGES[@]}" --name "${name}"
done

step "Flat pod network: every node routes every other node's podCIDR"
# The nodes' pod network is containerd's (kind-config/node): each node
# knows its own podCIDR only. Every node routes every other node's, in its
# cluster and the others, to that node, as a flat-network clusterset does.
declare -A NODE_IP NODE_CIDR
for name in "${NAMES[@]}"; do
  for node in $(kind get nodes --name "${name}"); do
    NODE_IP[${node}]=$(docker inspect -f "{{(index .NetworkSettings.Networks \"${KIND_EXPERIMENTAL_DOCKER_NETWORK}\").IPAddress}}" "${node}")
    NODE_CIDR[${node}]=$(kc "${name}" get node "${node}" -o jsonpath='{.spec.podCIDR}')
  done
done
for node in "${!NODE_IP[@]}"; do
  for other in "${!NODE_IP[@]}"; do
    [[ "${other}" == "${node}" ]] && continue
    docker exec "${node}" ip route replace "${NODE_CIDR[${other}]}" via "${NODE_IP[${other}]}"
  done
done

step "CRDs, ClusterProperties, kube-proxy, CoreDNS and RBAC in every member"
go mod download sigs.k8s.io/mcs-api
MCS_CRDS=$(go list -m -f '{{.Dir}}' sigs.k8s.io/mcs-api)/config/crd
fill() { sed -e "s|\${CLUSTER}|$1|g" -e "s|\${POD_SUBNET}|$2|g" -e "s|\${KUBECONFIG_B64}|${3:-}|g" "$4"; }
# The clusters answer for cluster.local and clusterset.local and forward
# nothing: no query leaves the machine (kind-config/coredns.yaml is the
# package users install, with kubeadm's forward to the node's resolvers).
coredns_offline() { sed -e '/^ *forward \. \/etc\/resolv.conf {$/,/^ *}$/d' kind-config/coredns.yaml; }
if coredns_offline | grep -q forward; then
  echo "kind-config/coredns.yaml: its forward block changed shape; the clusters would forward DNS beyond the machine" >&2
  exit 1
fi
COREDNS_IMAGE=$(grep /coredns: "${WORK}/node-images.list" | sort | tail -1)
for name in "${NAMES[@]}"; do
  pod_subnet=$(grep podSubnet "kind-config/clusters/cluster-${name#mcs-}.yaml" | awk '{print $2}')
  kc "${name}" apply --server-side -f "${MCS_CRDS}/multicluster.x-k8s.io_serviceexports.yaml" -f "${MCS_CRDS}/multicluster.x-k8s.io_serviceimports.yaml" \
    -f staging/src/k8s.io/multiclusterservices/crds/clusterproperty.yaml
  kc "${name}" wait --for condition=Established crd --all --timeout 60s
  fill "${name}" "${pod_subnet}" "" kind-config/clusterproperty.yaml | kc "${name}" apply --server-side -f -
  kc "${name}" apply --server-side -f kind-config/kube-proxy-rbac.yaml -f kind-config/mcs-controller-rbac.yaml -f kind-config/mcs-admission-policy.yaml
  # kubeadm owns kube-proxy's ConfigMap and DaemonSet and CoreDNS's
  # Corefile: ours take them over.
  coredns_offline | kc "${name}" apply --server-side --force-conflicts -f -
  fill "${name}" "${pod_subnet}" "" kind-config/kube-proxy.yaml | kc "${name}" apply --server-side --force-conflicts -f -
  kc "${name}" apply --server-side --force-conflicts -f kind-config/kube-proxy-daemonset.yaml
  kc "${name}" -n kube-system set image deployment/coredns "coredns=${COREDNS_IMAGE}"
  kc "${name}" -n kube-system rollout status daemonset/kube-proxy --timeout 120s
  kc "${name}" -n kube-system rollout status deployment/coredns --timeout 120s
  # The controller's identity in this member: a ServiceAccount bound to
  # kind-config/mcs-controller-rbac.yaml, nothing more.
  kc "${name}" create namespace mcs-system --dry-run=client -o yaml | kc "${name}" apply -f -
  kc "${name}" -n mcs-system create serviceaccount mcs-controller --dry-run=client -o yaml | kc "${name}" apply -f -
done

step "mcs-controller (hub mode) in ${NAMES[0]}"
KUBECONFIG_FILE="${WORK}/mcs-controller.kubeconfig"
rm -f "${KUBECONFIG_FILE}"
for name in "${NAMES[@]}"; do
  # By address: the controller's pods resolve names with the clusters'
  # CoreDNS, which knows no Docker container.
  server="https://${NODE_IP[${name}-control-plane]}:6443"
  ca=$(kc "${name}" config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
  token=$(kc "${name}" -n mcs-system create token mcs-controller --duration 24h)
  echo "${ca}" | base64 -d >"${WORK}/${name}-ca.crt"
  kubectl --kubeconfig "${KUBECONFIG_FILE}" config set-cluster "${name}" --server "${server}" --certificate-authority "${WORK}/${name}-ca.crt" --embed-certs >/dev/null
  kubectl --kubeconfig "${KUBECONFIG_FILE}" config set-credentials "${name}" --token "${token}" >/dev/null
  kubectl --kubeconfig "${KUBECONFIG_FILE}" config set-context "${name}" --cluster "${name}" --user "${name}" >/dev/null
done
kc "${NAMES[0]}" apply --server-side -f kind-config/mcs-controller-deployment.yaml
fill "${NAMES[0]}" "" "$(base64 -w0 "${KUBECONFIG_FILE}")" kind-config/mcs-controller.yaml | kc "${NAMES[0]}" apply --server-side -f -
# The leader is ready once it has synced every member. Whether the whole
# Deployment becomes Available (the standby too) is a test of its own
# (TestKindControllerDeploymentAvailable), not a gate for the suite.
kc "${NAMES[0]}" -n mcs-system wait deployment/mcs-controller --for=jsonpath='{.status.readyReplicas}'=1 --timeout 180s

if [[ "${TESTS}" == true ]]; then
  step "Smoke test: export from every cluster, requests from ${NAMES[-1]}"
  ECHO=mcs-kube-proxy/echoserver:dev
  for name in "${NAMES[@]}"; do
    kc "${name}" create namespace demo --dry-run=client -o yaml | kc "${name}" apply -f -
    kc "${name}" -n demo create deployment web --image "${ECHO}" --replicas 2 --dry-run=client -o yaml | kc "${name}" apply -f -
    kc "${name}" -n demo expose deployment web --port 80 --target-port 8080 --dry-run=client -o yaml | kc "${name}" apply -f -
    kc "${name}" -n demo rollout status deployment/web --timeout 120s
    printf 'apiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceExport\nmetadata: {name: web, namespace: demo}\n' | kc "${name}" apply -f -
  done
  client=${NAMES[-1]}
  kc "${client}" -n demo run client --image "${ECHO}" --restart Never --dry-run=client -o yaml | kc "${client}" apply -f -
  kc "${client}" -n demo wait pod/client --for condition=Ready --timeout 120s
  vip=""
  for _ in $(seq 60); do
    vip=$(kc "${client}" -n demo get serviceimport web -o jsonpath='{.spec.ips[0]}' 2>/dev/null || true)
    [[ -n "${vip}" ]] && break
    sleep 2
  done
  if [[ -z "${vip}" ]]; then
    echo "no ServiceImport demo/web with a clusterset IP in ${client}" >&2
    exit 1
  fi
  answers=$( (kc "${client}" -n demo exec client -- /echoserver ask --count 40 "${vip}:80"
    kc "${client}" -n demo exec client -- /echoserver ask --count 40 web.demo.svc.clusterset.local:80) )
  sort <<<"${answers}" | uniq -c
  for name in "${NAMES[@]}"; do
    answered=false
    for pod in $(kc "${name}" -n demo get pods -l app=web -o jsonpath='{.items[*].metadata.name}'); do
      grep -qxF "${pod}" <<<"${answers}" && answered=true
    done
    if [[ "${answered}" == false ]]; then
      echo "no answer from any pod of ${name}" >&2
      exit 1
    fi
  done
  echo "every cluster's pods answered through the clusterset IP ${vip} and web.demo.svc.clusterset.local"
  for name in "${NAMES[@]}"; do kc "${name}" delete namespace demo --wait=false >/dev/null; done

  step "End-to-end suite (test/e2e) against kind-mcs-b (a) and kind-mcs-a (b), and the kind-only tests"
  start=${SECONDS}
  MCS_E2E_PROVIDER=kind MCS_E2E_CONTEXTS=kind-mcs-b,kind-mcs-a \
    go test ./test/e2e/ -run 'TestMultiClusterServices$|^TestKindCluster' -count=1 -timeout 60m -v
  echo "suite on kind: $((SECONDS - start))s"
fi
