#!/usr/bin/env bash
# The kind path, run on this machine with nothing pulled and no packet
# leaving it: starts Docker if none answers (hack/kind-docker.sh), builds
# every image here (hack/kind-images.sh), creates a clusterset of
# single-node kind clusters with a flat network, swaps kube-proxy for this
# project's build with the MultiClusterServices gate on (in mcs-b, the
# build of an older Kubernetes release, 1.36), installs the
# CRDs, ClusterProperties, admission policies, CoreDNS with
# clusterset.local (and no forwarding beyond the clusters) and the
# mcs-controller (hub mode, in the first cluster), then runs a smoke test
# (a Service exported from every cluster reached from the last one by
# clusterset IP and clusterset.local name) and the end-to-end suite of
# test/e2e against the clusters (MCS_E2E_PROVIDER=kind), with the kind-only
# tests (test/e2e/kind*_test.go) and the dual-stack cases (mcs-a and mcs-b
# are dual-stack, IPv4 first). Then it adds a third cluster, mcs-c, that
# keeps kubeadm's kube-proxy DaemonSet with the stock upstream image (built
# here from the pinned k8s.io/kubernetes), which joins the running
# controller by a member Secret (the controller names it in
# --derived-members from the start), and runs the derived-mode suite
# (TestDerivedMember) through the same provider. Then, mcs-c gone, it
# switches mcs-a and mcs-b to pull mode (push mode's controller deleted,
# the hub's part and the planner in mcs-a, an agent in each with a token
# of its hub identity) and runs the KEP suite and the dual-stack cases
# again in pull mode (TestMultiClusterServicesPullMode,
# TestDualStackPullMode; --pull-only on kept clusters with mcs-c runs the
# derived cases too, TestDerivedMemberPullMode, mcs-c's agent with
# --derived). Last, with the
# clusterset's clusters gone, Kubernetes' own sig-network specs of the
# pinned release (test/upstream; the Conformance-tagged ones by default)
# run against mcs-upstream, a two-node cluster with this project's
# kube-proxy (gate on) and packages. Everything it applies is in
# kind-config/ (and the hub's inventory RBAC, deploy/mcs-controller/).
#
# Usage: hack/kind-e2e.sh [--clusters N] [--keep] [--skip-tests] [--clean-images] [--no-build] [--run REGEX] [--upstream SET]
#        hack/kind-e2e.sh --derived-only [--keep] [--no-build]
#        hack/kind-e2e.sh --pull-only [--keep] [--no-build] [--run REGEX]
#        hack/kind-e2e.sh --upstream-only SET [--keep] [--no-build]
#        hack/kind-e2e.sh --rollout-only [--keep] [--no-build]
#        hack/kind-e2e.sh --chart-only [--keep] [--no-build]
#        hack/kind-e2e.sh --down [--clean-images]
#   --clusters N      2 (default): mcs-a and mcs-b, mcs-c only for the
#                     derived suite; 3: mcs-c (derived) from the start
#   --down            only the clean-up (after --keep)
#   --no-build        image the binaries of _output/bin as they are
#   --keep            leave the clusters (and Docker) running afterwards
#   --skip-tests      set the clusterset up and stop
#   --run REGEX       run only the suites' tests matching REGEX (go test -run)
#   --derived-only    on the clusters a --keep run left: add mcs-c and run
#                     the derived suite only
#   --pull-only       on the clusters a --keep run left: switch them to
#                     pull mode and run the pull-mode suites only (the
#                     derived one too where mcs-c is there)
#   --clean-images    also remove every image built (the next run is cold)
#   --upstream SET    which of Kubernetes' sig-network specs run last:
#                     conformance (default: the [Conformance] ones),
#                     all (also every [sig-network] Services spec), none.
#                     Skipped everywhere: [Slow], [Serial], [Disruptive],
#                     [Flaky], LoadBalancer and [Feature:...] specs
#   --upstream-only SET
#                     only mcs-upstream and those specs, run twice: with
#                     this project's kube-proxy (gate on), then with
#                     kubeadm's stock kube-proxy of the pinned release,
#                     each run's summary printed (make upstream-e2e)
#   --rollout-only    only a rollout of kube-proxy under traffic, measured
#                     (make rollout; docs/install.md): on mcs-upstream with
#                     kubeadm's stock kube-proxy and this project's packages,
#                     a client per node counting requests to a ClusterIP
#                     and a clusterset IP on new and held connections,
#                     through stock -> ours (gate off) -> gate on -> gate
#                     off -> stock, then stock restarted (upstream's own
#                     rollout, the reference), and the controller downgraded
#                     to its previous release and upgraded back
#   --chart-only      only the Helm chart's lifecycle on mcs-upstream (what
#                     the upstream stage ends with): installed, upgraded
#                     and back, uninstalled; its previous release upgraded
#                     to it by Helm 4
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
RUN=""
DERIVED_ONLY=false
PULL_ONLY=false
UPSTREAM_SET=conformance
UPSTREAM_ONLY=false
ROLLOUT_ONLY=false
CHART_ONLY=false
while [[ $# -gt 0 ]]; do
  case "$1" in
    --clusters) CLUSTERS=$2; shift 2 ;;
    --keep) KEEP=true; shift ;;
    --down) DOWN=true; shift ;;
    --skip-tests) TESTS=false; shift ;;
    --clean-images) CLEAN_IMAGES=true; shift ;;
    --no-build) IMAGES_ARGS=(--no-build); shift ;;
    --run) RUN=$2; shift 2 ;;
    --derived-only) DERIVED_ONLY=true; shift ;;
    --pull-only) PULL_ONLY=true; UPSTREAM_SET=none; shift ;;
    --upstream) UPSTREAM_SET=$2; shift 2 ;;
    --upstream-only) UPSTREAM_SET=$2; UPSTREAM_ONLY=true; shift 2 ;;
    --rollout-only) ROLLOUT_ONLY=true; UPSTREAM_SET=none; shift ;;
    --chart-only) CHART_ONLY=true; UPSTREAM_SET=none; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
case "${UPSTREAM_SET}" in
  conformance | all | none) ;;
  *) echo "--upstream must be conformance, all or none" >&2; exit 2 ;;
esac
if [[ "${CLUSTERS}" != 2 && "${CLUSTERS}" != 3 ]]; then
  echo "--clusters must be 2 or 3" >&2
  exit 2
fi

# mcs-a and mcs-b run this project's kube-proxy (native members); mcs-c
# keeps the stock one and is served in derived mode.
NAMES=(mcs-a mcs-b)
DERIVED=mcs-c
[[ "${CLUSTERS}" == 3 ]] && NAMES+=("${DERIVED}")
UPSTREAM_CLUSTER=mcs-upstream
ALL=(mcs-a mcs-b "${DERIVED}" "${UPSTREAM_CLUSTER}")
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
# mcs-b runs this project's kube-proxy of an older Kubernetes release (the
# first of MCS_KIND_KUBE_PROXY_RELEASES, 1.36 by default, which
# hack/kind-images.sh builds; empty: none) against the pinned release's
# control plane, as the version skew policy allows; mcs-a runs the pinned
# release's. The suites pass across the two.
read -r -a KUBE_PROXY_RELEASES <<<"${MCS_KIND_KUBE_PROXY_RELEASES-1.36}"
OLDER_MEMBER=mcs-b
OLDER_RELEASE=${KUBE_PROXY_RELEASES[0]:-}
older_image() { release_image "${OLDER_RELEASE}"; }
step() { echo "==> $* ($(date +%T))"; }
ctx() { echo "kind-$1"; }
kc() { local c=$1; shift; kubectl --context "$(ctx "${c}")" "$@"; }

# Host state kind and the kubelets change, to put back: recorded before
# the first cluster of a run (or of an earlier --keep run, whose kubelets
# have changed it already) and restored at clean-up.
SYSCTLS=(fs.inotify.max_user_instances fs.inotify.max_user_watches vm.overcommit_memory kernel.panic kernel.panic_on_oops)
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

