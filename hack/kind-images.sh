#!/usr/bin/env bash
# Builds every image the kind path runs, on this machine, from Go modules
# and Debian packages only (no registry is reachable from the machines we
# run on, and nothing may be pulled):
#
#   mcs-kind/node:<k8s version>    the kind node image of the pinned
#                                  Kubernetes version, as `kind build
#                                  node-image` would assemble it
#   registry.k8s.io/...            the control-plane images, tagged exactly
#                                  as `kubeadm config images list` prints
#                                  them, imported into the node image's
#                                  containerd (also kept in Docker)
#   mcs-kube-proxy:dev             this project's kube-proxy, a drop-in for
#   mcs-controller:dev             upstream's image, the mcs-controller and
#   mcs-kube-proxy/echoserver:dev  the suites' test image
#                                  (kind-config/Dockerfile)
#   mcs-kube-proxy:vX.Y.Z-mcs.dev  this project's kube-proxy of the pinned
#                                  release (the same image as :dev) and of
#                                  each release the kind clusterset also
#                                  runs (MCS_KIND_KUBE_PROXY_RELEASES, 1.36
#                                  by default: hack/kind-e2e.sh runs it in
#                                  mcs-b; docs/kubernetes-versions.md)
#   registry.k8s.io/e2e-test-images/...
#                                  with --upstream-e2e: the test images
#                                  Kubernetes' sig-network specs run
#                                  (agnhost, busybox, nginx,
#                                  glibc-dns-testing), under the names the
#                                  pinned release's specs ask for, and
#                                  the specs' binary (test/upstream)
#
# Usage: hack/kind-images.sh [--no-build] [--upstream-e2e] | --remove   (needs a Docker daemon: hack/kind-docker.sh up)
#   --no-build      take the project's binaries in _output/bin as they are
#                   (built already, e.g. by `make binaries`)
#   --upstream-e2e  also what hack/kind-e2e.sh's upstream specs need
#   --remove        delete every image it builds instead
#
# The binaries come from the project's own builds and build cache
# (hack/build.sh, hack/build-tools.sh, the same go_build for kubelet,
# kubeadm and kube-scheduler) and from hack/tools/kind (containerd, runc,
# crictl, the CNI plugins, kind). Debian root file systems come from
# debootstrap; kind's base-image files (entrypoint, systemd units,
# containerd configuration) from the kind module in the Go module cache.
# Every image carries a label with the hash of its inputs and is rebuilt
# only when they change, so a warm run only relinks and checks.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"
source hack/lib-build.sh

K8S_VERSION=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
BIN=_output/bin
# shellcheck disable=SC2206 # a list of minors, e.g. "1.35 1.36"
RELEASES=(${MCS_KIND_KUBE_PROXY_RELEASES-1.36})
WORK=_output/kind
KBIN=${WORK}/bin
# The Debian root file systems depend on the package lists only, not on
# the tree: they are kept beside the machine's Go caches, so that a fresh
# clone does not debootstrap again (MCS_KIND_CACHE=an empty directory
# measures a cold run).
ROOTFS=${MCS_KIND_CACHE:-${XDG_CACHE_HOME:-${HOME:?}/.cache}/mcs-kind}
SUITE=bookworm
# The node's systemd must be older than 256 on hosts with cgroup v1:
# bookworm's 252 boots there, trixie's does not.
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
# MCS_KIND_NODE_IMAGE names a node image of the user's (a published
# kindest/node of the pinned version, with a registry): then it is not
# built here.
NODE_IMAGE=${MCS_KIND_NODE_IMAGE:-mcs-kind/node:${K8S_VERSION}}
NET_BASE=mcs-kind/debian-net:${SUITE}
LABEL=mcs-kind.inputs
mkdir -p "${WORK}" "${KBIN}" "${ROOTFS}"

step() { echo "==> $*"; }