# Clusters being created in the background (create_beside), NAME:PID.
CREATING=()
cleanup() {
  local status=$?
  local entry
  for entry in "${CREATING[@]}"; do
    pkill -TERM -P "${entry##*:}" 2>/dev/null || true
    kill "${entry##*:}" 2>/dev/null || true
    wait "${entry##*:}" 2>/dev/null || true
  done
  if [[ "${KEEP}" == true ]]; then
    echo "kept: clusters $(kind get clusters 2>/dev/null | tr '\n' ' '); remove them and the rest with: hack/kind-e2e.sh --down"
    exit "${status}"
  fi
  step "Clean-up"
  for name in "${ALL[@]}"; do kind delete cluster --name "${name}" >/dev/null 2>&1 || true; done
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
if [[ "${UPSTREAM_SET}" != none ]]; then
  IMAGES_ARGS+=(--upstream-e2e)
fi
if [[ "${UPSTREAM_SET}" != none || "${ROLLOUT_ONLY}" == true || "${CHART_ONLY}" == true ]]; then
  # mcs-upstream's packages are installed with the Helm chart, by Helm 3
  # and Helm 4.
  hack/build-tools.sh helm helm4
fi
hack/kind-images.sh "${IMAGES_ARGS[@]}" 2>&1 | grep -v -e 'DEPRECATED: The legacy builder' -e 'Install the buildx component' -e 'docs.docker.com/go/buildx' -e '^ *$'
echo "images: $((SECONDS - start))s"

# kind's nodes watch many files: kind asks for at least 512 inotify
# instances and 524288 watches. Every node's systemd, kubelet, containerd
# and pods share the host's root limits: with the kernel's default watches
# (a share of the memory), and again with 512 instances once two clusters
# ran their suites, the third cluster's systemd could not reload ("failed
# to reload systemd") and its kubelet never started. 8192 instances leave
# room for three nodes and their pods.
if [[ "$(sysctl -n fs.inotify.max_user_instances)" -lt 8192 ]]; then
  sysctl -qw fs.inotify.max_user_instances=8192
fi
if [[ "$(sysctl -n fs.inotify.max_user_watches)" -lt 524288 ]]; then
  sysctl -qw fs.inotify.max_user_watches=524288
fi

# members prints the clusters of the clusterset that exist, in ALL's order.
members() {
  local name existing
  existing=$(kind get clusters 2>/dev/null)
  for name in "${ALL[@]}"; do
    grep -qxF "${name}" <<<"${existing}" && echo "${name}"
  done
  return 0
}
# exists NAME: the cluster exists (not `members | grep -q`: grep's early
# exit would fail the pipeline under pipefail).
exists() { [[ " $(members | tr '\n' ' ') " == *" $1 "* ]]; }

# create_cluster NAME creates a single-node cluster and loads the project's
# images (a derived member runs only the test image of them).
create_cluster() {
  local name=$1 start=${SECONDS}
  step "Creating cluster ${name}"
  local create=(kind create cluster --config "kind-config/clusters/cluster-${name#mcs-}.yaml" --image "${NODE_IMAGE}" --wait 120s)
  kind delete cluster --name "${name}" >/dev/null 2>&1 || true
  # A node whose kubeadm init failed is deleted by kind; one more try, said,
  # before the run fails (its output above says why the first did).
  if ! "${create[@]}"; then
    echo "creating cluster ${name} failed; trying once more"
    kind delete cluster --name "${name}" >/dev/null 2>&1 || true
    "${create[@]}"
  fi
  echo "cluster ${name} Ready in $((SECONDS - start))s"
  if [[ "${name}" == "${DERIVED}" ]]; then
    kind load docker-image mcs-kube-proxy/echoserver:dev --name "${name}"
  elif [[ "${name}" == "${UPSTREAM_CLUSTER}" ]]; then
    # Upstream's specs run upstream's test images (upstream_cluster).
    kind load docker-image mcs-kube-proxy:dev --name "${name}"
  else
    kind load docker-image "${PROJECT_IMAGES[@]}" --name "${name}"
  fi
  if [[ "${name}" == "${OLDER_MEMBER}" && -n "${OLDER_RELEASE}" ]]; then
    kind load docker-image "$(older_image)" --name "${name}"
  fi
}

# flat_routes [NAME...]: the nodes' pod network is containerd's
# (kind-config/node): each node knows its own podCIDRs only. Every node
# routes every other node's, in its cluster and the others, to that node,
# as a flat-network clusterset does: IPv4, and IPv6 where the other node
# has an IPv6 pod range (the dual-stack members; the kind network has both
# families). The clusters are NAMEs, or every one members() names.
declare -A NODE_IP NODE_CIDR NODE_IP6 NODE_CIDR6
flat_routes() {
  step "Flat pod network: every node routes every other node's podCIDRs"
  local name node other cidrs network="{{(index .NetworkSettings.Networks \"${KIND_EXPERIMENTAL_DOCKER_NETWORK}\")"
  local names=("$@")
  [[ $# -gt 0 ]] || mapfile -t names < <(members)
  # Only these clusters' nodes: mcs-upstream is routed on its own, and
  # the clusterset's clusters are gone by then.
  NODE_IP=() NODE_CIDR=() NODE_IP6=() NODE_CIDR6=()
  for name in "${names[@]}"; do
    for node in $(kind get nodes --name "${name}"); do
      NODE_IP[${node}]=$(docker inspect -f "${network}.IPAddress}}" "${node}")
      NODE_IP6[${node}]=$(docker inspect -f "${network}.GlobalIPv6Address}}" "${node}")
      # IPv4 first; an IPv4-only node (mcs-c) has one range.
      read -r -a cidrs <<<"$(kc "${name}" get node "${node}" -o jsonpath='{.spec.podCIDRs[*]}')"
      if [[ ${#cidrs[@]} -eq 0 ]]; then
        echo "cluster ${name}: node ${node} has no podCIDRs (or its apiserver did not answer)" >&2
        exit 1
      fi
      NODE_CIDR[${node}]=${cidrs[0]}
      NODE_CIDR6[${node}]=${cidrs[1]:-}
    done
  done
  for node in "${!NODE_IP[@]}"; do
    for other in "${!NODE_IP[@]}"; do
      [[ "${other}" == "${node}" ]] && continue
      docker exec "${node}" ip route replace "${NODE_CIDR[${other}]}" via "${NODE_IP[${other}]}"
      if [[ -n "${NODE_CIDR6[${other}]}" && -n "${NODE_IP6[${other}]}" ]]; then
        docker exec "${node}" ip -6 route replace "${NODE_CIDR6[${other}]}" via "${NODE_IP6[${other}]}"
      fi
    done
  done
}

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

# pod_subnet_of NAME: the pod subnet(s) NAME's kind config gives.
pod_subnet_of() { grep podSubnet "kind-config/clusters/cluster-${1#mcs-}.yaml" | awk '{print $2}'; }

# setup_member NAME: the CRDs, the ClusterProperty, RBAC, admission
# policies, CoreDNS with clusterset.local and the controller's identity;
# in a native member also this project's kube-proxy with the gate on. The
# derived member keeps kubeadm's kube-proxy ConfigMap and DaemonSet as
# they are: the stock image of the pinned version.
setup_member() {
  local name=$1 by=${2:-kubectl} pod_subnet
  step "CRDs, ClusterProperty, CoreDNS and RBAC in ${name}$([[ "${name}" == "${DERIVED}" ]] && echo " (stock kube-proxy: derived member)" || echo ", our kube-proxy")"
  pod_subnet=$(pod_subnet_of "${name}")
  if [[ "${by}" == chart ]]; then
    # The CRDs, the controller's identity, RBAC and admission policies
    # as an operator installs them with Helm (docs/install.md).
    helm --kube-context "$(ctx "${name}")" install mcs deploy/helm/multicluster-services --wait --timeout 120s
  else
    kc "${name}" apply --server-side -f "${MCS_CRDS}/multicluster.x-k8s.io_serviceexports.yaml" -f "${MCS_CRDS}/multicluster.x-k8s.io_serviceimports.yaml" \
      -f staging/src/k8s.io/multiclusterservices/crds/clusterproperty.yaml
  fi
  kc "${name}" wait --for condition=Established crd --all --timeout 60s
  fill "${name}" "${pod_subnet}" "" kind-config/clusterproperty.yaml | kc "${name}" apply --server-side -f -
  [[ "${by}" == chart ]] || kc "${name}" apply --server-side -f kind-config/mcs-controller-rbac.yaml -f kind-config/mcs-admission-policy.yaml
  if [[ "${name}" == "${DERIVED}" ]]; then
    # As deploy/overlays/derived-member: the controller writes native
    # names as slices of local Services for the stock proxies here.
    kc "${name}" delete validatingadmissionpolicybinding multicluster.x-k8s.io-controller-native-member --ignore-not-found
  fi
  # kubeadm owns kube-proxy's ConfigMap and DaemonSet and CoreDNS's
  # Corefile: ours take them over.
  coredns_offline | kc "${name}" apply --server-side --force-conflicts -f -
  if [[ "${name}" != "${DERIVED}" ]]; then
    kc "${name}" apply --server-side -f kind-config/kube-proxy-rbac.yaml
    fill "${name}" "${pod_subnet}" "" kind-config/kube-proxy.yaml | kc "${name}" apply --server-side --force-conflicts -f -
    kc "${name}" apply --server-side --force-conflicts -f kind-config/kube-proxy-daemonset.yaml
    if [[ "${name}" == "${OLDER_MEMBER}" && -n "${OLDER_RELEASE}" ]]; then
      kc "${name}" -n kube-system set image daemonset/kube-proxy "kube-proxy=$(older_image)"
    fi
  fi
  kc "${name}" -n kube-system set image deployment/coredns "coredns=${COREDNS_IMAGE}"
  kc "${name}" -n kube-system rollout status daemonset/kube-proxy --timeout 120s
  if [[ "${name}" != "${DERIVED}" ]]; then
    local want=${K8S_VERSION} got
    [[ "${name}" == "${OLDER_MEMBER}" && -n "${OLDER_RELEASE}" ]] && want=$(older_image | sed 's/^mcs-kube-proxy://; s/-mcs\.dev$//')
    got=$(kc "${name}" -n kube-system exec daemonset/kube-proxy -- /usr/local/bin/kube-proxy --version)
    echo "${name}: kube-proxy ${got#Kubernetes }"
    if [[ "${got}" != "Kubernetes ${want}" ]]; then
      echo "${name} runs kube-proxy ${got}, want ${want}" >&2
      exit 1
    fi
  fi
  kc "${name}" -n kube-system rollout status deployment/coredns --timeout 120s
  # The controller's identity in this member: a ServiceAccount bound to
  # kind-config/mcs-controller-rbac.yaml, nothing more.
  if [[ "${by}" != chart ]]; then
    kc "${name}" create namespace mcs-system --dry-run=client -o yaml | kc "${name}" apply -f -
    kc "${name}" -n mcs-system create serviceaccount mcs-controller --dry-run=client -o yaml | kc "${name}" apply -f -
  fi
}

# member_kubeconfig NAME FILE adds to FILE the context NAME: the cluster
# by address (the controller's pods resolve names with the clusters'
# CoreDNS, which knows no Docker container), with a token of the
# controller's identity there.
member_kubeconfig() {
  local name=$1 file=$2 server ca token
  server="https://${NODE_IP[${name}-control-plane]}:6443"
  ca=$(kc "${name}" config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
  token=$(kc "${name}" -n mcs-system create token mcs-controller --duration 24h)
  echo "${ca}" | base64 -d >"${WORK}/${name}-ca.crt"
  kubectl --kubeconfig "${file}" config set-cluster "${name}" --server "${server}" --certificate-authority "${WORK}/${name}-ca.crt" --embed-certs >/dev/null
  kubectl --kubeconfig "${file}" config set-credentials "${name}" --token "${token}" >/dev/null
  kubectl --kubeconfig "${file}" config set-context "${name}" --cluster "${name}" --user "${name}" >/dev/null
}

# deploy_controller: the mcs-controller (hub mode) in mcs-a, with a
# kubeconfig of the native members that exist; the derived member mcs-c
# (served in derived mode, named so from the start) joins later by a
# member Secret (join_member), as a cluster added to a running clusterset
# does: its arrival restarts nothing. It waits until the Deployment has
# rolled out.
deploy_controller() {
  local hub=mcs-a name contexts=()
  step "mcs-controller (hub mode) in ${hub}: members $(members | tr '\n' ' ')"
  local kubeconfig="${WORK}/mcs-controller.kubeconfig"
  rm -f "${kubeconfig}"
  for name in $(members); do
    [[ "${name}" == "${DERIVED}" ]] && continue
    member_kubeconfig "${name}" "${kubeconfig}"
    contexts+=("${name}")
  done
  # The Deployment's args are an atomic list: applying the manifest puts
  # them back as deploy/ has them, with the members' flags added. Clusterset
  # IPs of both families (mcs-a and mcs-b are dual-stack): the package's
  # IPv4 range, and kube-proxy's default IPv6 one. The controller reads
  # its kubeconfig at start: a digest of it in the pod template rolls the
  # pods out when the native members change, in the same single rollout as
  # new args. A cluster's ID is its name (kind-config/clusterproperty.yaml).
  local cidrs='--clusterset-ip-cidrs=10.250.0.0/16' members
  if ! grep -q -- "^        - ${cidrs}$" kind-config/mcs-controller-deployment.yaml ||
    ! grep -q '^  template:$' kind-config/mcs-controller-deployment.yaml; then
    echo "kind-config/mcs-controller-deployment.yaml has no ${cidrs} or template: its shape changed" >&2
    exit 1
  fi
  members="\n        - --contexts=$(IFS=,; echo "${contexts[*]}")\n        - --hub-context=${hub}"
  members+="\n        - --member-secrets-namespace=mcs-system\n        - --derived-members=${DERIVED}"
  fill "${hub}" "" "$(base64 -w0 "${kubeconfig}")" kind-config/mcs-controller.yaml | kc "${hub}" apply --server-side -f -
  kc "${hub}" apply --server-side -f deploy/mcs-controller/inventory-rbac.yaml
  sed -e "s|^        - ${cidrs}$|        - ${cidrs},fd00:10:250::/108${members}|" \
    -e "/^  template:$/{n;s|^    metadata:$|&\n      annotations:\n        multiclusterservices.k8s.io/kubeconfig-sha256: $(sha256sum "${kubeconfig}" | cut -c1-64)|}" \
    kind-config/mcs-controller-deployment.yaml |
    kc "${hub}" apply --server-side --force-conflicts -f -
  kc "${hub}" -n mcs-system rollout status deployment/mcs-controller --timeout 180s
}

# join_member HUB NAME: the member Secret of NAME in HUB (labelled, its
# cluster ID stated), as docs/mcs-controller.md adds a member; it waits
# for the controller's MemberJoined event on it.
join_member() {
  local hub=$1 name=$2 file="${WORK}/${2}.member.kubeconfig" i
  rm -f "${file}"
  member_kubeconfig "${name}" "${file}"
  kubectl --kubeconfig "${file}" config use-context "${name}" >/dev/null
  kc "${hub}" -n mcs-system create secret generic "${name}" --from-file=kubeconfig="${file}" --dry-run=client -o yaml |
    kc "${hub}" label --local -f - -o yaml multiclusterservices.k8s.io/member= |
    kc "${hub}" annotate --local -f - -o yaml multiclusterservices.k8s.io/cluster-id="${name}" |
    kc "${hub}" apply --server-side -f -
  for i in $(seq 90); do
    if [[ -n "$(kc "${hub}" -n mcs-system get events -o name \
      --field-selector "involvedObject.kind=Secret,involvedObject.name=${name},reason=MemberJoined")" ]]; then
      echo "${name} joined the clusterset (its member Secret; ${i} looks)"
      return 0
    fi
    sleep 2
  done
  echo "${name}: no MemberJoined event on its member Secret in ${hub} after 180s; the Secret's events:" >&2
  kc "${hub}" -n mcs-system get events --field-selector "involvedObject.kind=Secret,involvedObject.name=${name}" >&2 || true
  exit 1
}

# --- Pull mode -------------------------------------------------------------

# deploy_pull: the clusterset switched to pull mode as an operator switches
# it (docs/install.md): push mode's controller goes first (its Deployment
# deleted: a member has one writer), then in mcs-a, the member doubling as
# the hub, deploy/hub-pull with the planner's flags (the members' pod
# ranges as the operator states them, clusterset IPs of both families) and
# each member's part (`kubectl mcs hub member ID`), then in each member
# its agent (deploy/member-agent: the member's mcs-controller identity,
# RBAC and admission policies, which setup_member installed already; in
# the derived member deploy/overlays/derived-member-agent, whose agent
# runs with --derived) with its hub kubeconfig: mcs-a by its node's
# address and a token of the member's ServiceAccount in its hub
# namespace. It waits until the planner and every agent have rolled out.
PULL_HUB=mcs-a
deploy_pull() {
  local hub=${PULL_HUB} name cidrs=() file package
  step "Pull mode: push mode's controller gone, the hub in ${hub} with its planner, an agent in $(members | tr '\n' ' ')"
  kc "${hub}" -n mcs-system delete deployment mcs-controller --ignore-not-found --wait=true
  for _ in $(seq 60); do
    [[ -z "$(kc "${hub}" -n mcs-system get pods -l app=mcs-controller -o name)" ]] && break
    sleep 2
  done
  for name in $(members); do cidrs+=("${name}=$(pod_subnet_of "${name}")"); done
  # The planner's args are an atomic list, as the controller's: deploy/
  # has them, with the members' ranges and the second family added.
  local planner='--clusterset-ip-cidrs=10.250.0.0/16'
  if ! grep -q -- "^        - ${planner}$" deploy/hub-pull/planner.yaml; then
    echo "deploy/hub-pull/planner.yaml has no ${planner}: its shape changed" >&2
    exit 1
  fi
  kubectl kustomize deploy/hub-pull |
    sed -e "s|^        - ${planner}$|        - ${planner},fd00:10:250::/108\n        - --member-pod-cidrs=$(IFS=';'; echo "${cidrs[*]}")|" |
    kc "${hub}" apply --server-side --force-conflicts -f - >/dev/null
  hub_kinds_counted "${hub}"
  kc "${hub}" config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' | base64 -d >"${WORK}/${hub}-ca.crt"
  for name in $(members); do
    _output/bin/kubectl-mcs hub member "${name}" | kc "${hub}" apply --server-side -f - >/dev/null
    file="${WORK}/${name}.hub.kubeconfig"
    rm -f "${file}"
    kubectl --kubeconfig "${file}" config set-cluster hub --server "https://${NODE_IP[${hub}-control-plane]}:6443" \
      --certificate-authority "${WORK}/${hub}-ca.crt" --embed-certs >/dev/null
    kubectl --kubeconfig "${file}" config set-credentials "${name}" \
      --token "$(kc "${hub}" -n "${name}" create token mcs-member-agent --duration 24h)" >/dev/null
    kubectl --kubeconfig "${file}" config set-context hub --cluster hub --user "${name}" >/dev/null
    kubectl --kubeconfig "${file}" config use-context hub >/dev/null
    kc "${name}" -n mcs-system create secret generic mcs-member-agent-hub --from-file=kubeconfig="${file}" --dry-run=client -o yaml |
      kc "${name}" apply --server-side --force-conflicts -f - >/dev/null
    package=deploy/member-agent
    if [[ "${name}" == "${DERIVED}" ]]; then
      package=deploy/overlays/derived-member-agent
      # Its agent runs the controller's image, which a derived member
      # was not given (create_cluster).
      kind load docker-image mcs-controller:dev --name "${name}" >/dev/null
    fi
    kubectl kustomize "${package}" | kc "${name}" apply --server-side --force-conflicts -f - >/dev/null
  done
  rolled_out "${hub}" mcs-planner
  for name in $(members); do rolled_out "${name}" mcs-member-agent; done
}

# hub_kinds_counted HUB waits until HUB's kube-controller-manager counts
# the kinds a member's quota bounds (docs/install.md, "Pull mode"). It
# counts a new kind only once its discovery (every 30 s) has seen the
# CRD; a quota created before that is counted at the controller's next
# full resync (--resource-quota-sync-period, 5 minutes), and until then
# the apiserver refuses every write the quota bounds ("status unknown for
# quota"): a member's part laid out with the CRDs would keep its agent
# from publishing for minutes. A probe quota in mcs-plan (where members
# write nothing), created again until it is counted, says when.
hub_kinds_counted() {
  local hub=$1 used='' probe
  probe='{"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "mcs-hub-kinds-counted", "namespace": "mcs-plan"},
    "spec": {"hard": {"count/memberexports.hub.multiclusterservices.k8s.io": "0", "count/memberclusters.hub.multiclusterservices.k8s.io": "0"}}}'
  for _ in $(seq 40); do
    kc "${hub}" create -f - <<<"${probe}" >/dev/null
    sleep 2
    used=$(kc "${hub}" -n mcs-plan get resourcequota mcs-hub-kinds-counted -o jsonpath='{.status.used}')
    kc "${hub}" -n mcs-plan delete resourcequota mcs-hub-kinds-counted >/dev/null
    if [[ "${used}" == *memberexports* && "${used}" == *memberclusters* ]]; then
      return 0
    fi
  done
  echo "${hub}'s kube-controller-manager does not count the hub's kinds in quotas after 80 s (probe's usage: ${used:-none})" >&2
  exit 1
}

# rolled_out CLUSTER DEPLOYMENT waits for mcs-system/DEPLOYMENT of CLUSTER
# to roll out, or fails showing its pods and their last log lines.
rolled_out() {
  if kc "$1" -n mcs-system rollout status "deployment/$2" --timeout 180s; then
    return 0
  fi
  echo "$1: deployment $2 did not roll out; its pods and their last log lines:" >&2
  kc "$1" -n mcs-system get pods -l "app=$2" -o wide >&2 || true
  local pod
  for pod in $(kc "$1" -n mcs-system get pods -l "app=$2" -o name); do
    echo "--- $1 ${pod}" >&2
    kc "$1" -n mcs-system logs "${pod}" --tail 30 >&2 || true
  done
  exit 1
}

# pull_suite: the clusters switched to pull mode (deploy_pull), and the
# suites run again, in pull mode, with the same cases and checks as push
# mode's (the planner and the agents stop and take flags where push
# mode's cases do so to the controller): with mcs-c there, the derived
# cases (TestDerivedMemberPullMode), after which mcs-c leaves the
# clusterset (its part of the hub deleted, as an operator removes a
# member, and the cluster); then the KEP suite and the dual-stack cases
# (TestMultiClusterServicesPullMode, TestDualStackPullMode).
pull_suite() {
  deploy_pull
  if exists "${DERIVED}"; then
    step "Derived-mode suite in pull mode (test/e2e TestDerivedMemberPullMode): a = kind-mcs-b, native b = kind-mcs-a (the hub), derived c = kind-mcs-c"
    suite kind-mcs-b,kind-mcs-a,kind-mcs-c '^TestDerivedMemberPullMode$'
    _output/bin/kubectl-mcs hub member "${DERIVED}" | kc "${PULL_HUB}" delete -f - --ignore-not-found --wait=false >/dev/null
    kind delete cluster --name "${DERIVED}" >/dev/null
  fi
  step "Pull-mode suite (test/e2e TestMultiClusterServicesPullMode, TestDualStackPullMode): a = kind-mcs-b, b = kind-mcs-a (the hub)"
  suite kind-mcs-b,kind-mcs-a '^TestMultiClusterServicesPullMode$|^TestDualStackPullMode$'
}

smoke_test() {
  step "Smoke test: export from every cluster, requests from ${NAMES[-1]}"
  local ECHO=mcs-kube-proxy/echoserver:dev name client vip answers answered pod
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
  vip=$(clusterset_ip "${client}" demo web)
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
}

# clusterset_ip CLUSTER NAMESPACE NAME prints the first clusterset IP of
# the ServiceImport NAMESPACE/NAME in CLUSTER, waiting up to 2 minutes for
# it, or fails saying so.
clusterset_ip() {
  local vip=""
  for _ in $(seq 60); do
    vip=$(kc "$1" -n "$2" get serviceimport "$3" -o jsonpath='{.spec.ips[0]}' 2>/dev/null || true)
    [[ -n "${vip}" ]] && break
    sleep 2
  done
  if [[ -z "${vip}" ]]; then
    echo "no ServiceImport $2/$3 with a clusterset IP in $1" >&2
    exit 1
  fi
  echo "${vip}"
}

# suite CONTEXTS DEFAULT_REGEX runs test/e2e against the contexts (cluster
# a, cluster b[, the derived member]); --run narrows it. Case 5 times 3
# rounds here, for its verdicts: each round on kind waits for two pods to
# start (26, the suite's default, for the figures in docs/kind.md:
# MCS_E2E_LATENCY_ROUNDS=26).
# The cases of a sideBySide group run MCS_E2E_PARALLEL at a time (4: most
# of a case is waiting on pods and on the controller).
# The test binary is built once for both suites (go test links it again
# for every run: half a minute on a busy machine), and runs in the
# package's directory, as go test runs it.
E2E_PARALLEL=${MCS_E2E_PARALLEL:-4}
suite() {
  local contexts=$1 regex=${RUN:-$2} start=${SECONDS} bin
  bin="$(pwd)/${WORK}/e2e.test"
  [[ "${E2E_BUILT:-}" == true ]] || { go test -c -o "${bin}" ./test/e2e/ && E2E_BUILT=true; }
  (cd test/e2e && MCS_E2E_PROVIDER=kind MCS_E2E_CONTEXTS=${contexts} MCS_E2E_LATENCY_ROUNDS=${MCS_E2E_LATENCY_ROUNDS:-3} \
    "${bin}" -test.run "${regex}" -test.count=1 -test.timeout 60m -test.parallel "${E2E_PARALLEL}" -test.v)
  echo "suite on kind (${regex}): $((SECONDS - start))s"
}

# add_derived_member: mcs-c with the stock kube-proxy (created here unless
# it exists), joining the running controller, which serves it in derived
# mode.
add_derived_member() {
  if [[ " ${NAMES[*]} " != *" ${DERIVED} "* ]]; then
    exists "${DERIVED}" || create_cluster "${DERIVED}"
    flat_routes
    setup_member "${DERIVED}"
  fi
  join_member mcs-a "${DERIVED}"
}

# create_beside NAME... starts creating clusters and setting them up as
# members in the background (creating a cluster is mostly waiting on its
# kubeadm and kubelet; setup_member writes only in that cluster, and the
# controller does not know it yet), each one's output kept until
# wait_created; wait_created waits for them all, prints their output in
# order, and fails if one failed. Routes to them and joining the
# controller come after (flat_routes, join_member).
create_beside() {
  local name
  for name in "$@"; do
    echo "creating cluster ${name} in the background (its output follows when it is waited for)"
    (create_cluster "${name}"; setup_member "${name}") >"${WORK}/create-${name}.log" 2>&1 &
    CREATING+=("${name}:$!")
  done
}
wait_created() {
  local entry failed=()
  for entry in "${CREATING[@]}"; do
    wait "${entry##*:}" || failed+=("${entry%%:*}")
    cat "${WORK}/create-${entry%%:*}.log"
  done
  CREATING=()
  if [[ ${#failed[@]} -gt 0 ]]; then
    echo "creating cluster ${failed[*]} failed" >&2
    exit 1
  fi
}

# --- Kubernetes' own sig-network specs -----------------------------------

UPSTREAM_SKIP='\[Slow\]|\[Serial\]|\[Disruptive\]|\[Flaky\]|LoadBalancer|\[Feature:'
UPSTREAM_PROCS=${MCS_UPSTREAM_PROCS:-4}
# upstream_cluster creates mcs-upstream with this project's kube-proxy and
# packages, as setup_member sets a member up, kubeadm's kube-proxy
# ConfigMap and DaemonSet kept first (upstream_stock puts them back), and
# loads the test images the specs run.
upstream_cluster() {
  local name=${UPSTREAM_CLUSTER}
  create_cluster "${name}"
  flat_routes "${name}"
  save_stock_kube_proxy "${name}"
  setup_member "${name}" chart
  # Two schedulable nodes, as 13 of the Services specs need (they skip
  # otherwise): the control plane takes pods too, as in a one-node kind
  # cluster.
  kc "${name}" taint nodes -l node-role.kubernetes.io/control-plane node-role.kubernetes.io/control-plane:NoSchedule- >/dev/null
  # shellcheck disable=SC2046 # one image per line
  kind load docker-image $(cat "${WORK}/upstream-images.list") --name "${name}"
}

# save_stock_kube_proxy NAME keeps kubeadm's kube-proxy ConfigMap and
# DaemonSet of NAME, as they are before any change, in STOCK_KUBE_PROXY,
# for putting them back.
STOCK_KUBE_PROXY=${WORK}/upstream-stock-kube-proxy.json
save_stock_kube_proxy() {
  kc "$1" -n kube-system get configmap/kube-proxy daemonset/kube-proxy -o json |
    jq 'del(.items[].metadata | .resourceVersion, .uid, .managedFields, .creationTimestamp, .generation, .annotations) | del(.items[].status)' \
      >"${STOCK_KUBE_PROXY}"
}

# upstream_stock gives mcs-upstream kubeadm's kube-proxy back (the stock
# image of the pinned release, its own configuration), for upstream's own
# result on the same cluster.
upstream_stock() {
  local name=${UPSTREAM_CLUSTER}
  step "mcs-upstream: kubeadm's stock kube-proxy back"
  kc "${name}" apply --server-side --force-conflicts -f "${STOCK_KUBE_PROXY}"
  kc "${name}" -n kube-system rollout restart daemonset/kube-proxy
  kc "${name}" -n kube-system rollout status daemonset/kube-proxy --timeout 120s
  local image
  image=$(kc "${name}" -n kube-system get daemonset/kube-proxy -o jsonpath='{.spec.template.spec.containers[0].image}')
  if [[ "${image}" != registry.k8s.io/kube-proxy:* ]]; then
    echo "mcs-upstream's kube-proxy runs ${image}, not the stock image" >&2
    exit 1
  fi
}

# upstream_specs SET LABEL runs the specs of SET against mcs-upstream,
# keeps their JUnit report and log under ${WORK}/upstream-LABEL, and
# prints the summary: each failed spec by name. It returns ginkgo's
# status.
upstream_specs() {
  local set=$1 label=$2 focus dir start=${SECONDS} status=0
  case "${set}" in
    conformance) focus='\[sig-network\].*\[Conformance\]' ;;
    all) focus='\[sig-network\] Services|\[sig-network\].*\[Conformance\]' ;;
  esac
  dir="$(pwd)/${WORK}/upstream-${label}"
  rm -rf "${dir}"
  mkdir -p "${dir}"
  step "Kubernetes' sig-network specs (${set}) against mcs-upstream, ${label}, ${UPSTREAM_PROCS} side by side"
  # As upstream's CI runs them: ginkgo's processes side by side (none of
  # these specs is [Serial]); most of a spec's time is waiting for pods.
  _output/upstream/ginkgo --procs "${UPSTREAM_PROCS}" --focus "${focus}" --skip "${UPSTREAM_SKIP}" --no-color --timeout 90m \
    _output/upstream/sig-network.test -- -kubeconfig "${KUBECONFIG:-${HOME}/.kube/config}" -context "$(ctx "${UPSTREAM_CLUSTER}")" \
    -report-dir "${dir}" >"${dir}/specs.log" 2>&1 || status=$?
  # -a: ginkgo's progress dots are not ASCII.
  grep -a -E '^(Ran [0-9]+ of|(SUCCESS|FAIL)!)' "${dir}/specs.log" | sort -u || true
  grep -a -A40 '^Summarizing' "${dir}/specs.log" | grep -a -E '^\s+\[FAIL\]' || true
  echo "sig-network specs (${set}), ${label}: $((SECONDS - start))s, exit ${status} (log: ${dir}/specs.log)"
  return "${status}"
}

# chart_lifecycle: on mcs-upstream, whose packages the chart installed
# (upstream_cluster), what an operator does next: an upgrade that changes
# what the chart installs (a derived member, then native again) and an
# uninstall, which must leave nothing of the chart's (its RBAC, admission
# policies, the controller's identity) and nothing of the user's removed
# (the CRDs and the ServiceExports written with them, mcs-system); then,
# with Helm 4, the chart's previous release (PREVIOUS_CHART) installed and
# upgraded to this one as docs/install.md says (the CRDs first, which Helm
# never upgrades), and uninstalled the same way.
PREVIOUS_CHART=test/kindconfig/testdata/multicluster-services-0.1.0.tgz
NATIVE_BINDING=validatingadmissionpolicybinding/multicluster.x-k8s.io-controller-native-member
chart_lifecycle() {
  local name=${UPSTREAM_CLUSTER}
  local h=(helm --kube-context "$(ctx "${name}")") h4=(helm4 --kube-context "$(ctx "${name}")")
  step "The Helm chart on mcs-upstream: upgraded, upgraded back, uninstalled; its previous release upgraded to it by Helm 4"
  "${h[@]}" upgrade mcs deploy/helm/multicluster-services --set member.mode=derived --wait --timeout 120s >/dev/null
  if kc "${name}" get "${NATIVE_BINDING}" >/dev/null 2>&1; then
    echo "helm upgrade to a derived member left ${NATIVE_BINDING}" >&2
    return 1
  fi
  "${h[@]}" upgrade mcs deploy/helm/multicluster-services --set member.mode=native --wait --timeout 120s >/dev/null
  kc "${name}" get "${NATIVE_BINDING}" >/dev/null
  kc "${name}" create namespace chart-user --dry-run=client -o yaml | kc "${name}" apply -f - >/dev/null
  printf 'apiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceExport\nmetadata:\n  name: web\n  namespace: chart-user\n' | kc "${name}" apply -f - >/dev/null
  "${h[@]}" uninstall mcs --wait --timeout 120s >/dev/null
  chart_uninstalled "helm uninstall" || return 1

  local previous current
  previous=$(tar -xzOf "${PREVIOUS_CHART}" multicluster-services/Chart.yaml | awk '$1 == "version:" {print $2}')
  current=$(awk '$1 == "version:" {print $2}' deploy/helm/multicluster-services/Chart.yaml)
  "${h4[@]}" install mcs "${PREVIOUS_CHART}" --wait --timeout 120s >/dev/null
  kc "${name}" apply --server-side --force-conflicts -f deploy/helm/multicluster-services/crds/ >/dev/null
  "${h4[@]}" upgrade mcs deploy/helm/multicluster-services --wait --timeout 120s >/dev/null
  local release
  release=$("${h4[@]}" list --filter '^mcs$' -o json | jq -r '.[0] | "\(.chart) \(.status) \(.revision)"')
  if [[ "${release}" != "multicluster-services-${current} deployed 2" ]]; then
    echo "helm4 upgrade from ${previous} to ${current}: the release is ${release}" >&2
    return 1
  fi
  # Every object of the upgraded release is there.
  "${h4[@]}" get manifest mcs | kc "${name}" get -f - >/dev/null
  "${h4[@]}" uninstall mcs --wait --timeout 120s >/dev/null
  chart_uninstalled "helm4 uninstall" || return 1
  echo "chart: installed (before the specs), upgraded to a derived member and back, uninstalled; ${previous} installed by Helm 4, upgraded to ${current}, uninstalled: nothing of the chart's left, the CRDs, mcs-system and a user's ServiceExport kept"
}

# chart_uninstalled WHAT: nothing of the chart's left on mcs-upstream, and
# nothing of the user's removed.
chart_uninstalled() {
  local name=${UPSTREAM_CLUSTER} left=() kept=() o
  for o in clusterrole/multicluster:mcs-controller "${NATIVE_BINDING}" validatingadmissionpolicy/multicluster.x-k8s.io-controller-scope \
    validatingadmissionpolicy/multicluster.x-k8s.io-controller-writes-imports; do
    kc "${name}" get "${o}" >/dev/null 2>&1 && left+=("${o}")
  done
  kc "${name}" -n mcs-system get serviceaccount/mcs-controller >/dev/null 2>&1 && left+=(serviceaccount/mcs-controller)
  for o in crd/serviceexports.multicluster.x-k8s.io crd/serviceimports.multicluster.x-k8s.io crd/clusterproperties.about.k8s.io namespace/mcs-system; do
    kc "${name}" get "${o}" >/dev/null 2>&1 || kept+=("${o}")
  done
  kc "${name}" -n chart-user get serviceexport/web >/dev/null 2>&1 || kept+=(serviceexport/chart-user/web)
  if [[ ${#left[@]} -gt 0 || ${#kept[@]} -gt 0 ]]; then
    echo "$1 left ${left[*]:-nothing of the chart's} and removed ${kept[*]:-nothing of the user's}" >&2
    return 1
  fi
}

# --- A rollout of kube-proxy under traffic ----------------------------------

# The controller's previous release: the one of the chart's previous
# release (PREVIOUS_CHART), built from the commit that published it, as an
# image of the same Dockerfile. The rollout downgrades the controller to
# it and upgrades it back.
PREVIOUS_RELEASE_COMMIT=722a32c
PREVIOUS_CONTROLLER_IMAGE=mcs-controller:0.1.0
previous_controller_image() {
  docker image inspect "${PREVIOUS_CONTROLLER_IMAGE}" >/dev/null 2>&1 && return
  local tree=${WORK}/previous-release context=${WORK}/previous-context
  if ! git cat-file -e "${PREVIOUS_RELEASE_COMMIT}^{commit}" 2>/dev/null; then
    echo "commit ${PREVIOUS_RELEASE_COMMIT} (the controller of chart ${PREVIOUS_CHART##*-}) is not in this clone: fetch it (git fetch --unshallow) to measure the controller's downgrade" >&2
    exit 1
  fi
  step "The controller's previous release (${PREVIOUS_RELEASE_COMMIT}) as ${PREVIOUS_CONTROLLER_IMAGE}"
  rm -rf "${tree}" "${context}"
  git worktree prune
  git worktree add --detach "${tree}" "${PREVIOUS_RELEASE_COMMIT}" >/dev/null
  mkdir -p "${context}"
  (cd "${tree}" && go_build "" "${ROOT}/${context}/" ./cmd/mcs-controller ./cmd/kubectl-mcs)
  # Docker's legacy builder builds every stage before the target: the
  # kube-proxy stage's binary is this tree's, unused.
  ln _output/bin/kube-proxy "${context}/kube-proxy"
  docker build -q -f kind-config/Dockerfile --target mcs-controller -t "${PREVIOUS_CONTROLLER_IMAGE}" "${context}" >/dev/null
  git worktree remove --force "${tree}"
  rm -rf "${context}"
}

ROLLOUT_NS=rollout
# rollout_cluster: mcs-upstream as a cluster before adoption: kubeadm's
# stock kube-proxy (its ConfigMap and DaemonSet saved, to compare), this
# project's packages by the Helm chart, the controller serving the cluster
# as its own only member; a Service web (a pod on each node) exported, and
# a client on each node (echoserver traffic) asking its ClusterIP and its
# clusterset IP, on new and held connections, ten times a second each.
rollout_cluster() {
  local name=${UPSTREAM_CLUSTER} vip cip
  previous_controller_image
  create_cluster "${name}"
  kind load docker-image mcs-controller:dev "${PREVIOUS_CONTROLLER_IMAGE}" mcs-kube-proxy/echoserver:dev --name "${name}"
  flat_routes "${name}"
  kc "${name}" taint nodes -l node-role.kubernetes.io/control-plane node-role.kubernetes.io/control-plane:NoSchedule- >/dev/null
  save_stock_kube_proxy "${name}"
  step "mcs-upstream: the packages by Helm, kubeadm's kube-proxy kept"
  local h=(helm --kube-context "$(ctx "${name}")")
  "${h[@]}" install mcs deploy/helm/multicluster-services --wait --timeout 120s >/dev/null
  fill "${name}" "$(pod_subnet_of "${name}")" "" kind-config/clusterproperty.yaml | kc "${name}" apply --server-side -f -
  coredns_offline | kc "${name}" apply --server-side --force-conflicts -f -
  kc "${name}" -n kube-system set image deployment/coredns "coredns=${COREDNS_IMAGE}"
  kc "${name}" -n kube-system rollout status deployment/coredns --timeout 120s
  rm -f "${WORK}/rollout-controller.kubeconfig"
  member_kubeconfig "${name}" "${WORK}/rollout-controller.kubeconfig"
  kubectl --kubeconfig "${WORK}/rollout-controller.kubeconfig" config use-context "${name}" >/dev/null
  "${h[@]}" upgrade mcs deploy/helm/multicluster-services --set controller.enabled=true \
    --set-file controller.kubeconfig="${WORK}/rollout-controller.kubeconfig" --wait --timeout 120s >/dev/null
  step "mcs-upstream: web exported, a traffic client on every node"
  kc "${name}" create namespace "${ROLLOUT_NS}" --dry-run=client -o yaml | kc "${name}" apply -f - >/dev/null
  kc "${name}" apply -f - >/dev/null <<EOF_WEB
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ${ROLLOUT_NS}}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      topologySpreadConstraints:
      - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}
      containers:
      - {name: web, image: mcs-kube-proxy/echoserver:dev, imagePullPolicy: Never}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: ${ROLLOUT_NS}}
spec:
  selector: {app: web}
  ports: [{name: tcp, port: 80, targetPort: 8080, protocol: TCP}]
---
apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceExport
metadata: {name: web, namespace: ${ROLLOUT_NS}}
EOF_WEB
  kc "${name}" -n "${ROLLOUT_NS}" rollout status deployment/web --timeout 120s
  vip=$(clusterset_ip "${name}" "${ROLLOUT_NS}" web)
  cip=$(kc "${name}" -n "${ROLLOUT_NS}" get service web -o jsonpath='{.spec.clusterIP}')
  ROLLOUT_VIP=${vip}
  echo "web: ClusterIP ${cip}, clusterset IP ${vip}"
  kc "${name}" apply -f - >/dev/null <<EOF_TRAFFIC
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: traffic, namespace: ${ROLLOUT_NS}}
spec:
  selector: {matchLabels: {app: traffic}}
  template:
    metadata: {labels: {app: traffic}}
    spec:
      tolerations: [{operator: Exists}]
      containers:
      - name: traffic
        image: mcs-kube-proxy/echoserver:dev
        imagePullPolicy: Never
        args: [traffic, --target=clusterip=${cip}:80, --target=clusterset=${vip}:80, --interval=100ms, --stats-port=9000]
EOF_TRAFFIC
  kc "${name}" -n "${ROLLOUT_NS}" rollout status daemonset/traffic --timeout 120s
  sleep 5
}

# rollout_stats [reset]: every client's counts, summed per target and
# kind of connection (the longest outage is the longest of any client),
# as one JSON object; with reset, each client's counts are zeroed.
rollout_stats() {
  local name=${UPSTREAM_CLUSTER} pod path=stats
  [[ "${1:-}" == reset ]] && path=stats/reset
  for pod in $(kc "${name}" -n "${ROLLOUT_NS}" get pods -l app=traffic -o name); do
    if [[ "${path}" == stats ]]; then
      kc "${name}" get --raw "/api/v1/namespaces/${ROLLOUT_NS}/pods/${pod#pod/}:9000/proxy/${path}"
    else
      kc "${name}" create --raw "/api/v1/namespaces/${ROLLOUT_NS}/pods/${pod#pod/}:9000/proxy/${path}" -f /dev/null
    fi
    echo
  done | jq -s 'reduce .[] as $c ({}; reduce ($c | keys[]) as $t (.; reduce ("new", "held") as $k (.;
      .[$t][$k].ok += $c[$t][$k].ok | .[$t][$k].failed += $c[$t][$k].failed |
      .[$t][$k].broken += ($c[$t][$k].broken // 0) |
      .[$t][$k].longestOutageMs = ([.[$t][$k].longestOutageMs // 0, $c[$t][$k].longestOutageMs] | max) |
      reduce (($c[$t][$k].errors // {}) | to_entries[]) as $e (.; .[$t][$k].errors[$e.key] += $e.value))))'
}

# rollout_step LABEL COMMAND...: the counts zeroed, COMMAND run (a change
# of kube-proxy's DaemonSet or ConfigMap, or of the controller), its
# rollout waited for and 10 s more, then the counts of the step printed
# and kept in ${WORK}/rollout/LABEL.json.
rollout_step() {
  local label=$1 start=${SECONDS}
  shift
  step "Rollout step: ${label}"
  rollout_stats reset >/dev/null
  "$@"
  sleep 10
  rollout_stats >"${WORK}/rollout/${label}.json"
  echo "${label} ($((SECONDS - start))s):"
  jq -r 'to_entries[] | .key as $t | .value | to_entries[] |
    "  \($t) \(.key): \(.value.ok) answered, \(.value.failed) failed\(if .value.errors then " \(.value.errors | tojson)" else "" end), \(.value.broken) held connections broken, longest outage \(.value.longestOutageMs) ms"' \
    "${WORK}/rollout/${label}.json"
}

kube_proxy_rolled() {
  kc "${UPSTREAM_CLUSTER}" -n kube-system rollout status daemonset/kube-proxy --timeout 180s >/dev/null
}
# The steps, as docs/install.md tells an operator: the image first, the
# gate after; back, the gate first, the image after.
rollout_ours_gate_off() {
  kc "${UPSTREAM_CLUSTER}" apply --server-side -f kind-config/kube-proxy-rbac.yaml >/dev/null
  kc "${UPSTREAM_CLUSTER}" -n kube-system set image daemonset/kube-proxy kube-proxy=mcs-kube-proxy:dev >/dev/null
  kube_proxy_rolled
}
rollout_gate() {
  local on=$1 config
  if [[ "${on}" == true ]]; then
    # kubeadm's config.conf sets no gate (no featureGates, or `{}`):
    # this one is the only one.
    config=$(kc "${UPSTREAM_CLUSTER}" -n kube-system get configmap kube-proxy -o jsonpath='{.data.config\.conf}')
    if grep -q '^featureGates:' <<<"${config}" && ! grep -qx 'featureGates: {}' <<<"${config}"; then
      echo "kube-proxy's config.conf has gates of its own; this script sets only MultiClusterServices" >&2
      exit 1
    fi
    config=$(sed '/^featureGates: {}$/d' <<<"${config}")
    config+=$'\nfeatureGates:\n  MultiClusterServices: true'
    kc "${UPSTREAM_CLUSTER}" -n kube-system patch configmap kube-proxy --type merge \
      -p "$(jq -n --arg c "${config}" '{data: {"config.conf": $c}}')" >/dev/null
  else
    # Back to kubeadm's own ConfigMap, as it was.
    jq '.items[] | select(.kind == "ConfigMap")' "${STOCK_KUBE_PROXY}" |
      kc "${UPSTREAM_CLUSTER}" apply --server-side --force-conflicts -f - >/dev/null
  fi
  kc "${UPSTREAM_CLUSTER}" -n kube-system rollout restart daemonset/kube-proxy >/dev/null
  kube_proxy_rolled
}
rollout_gate_on() { rollout_gate true; }
rollout_gate_off() { rollout_gate false; }
rollout_stock_image() {
  local image
  image=$(jq -r '.items[] | select(.kind == "DaemonSet") | .spec.template.spec.containers[0].image' "${STOCK_KUBE_PROXY}")
  kc "${UPSTREAM_CLUSTER}" -n kube-system set image daemonset/kube-proxy "kube-proxy=${image}" >/dev/null
  kube_proxy_rolled
}
rollout_stock_restart() {
  kc "${UPSTREAM_CLUSTER}" -n kube-system rollout restart daemonset/kube-proxy >/dev/null
  kube_proxy_rolled
}
# rollout_controller_image IMAGE: the controller's image changed as an
# operator changes it, by the chart.
rollout_controller_image() {
  helm --kube-context "$(ctx "${UPSTREAM_CLUSTER}")" upgrade mcs deploy/helm/multicluster-services --reuse-values \
    --set controller.image="$1" --wait --timeout 180s >/dev/null
  kc "${UPSTREAM_CLUSTER}" -n mcs-system rollout status deployment/mcs-controller --timeout 180s >/dev/null
}
rollout_controller_downgraded() { rollout_controller_image "${PREVIOUS_CONTROLLER_IMAGE}"; }
rollout_controller_upgraded() { rollout_controller_image mcs-controller:dev; }

# rollout_controller_step LABEL COMMAND...: rollout_step, then nothing the
# controller wrote of web may have been rewritten, and not a request to
# web may have failed (a regression of kube-proxy's conntrack sweep, too,
# shows here).
rollout_controller_step() {
  local label=$1 before after
  before=$(rollout_objects)
  rollout_step "$@"
  after=$(rollout_objects)
  if [[ "${before}" != "${after}" ]]; then
    printf '%s: the controller rewrote what it had written:\nbefore:\n%s\nafter:\n%s\n' "${label}" "${before}" "${after}" >&2
    exit 1
  fi
  if [[ "$(jq '[.[][] | .failed + .broken] | add' "${WORK}/rollout/${label}.json")" != 0 ]]; then
    echo "${label}: requests failed: $(jq -c . "${WORK}/rollout/${label}.json")" >&2
    exit 1
  fi
  echo "${label}: the import (its clusterset IP) and its slices untouched, not a request failed"
}

# rollout_objects: what the controller wrote of web (the import's
# resourceVersion and clusterset IP, the MCS slices' names and
# resourceVersions), to compare across the controller's replacement.
rollout_objects() {
  kc "${UPSTREAM_CLUSTER}" -n "${ROLLOUT_NS}" get serviceimport web -o jsonpath='{.metadata.resourceVersion} {.spec.ips}{"\n"}'
  kc "${UPSTREAM_CLUSTER}" -n "${ROLLOUT_NS}" get endpointslices -l multicluster.kubernetes.io/service-name=web \
    -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.resourceVersion}{"\n"}{end}'
}

# rollout_rules_left: lines of nftables on any node that name an import
# (its clusterset IP, its chains). Stock kube-proxy empties the chains of
# what it does not serve at once and deletes them at a later sync, a
# second or more after (kernels before 6.2 may still see them referenced),
# as for any Service deleted: a Service created and deleted brings that
# sync about first.
rollout_rules_left() {
  local node
  kc "${UPSTREAM_CLUSTER}" -n "${ROLLOUT_NS}" create service clusterip sync-probe --tcp=80:80 >/dev/null
  sleep 2
  kc "${UPSTREAM_CLUSTER}" -n "${ROLLOUT_NS}" delete service sync-probe >/dev/null
  sleep 3
  for node in $(kind get nodes --name "${UPSTREAM_CLUSTER}"); do
    docker exec "${node}" nft list ruleset 2>/dev/null | grep -e '\.clusterset' -e "${ROLLOUT_VIP}" || true
  done | tee "${WORK}/rollout/rules-left.txt" | wc -l
}

rollout_run() {
  rm -rf "${WORK}/rollout"
  mkdir -p "${WORK}/rollout"
  rollout_cluster
  rollout_step 0-stock-at-rest sleep 20
  rollout_step 1-stock-to-ours-gate-off rollout_ours_gate_off
  rollout_step 2-gate-on rollout_gate_on
  rollout_controller_step 2b-controller-downgraded rollout_controller_downgraded
  rollout_controller_step 2c-controller-upgraded rollout_controller_upgraded
  rollout_step 3a-gate-off rollout_gate_off
  rollout_step 3b-ours-to-stock rollout_stock_image
  local left
  left=$(rollout_rules_left)
  echo "after the rollback: ${left} nftables lines name an import on the nodes (${WORK}/rollout/rules-left.txt)"
  rollout_step 4-stock-restarted rollout_stock_restart
  [[ "${left}" == 0 ]] || { echo "rules of ours left after the rollback" >&2; exit 1; }
}

# upstream_run SET: the clusterset's clusters go (the specs get the
# machine), mcs-upstream comes, and the specs run against this project's
# kube-proxy; with --upstream-only also against the stock one.
upstream_run() {
  local set=$1 name status=0
  for name in mcs-a mcs-b "${DERIVED}"; do kind delete cluster --name "${name}" >/dev/null 2>&1 || true; done
  upstream_cluster
  upstream_specs "${set}" ours || status=$?
  chart_lifecycle || status=$?
  if [[ "${UPSTREAM_ONLY}" == true ]]; then
    upstream_stock
    upstream_specs "${set}" stock || true
  fi
  return "${status}"
}

if [[ "${ROLLOUT_ONLY}" == true ]]; then
  rollout_run
  exit 0
fi

if [[ "${CHART_ONLY}" == true ]]; then
  create_cluster "${UPSTREAM_CLUSTER}"
  flat_routes "${UPSTREAM_CLUSTER}"
  setup_member "${UPSTREAM_CLUSTER}" chart
  chart_lifecycle
  exit 0
fi

if [[ "${UPSTREAM_ONLY}" == true ]]; then
  [[ "${UPSTREAM_SET}" != none ]] || { echo "--upstream-only wants conformance or all" >&2; exit 2; }
  upstream_run "${UPSTREAM_SET}"
  exit 0
fi

# require_kept FLAG: mcs-a and mcs-b exist, as a --keep run left them, or
# FLAG fails saying so.
require_kept() {
  local name
  for name in mcs-a mcs-b; do
    exists "${name}" || { echo "$1: cluster ${name} is missing (run hack/kind-e2e.sh --keep --skip-tests first)" >&2; exit 1; }
  done
}

if [[ "${PULL_ONLY}" == true ]]; then
  require_kept --pull-only
  flat_routes
  pull_suite
  exit 0
fi

if [[ "${DERIVED_ONLY}" == true ]]; then
  require_kept --derived-only
  flat_routes
  deploy_controller
  add_derived_member
  step "Derived-mode suite (test/e2e TestDerivedMember): a = kind-mcs-b, native b = kind-mcs-a, derived c = kind-mcs-c"
  suite kind-mcs-b,kind-mcs-a,kind-mcs-c '^TestDerivedMember$'
  exit 0
fi

# A run starts from no cluster of the clusterset: one a run left behind
# (stopped before its clean-up) would be listed as a member, and its
# kubeconfig context points at an apiserver that no longer answers.
for name in "${ALL[@]}"; do
  if exists "${name}"; then
    echo "removing cluster ${name}, left by an earlier run"
    kind delete cluster --name "${name}" >/dev/null
  fi
done
# One after the other: side by side took as long on 2 cores (127 s against
# 129 s for two), each creation and image load being busy, not waiting.
for name in "${NAMES[@]}"; do create_cluster "${name}"; done
flat_routes
for name in "${NAMES[@]}"; do setup_member "${name}"; done
deploy_controller
[[ " ${NAMES[*]} " != *" ${DERIVED} "* ]] || join_member mcs-a "${DERIVED}"

if [[ "${TESTS}" == true ]]; then
  smoke_test
  step "End-to-end suite (test/e2e) against kind-mcs-b (a) and kind-mcs-a (b), the kind-only tests and the dual-stack cases"
  # mcs-c is created and set up while the suite runs, and joins after it.
  beside=false
  [[ " ${NAMES[*]} " == *" ${DERIVED} "* ]] || { create_beside "${DERIVED}"; beside=true; }
  suite kind-mcs-b,kind-mcs-a '^TestMultiClusterServices$|^TestKindCluster|^TestDualStack$'
  if [[ "${beside}" == true ]]; then
    wait_created
    flat_routes
    join_member mcs-a "${DERIVED}"
  fi
  step "Derived-mode suite (test/e2e TestDerivedMember): a = kind-mcs-b, native b = kind-mcs-a, derived c = kind-mcs-c"
  suite kind-mcs-b,kind-mcs-a,kind-mcs-c '^TestDerivedMember$'
  # mcs-a and mcs-b run the suites again in pull mode; mcs-c goes first
  # (make test runs the derived cases in pull mode on the local
  # clusterset, a minute beside the other tests where kind would add
  # about five; --pull-only on kept clusters runs them here).
  kind delete cluster --name "${DERIVED}" >/dev/null
  pull_suite
fi

if [[ "${TESTS}" == true && "${UPSTREAM_SET}" != none ]]; then
  upstream_run "${UPSTREAM_SET}"
fi