# image_current NAME HASH: NAME exists, built from inputs HASH.
image_current() {
  [[ "$(docker image inspect -f "{{index .Config.Labels \"${LABEL}\"}}" "$1" 2>/dev/null)" == "$2" ]]
}

hash_of() { cat "$@" | sha256sum | cut -d' ' -f1; }

# --- binaries ----------------------------------------------------------

binaries() {
  if [[ "${NO_BUILD}" == true ]]; then
    step "Binaries: those of _output/bin as they are (--no-build)"
    local b
    for b in kube-proxy kube-proxy-upstream mcs-controller echoserver kube-apiserver kube-controller-manager kubectl kubelet kubeadm kube-scheduler etcd coredns; do
      [[ -x "${BIN}/${b}" ]] || { echo "--no-build: ${BIN}/${b} is missing" >&2; exit 1; }
    done
    for r in "${RELEASES[@]}"; do
      [[ -x "_output/v${r}/bin/kube-proxy" ]] || { echo "--no-build: _output/v${r}/bin/kube-proxy is missing" >&2; exit 1; }
    done
    runtime_binaries
    return
  fi
  step "Binaries (the project's build cache; only what changed compiles)"
  hack/build.sh kube-proxy kube-proxy-upstream mcs-controller echoserver kube-apiserver kube-controller-manager kubectl
  for r in "${RELEASES[@]}"; do
    KUBERNETES_VERSION=${r} hack/build.sh kube-proxy
  done
  # The node's own Kubernetes binaries, from this module's graph
  # (go.mod's tools) with the same flags, so they share its packages.
  local start=${SECONDS}
  go_build "$(kube_ldflags "${K8S_VERSION}")" "${BIN}/" \
    k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubeadm k8s.io/kubernetes/cmd/kube-scheduler
  echo "built kubelet kubeadm kube-scheduler in $((SECONDS - start))s"
  hack/build-tools.sh etcd coredns
  runtime_binaries
}

# runtime_binaries builds hack/tools/kind's programs, once per change of
# that module or of Go.
runtime_binaries() {
  local hash
  hash=$( (cat hack/tools/kind/go.mod hack/tools/kind/go.sum hack/tools/kind/*/*.go "${BASH_SOURCE[0]}" hack/lib-build.sh; go version) | sha256sum | cut -d' ' -f1)
  if [[ "$(cat "${KBIN}/.stamp" 2>/dev/null)" == "${hash}" ]]; then
    echo "kind, containerd, runc, crictl, CNI plugins: up to date (${KBIN})"
    return
  fi
  rm -f "${KBIN}/.stamp"
  local start=${SECONDS} tools
  tools=$(cd hack/tools/kind && GOWORK=off go list -m -f '{{.Path}}@{{.Version}}' github.com/containerd/containerd/v2 sigs.k8s.io/cri-tools github.com/containernetworking/plugins | tr '\n' ' ')
  local containerd=${tools%% *} crictl plugins
  crictl=$(echo "${tools}" | cut -d' ' -f2)
  plugins=$(echo "${tools}" | cut -d' ' -f3)
  (
    export GOWORK=off
    cd hack/tools/kind
    # The optional snapshotters are never used in a kind node (kind's own
    # build leaves them out too).
    go_build "-X github.com/containerd/containerd/v2/version.Version=${containerd#*@} -X sigs.k8s.io/cri-tools/pkg/version.Version=${crictl#*@} -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=${plugins#*@}" \
      "${ROOT}/${KBIN}/" -tags "no_aufs no_zfs no_btrfs no_devmapper" \
      sigs.k8s.io/kind \
      github.com/containerd/containerd/v2/cmd/containerd \
      github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
      github.com/containerd/containerd/v2/cmd/ctr \
      sigs.k8s.io/cri-tools/cmd/crictl \
      github.com/containernetworking/plugins/plugins/ipam/host-local \
      github.com/containernetworking/plugins/plugins/main/loopback \
      github.com/containernetworking/plugins/plugins/main/ptp \
      github.com/containernetworking/plugins/plugins/meta/portmap \
      ./pause ./runc-capfilter
    # runc's nsenter is C: cgo, and seccomp through Debian's libseccomp
    # (libseccomp-dev here, libseccomp2 in the node).
    CGO_ENABLED=1 go_build "" "${ROOT}/${KBIN}/runc" -tags seccomp github.com/opencontainers/runc
  )
  echo "${hash}" >"${KBIN}/.stamp"
  echo "built kind, containerd, runc, crictl, CNI plugins in $((SECONDS - start))s"
}

# --- Debian root file systems -------------------------------------------

# rootfs NAME PACKAGES... debootstraps bookworm (minbase plus PACKAGES)
# into ${ROOTFS}/rootfs-NAME.tar once per package list.
rootfs() {
  local name=$1
  shift
  local tar="${ROOTFS}/rootfs-${name}.tar" hash
  hash=$(echo "${SUITE} ${MIRROR} $*" | sha256sum | cut -d' ' -f1)
  if [[ -f "${tar}" && "$(cat "${tar}.stamp" 2>/dev/null)" == "${hash}" ]]; then
    return
  fi
  step "debootstrap ${SUITE} (${name}): $*"
  command -v debootstrap >/dev/null || hack/install-deps.sh test
  local dir start=${SECONDS}
  dir=$(mktemp -d "${WORK}/rootfs.XXXXXX")
  mkdir -p "${ROOTFS}/debs"
  debootstrap --variant=minbase --cache-dir="$(realpath "${ROOTFS}/debs")" --include="$(tr ' ' ',' <<<"$*")" "${SUITE}" "${dir}" "${MIRROR}" >"${WORK}/debootstrap-${name}.log"
  # Nothing of the build machine's identity or package lists in the image;
  # every node gets its own machine-id from kind's entrypoint.
  rm -rf "${dir}"/var/lib/apt/lists/* "${dir}"/var/cache/apt/*.bin "${dir}"/var/log/* "${dir}/var/lib/dbus/machine-id"
  : >"${dir}/etc/machine-id"
  tar -C "${dir}" --numeric-owner -cf "${tar}.tmp" .
  rm -rf "${dir}"
  mv "${tar}.tmp" "${tar}"
  echo "${hash}" >"${tar}.stamp"
  echo "debootstrap ${name}: $((SECONDS - start))s"
}

# net_base: what kube-proxy's image needs beside the binary (upstream's
# image has the same tools).
NET_PACKAGES=(nftables iptables conntrack iproute2 ca-certificates)
# node: kind's base image packages that a node here uses (kind installs
# NFS/iSCSI and fuse-overlayfs too, for storage tests and rootless hosts).
NODE_PACKAGES=(systemd "${NET_PACKAGES[@]}" ethtool util-linux mount kmod libseccomp2 pigz bash jq procps e2fsprogs)

net_base() {
  rootfs net "${NET_PACKAGES[@]}"
  local hash
  hash=$(cat "${ROOTFS}/rootfs-net.tar.stamp")
  image_current "${NET_BASE}" "${hash}" && return
  docker import --change "LABEL ${LABEL}=${hash}" "${ROOTFS}/rootfs-net.tar" "${NET_BASE}" >/dev/null
}

# --- images of static binaries and kube-proxy ----------------------------

# binary_image TAG BINARY PATH_IN_IMAGE BASE [ENTRYPOINT]
binary_image() {
  local tag=$1 binary=$2 path=$3 base=$4 entrypoint=${5:-} hash dir
  hash=$( (sha256sum "${binary}"; echo "${path} ${base} ${entrypoint}"; docker image inspect -f '{{.Id}}' "${base}" 2>/dev/null || true) | sha256sum | cut -d' ' -f1)
  image_current "${tag}" "${hash}" && return
  dir=$(mktemp -d "${WORK}/context.XXXXXX")
  ln "${binary}" "${dir}/$(basename "${path}")" 2>/dev/null || cp "${binary}" "${dir}/$(basename "${path}")"
  {
    echo "FROM ${base}"
    echo "COPY $(basename "${path}") ${path}"
    [[ "${base}" == scratch ]] && echo 'ENV PATH=/usr/local/bin:/usr/bin:/bin'
    [[ -n "${entrypoint}" ]] && echo "ENTRYPOINT [\"${path}\"]"
    echo "LABEL ${LABEL}=${hash}"
  } >"${dir}/Dockerfile"
  docker build -q -t "${tag}" "${dir}" >/dev/null
  rm -rf "${dir}"
  echo "built ${tag}"
}

# control_plane_images builds what kubeadm of the pinned version runs, tagged
# as it names them, and prints the tags.
control_plane_images() {
  local image name
  for image in $("${BIN}/kubeadm" config images list --kubernetes-version "${K8S_VERSION}"); do
    name=${image##*/}
    name=${name%%:*}
    case "${name}" in
      kube-apiserver | kube-controller-manager | kube-scheduler)
        binary_image "${image}" "${BIN}/${name}" "/usr/local/bin/${name}" scratch ;;
      # Upstream's kube-proxy, unmodified, on a Debian base with the
      # tools it runs: the stock image kubeadm's DaemonSet runs in the
      # derived member (mcs-c), the gate-off comparison's image, and the
      # base of this project's (kind-config/Dockerfile).
      kube-proxy) binary_image "${image}" "${BIN}/kube-proxy-upstream" /usr/local/bin/kube-proxy "${NET_BASE}" ;;
      etcd) binary_image "${image}" "${BIN}/etcd" /usr/local/bin/etcd scratch ;;
      # kubeadm's CoreDNS Deployment runs the image's entrypoint. The
      # binary is CoreDNS 1.15 (hack/tools/coredns), which serves
      # clusterset.local; it is also tagged with its own version.
      coredns)
        binary_image "${image}" "${BIN}/coredns" /coredns scratch entrypoint
        docker tag "${image}" "${image%:*}:v$("${BIN}/coredns" -version | sed -n 's/^CoreDNS-//p' | head -1)" ;;
      pause) binary_image "${image}" "${KBIN}/pause" /pause scratch entrypoint ;;
      *) echo "kubeadm names an image this script does not build: ${image}" >&2; exit 1 ;;
    esac
    echo "${image}" >>"${WORK}/node-images.list"
  done
  local coredns
  coredns=$(grep /coredns: "${WORK}/node-images.list")
  echo "${coredns%:*}:v$("${BIN}/coredns" -version | sed -n 's/^CoreDNS-//p' | head -1)" >>"${WORK}/node-images.list"
}

# project_images builds kind-config/Dockerfile's targets from the binaries
# hack/build.sh made (the Dockerfile's context is a directory holding just
# them; its source-build targets are for machines with a registry).
project_images() {
  local context="${WORK}/context" target tag
  rm -rf "${context}"
  mkdir -p "${context}"
  for b in kube-proxy mcs-controller kubectl-mcs echoserver; do ln "${BIN}/${b}" "${context}/${b}"; done
  for target in kube-proxy:mcs-kube-proxy:dev mcs-controller:mcs-controller:dev echoserver:mcs-kube-proxy/echoserver:dev; do
    tag=${target#*:}
    target=${target%%:*}
    docker build -q -f kind-config/Dockerfile --target "${target}" -t "${tag}" "${context}" >/dev/null
    echo "built ${tag}"
  done
  docker tag mcs-kube-proxy:dev "mcs-kube-proxy:${K8S_VERSION}-mcs.dev"
  # Each other release's kube-proxy, on the same base (the tools it runs,
  # nft and iptables, are the same).
  local r
  for r in "${RELEASES[@]}"; do
    rm -f "${context}/kube-proxy"
    ln "_output/v${r}/bin/kube-proxy" "${context}/kube-proxy"
    tag=$(release_image "${r}")
    docker build -q -f kind-config/Dockerfile --target kube-proxy -t "${tag}" "${context}" >/dev/null
    echo "built ${tag}"
  done
  rm -rf "${context}"
}


# --- the node image ------------------------------------------------------

kind_files() {
  (cd hack/tools/kind && GOWORK=off go mod download sigs.k8s.io/kind && GOWORK=off go list -m -f '{{.Dir}}' sigs.k8s.io/kind)
}

node_image() {
  rootfs node "${NODE_PACKAGES[@]}"
  local kind_dir images hash
  kind_dir=$(kind_files)
  images=$(while read -r i; do docker image inspect -f '{{.Id}}' "${i}"; done <"${WORK}/node-images.list")
  hash=$( (cat "${ROOTFS}/rootfs-node.tar.stamp" kind-config/node/* "${BASH_SOURCE[0]}"; echo "${kind_dir} ${images}"
    sha256sum "${BIN}"/{kubelet,kubeadm,kubectl} "${KBIN}"/{containerd,containerd-shim-runc-v2,ctr,runc,crictl,host-local,loopback,ptp,portmap}) |
    sha256sum | cut -d' ' -f1)
  if image_current "${NODE_IMAGE}" "${hash}"; then
    echo "${NODE_IMAGE}: up to date"
    return
  fi
  step "Node image ${NODE_IMAGE}"
  local start=${SECONDS} dir
  dir=$(mktemp -d "${WORK}/node.XXXXXX")
  tar -C "${dir}" -xf "${ROOTFS}/rootfs-node.tar"

  # kind's base image files, from the kind module, as its base image
  # installs them (scripts 0755, everything else 0644).
  local files="${kind_dir}/images/base/files"
  cp -r --no-preserve=mode "${files}/usr" "${files}/etc" "${files}/kind" "${dir}/"
  chmod 0755 "${dir}"/usr/local/bin/* "${dir}"/kind/bin/* "${dir}/kind" "${dir}/kind/bin"
  # Only the services kind enables: systemd in a container starts nothing
  # else; the kernel log belongs to the host.
  rm -f "${dir}"/lib/systemd/system/multi-user.target.wants/* "${dir}"/etc/systemd/system/*.wants/* \
    "${dir}"/lib/systemd/system/local-fs.target.wants/* "${dir}"/lib/systemd/system/sockets.target.wants/*udev* \
    "${dir}"/lib/systemd/system/sockets.target.wants/*initctl* "${dir}"/lib/systemd/system/basic.target.wants/*
  find "${dir}/lib/systemd/system/sysinit.target.wants/" -name systemd-tmpfiles-setup.service -delete
  echo "ReadKMsg=no" >>"${dir}/etc/systemd/journald.conf"
  ln -sf /usr/lib/systemd/systemd "${dir}/sbin/init"
  chroot "${dir}" systemctl enable kubelet.service containerd.service undo-mount-hacks.service >/dev/null 2>&1
  chroot "${dir}" systemctl mask systemd-binfmt.service >/dev/null 2>&1
  mkdir -p "${dir}/etc/kubernetes/manifests" "${dir}/opt/cni/bin" "${dir}/kind/manifests"

  install -m 0755 "${KBIN}"/{containerd,containerd-shim-runc-v2,ctr,crictl} "${dir}/usr/local/bin/"
  install -m 0755 "${KBIN}/runc" "${dir}/usr/local/sbin/runc"
  install -m 0755 "${KBIN}"/{host-local,loopback,ptp,portmap} "${dir}/opt/cni/bin/"
  install -m 0755 "${BIN}"/{kubelet,kubeadm,kubectl} "${dir}/usr/bin/"
  echo "${K8S_VERSION}" >"${dir}/kind/version"
  install -m 0644 kind-config/node/default-cni.yaml "${dir}/kind/manifests/default-cni.yaml"

  # containerd: kind's configuration, with the pause image kubeadm names,
  # restrict_oom_score_adj (runc cannot lower a sandbox's score without
  # CAP_SYS_RESOURCE, which the hosts that need runc-capfilter lack: the
  # control plane would never start), and the pod network's template.
  local pause config="${dir}/etc/containerd/config.toml"
  pause=$(grep /pause: "${WORK}/node-images.list")
  sed -i -e "s|^\(\s*sandbox_image = \).*|\1\"${pause}\"|" \
    -e 's|^\(\s*restrict_oom_score_adj = \)false|\1true|' "${config}"
  cat kind-config/node/containerd.toml >>"${config}"
  grep -q "sandbox_image = \"${pause}\"" "${config}" && grep -q 'restrict_oom_score_adj = true' "${config}" || {
    echo "kind's containerd configuration changed shape: ${config}" >&2
    exit 1
  }
  install -m 0644 kind-config/node/cni.template "${dir}/etc/containerd/cni.template"
  # The runtime spec kind's containerd configuration names: containerd's
  # default, with kind's product-files hook and without rlimits.
  "${KBIN}/ctr" oci spec |
    jq '.hooks.createContainer[.hooks.createContainer | length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' |
    jq 'del(.process.rlimits)' >"${dir}/etc/containerd/cri-base.json"

  import_node_images "${dir}"

  docker rmi "${NODE_IMAGE}-rootfs" >/dev/null 2>&1 || true
  tar -C "${dir}" --numeric-owner -c . | docker import \
    --change 'ENV container=docker' \
    --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' - "${NODE_IMAGE}-rootfs" >/dev/null
  rm -rf "${dir}"
  # `docker import` refuses STOPSIGNAL; systemd stops on SIGRTMIN+3.
  printf 'FROM %s\nSTOPSIGNAL SIGRTMIN+3\nLABEL %s=%s\n' "${NODE_IMAGE}-rootfs" "${LABEL}" "${hash}" |
    docker build -q -t "${NODE_IMAGE}" - >/dev/null
  docker rmi "${NODE_IMAGE}-rootfs" >/dev/null
  echo "node image ${NODE_IMAGE}: $((SECONDS - start))s"
}

# import_node_images DIR puts every control-plane image into the node's
# containerd store, as kind's node-image build does (pinned, not unpacked),
# with a containerd of the same build run on the host against DIR's store
# (no CRI, nothing started).
import_node_images() {
  local dir=$1 tmp pid
  tmp=$(mktemp -d /tmp/mcs-kind-containerd.XXXXXX)
  cat >"${tmp}/config.toml" <<EOF
version = 3
root = "${ROOT}/${dir}/var/lib/containerd"
state = "${tmp}/state"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime", "io.containerd.cri.v1.images", "io.containerd.internal.v1.opt", "io.containerd.nri.v1.nri", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.blockfile", "io.containerd.snapshotter.v1.erofs"]
[grpc]
  address = "${tmp}/containerd.sock"
[ttrpc]
  address = "${tmp}/containerd.sock.ttrpc"
[debug]
  address = "${tmp}/debug.sock"
EOF
  "${KBIN}/containerd" --config "${tmp}/config.toml" >"${tmp}/containerd.log" 2>&1 &
  pid=$!
  for _ in $(seq 50); do
    "${KBIN}/ctr" --address "${tmp}/containerd.sock" version >/dev/null 2>&1 && break
    sleep 0.2
  done
  local status=0
  # shellcheck disable=SC2046
  docker save $(sort -u "${WORK}/node-images.list") |
    "${KBIN}/ctr" --address "${tmp}/containerd.sock" -n k8s.io images import \
      --label=io.cri-containerd.pinned=pinned --all-platforms --no-unpack --digests - >/dev/null || status=$?
  kill "${pid}"
  wait "${pid}" 2>/dev/null || true
  if [[ ${status} -ne 0 ]]; then
    cat "${tmp}/containerd.log" >&2
    rm -rf "${tmp}"
    exit "${status}"
  fi
  rm -rf "${tmp}"
}

# --- Kubernetes' own sig-network specs (test/upstream) --------------------

UPSTREAM=_output/upstream
# What upstream's agnhost, busybox, nginx and glibc-dns-testing images
# carry that the sig-network specs run (upstream builds them on Alpine and
# Debian; these are Debian's). GNU wget: the specs run `wget -T N`, on
# which bookworm's busybox 1.35 crashes.
E2E_PACKAGES=(bash curl wget netcat-openbsd bind9-dnsutils iproute2 iputils-ping socat procps nginx ca-certificates)

# upstream_binaries builds the specs' test binary, agnhost and the ginkgo
# command that runs the specs side by side, from the test/upstream module
# (the pinned k8s.io/kubernetes and the ginkgo it requires).
upstream_binaries() {
  mkdir -p "${UPSTREAM}"
  if [[ "${NO_BUILD}" == true && -x "${UPSTREAM}/sig-network.test" && -x "${UPSTREAM}/agnhost" && -x "${UPSTREAM}/ginkgo" ]]; then
    return
  fi
  step "Binaries: Kubernetes' sig-network specs, agnhost and ginkgo (test/upstream)"
  local start=${SECONDS} out
  out=$(realpath "${UPSTREAM}")
  (cd test/upstream && go test -c -ldflags "-s -w $(kube_ldflags "${K8S_VERSION}")" -o "${out}/sig-network.test" . &&
    go_build "$(kube_ldflags "${K8S_VERSION}")" "${out}/agnhost" k8s.io/kubernetes/test/images/agnhost &&
    go_build "" "${out}/ginkgo" github.com/onsi/ginkgo/v2/ginkgo)
  echo "built in $((SECONDS - start))s"
}

# upstream_images builds the test images the specs run, under the names
# the specs' binary prints (the pinned release's
# test/utils/image/manifest.go), from one Debian root file system: the
# nodes never pull.
upstream_images() {
  rootfs e2e "${E2E_PACKAGES[@]}"
  local base=mcs-kind/debian-e2e:${SUITE} hash line role image dir
  hash=$(cat "${ROOTFS}/rootfs-e2e.tar.stamp")
  image_current "${base}" "${hash}" ||
    docker import --change "LABEL ${LABEL}=${hash}" "${ROOTFS}/rootfs-e2e.tar" "${base}" >/dev/null
  : >"${WORK}/upstream-images.list"
  while IFS= read -r line; do
    role=${line%%=*}
    image=${line#*=}
    case "${role}" in
      agnhost)
        # agnhost's entrypoint and default command, the second name some
        # specs call it by, and the certificate porter serves its TLS
        # ports with (the release's own, from its module).
        dir=$(mktemp -d "${WORK}/context.XXXXXX")
        ln "${UPSTREAM}/agnhost" "${dir}/agnhost" 2>/dev/null || cp "${UPSTREAM}/agnhost" "${dir}/agnhost"
        mkdir "${dir}/uploads"
        cp "$(cd test/upstream && go list -m -f '{{.Dir}}' k8s.io/kubernetes)"/test/images/agnhost/porter/localhost.{crt,key} "${dir}/"
        hash=$( (sha256sum "${UPSTREAM}/agnhost" "${dir}"/localhost.*; docker image inspect -f '{{.Id}}' "${base}") | sha256sum | cut -d' ' -f1)
        if ! image_current "${image}" "${hash}"; then
          cat >"${dir}/Dockerfile" <<EOF
FROM ${base}
COPY agnhost /agnhost
COPY agnhost /agnhost-2
COPY uploads /uploads
COPY localhost.crt localhost.key /
ENTRYPOINT ["/agnhost"]
CMD ["pause"]
LABEL ${LABEL}=${hash}
EOF
          docker build -q -t "${image}" "${dir}" >/dev/null
          echo "built ${image}"
        fi
        rm -rf "${dir}" ;;
      busybox) command_image "${image}" "${base}" '["sh"]' ;;
      nginx) command_image "${image}" "${base}" '["nginx", "-g", "daemon off;"]' ;;
      glibc-dns-testing) command_image "${image}" "${base}" '["bash"]' ;;
      # The node's own pause image (kubeadm's), when the specs name the
      # same; another tag of it otherwise.
      pause) docker image inspect "${image}" >/dev/null 2>&1 || docker tag "$(grep /pause: "${WORK}/node-images.list")" "${image}" ;;
      *) echo "the specs name a test image this script does not build: ${line}" >&2; exit 1 ;;
    esac
    echo "${image}" >>"${WORK}/upstream-images.list"
  done < <("${UPSTREAM}/sig-network.test" -print-images)
}

# command_image TAG BASE CMD: BASE with its default command CMD (JSON).
command_image() {
  local tag=$1 base=$2 cmd=$3 hash
  hash=$( (docker image inspect -f '{{.Id}}' "${base}"; echo "${cmd}") | sha256sum | cut -d' ' -f1)
  image_current "${tag}" "${hash}" && return
  printf 'FROM %s\nCMD %s\nLABEL %s=%s\n' "${base}" "${cmd}" "${LABEL}" "${hash}" | docker build -q -t "${tag}" - >/dev/null
  echo "built ${tag}"
}

# remove deletes every image this script builds (hack/kind-e2e.sh
# --clean-images on a Docker daemon that is not hack/kind-docker.sh's).
remove() {
  local images
  images=$(docker images --format '{{.Repository}}:{{.Tag}}' --filter "label=${LABEL}")
  # shellcheck disable=SC2086
  docker rmi -f ${images} "${PROJECT_IMAGES[@]}" mcs-kind/probe:latest >/dev/null 2>&1 || true
  images=$(docker images --format '{{.Repository}}:{{.Tag}}' mcs-kube-proxy | grep -- '-mcs\.dev$' || true)
  # shellcheck disable=SC2086
  [[ -z "${images}" ]] || docker rmi -f ${images} >/dev/null 2>&1 || true
}
PROJECT_IMAGES=(mcs-kube-proxy:dev mcs-controller:dev mcs-kube-proxy/echoserver:dev)

NO_BUILD=false
main() {
  local upstream=false
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --remove) remove; return ;;
      --no-build) NO_BUILD=true ;;
      --upstream-e2e) upstream=true ;;
      *) echo "usage: $0 [--no-build] [--upstream-e2e] | --remove" >&2; exit 2 ;;
    esac
    shift
  done
  local start=${SECONDS}
  if ! docker info >/dev/null 2>&1; then
    echo "no Docker daemon answers: run hack/kind-docker.sh up" >&2
    exit 1
  fi
  binaries
  step "Images"
  net_base
  : >"${WORK}/node-images.list"
  control_plane_images
  project_images
  if [[ -n "${MCS_KIND_NODE_IMAGE:-}" ]]; then
    echo "node image: ${NODE_IMAGE} (MCS_KIND_NODE_IMAGE, not built here)"
  else
    node_image
  fi
  if [[ "${upstream}" == true ]]; then
    upstream_binaries
    upstream_images
  fi
  echo "all kind images built in $((SECONDS - start))s"
}

main "$@"
