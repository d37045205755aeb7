#!/usr/bin/env bash
# Docker for the kind path, on a machine that must not send a packet
# beyond itself and has no registry to pull from.
#
# Usage: hack/kind-docker.sh up | down [--clean-images] | status
#
# up    If no Docker daemon answers, installs Debian's docker.io when
#       dockerd is missing and starts dockerd with a configuration of ours
#       (its data under ${MCS_KIND_DOCKER_ROOT:-/var/lib/mcs-kind/docker},
#       which keeps built images for the next run): no iptables rules, no
#       docker0 bridge, no IP forwarding, and a proxy on a closed local
#       port, so that any pull fails here instead of reaching a registry.
#       If a privileged container then cannot start ("unable to apply
#       caps": this host's capability bounding set lacks CAP_SYS_RESOURCE)
#       it builds hack/tools/kind/runc-capfilter and makes it dockerd's
#       default runtime, and says so. Finally it creates the kind network
#       (bridge mcs-kind0) and the host rule of table inet mcs-kind that
#       drops and counts what that network sends beyond the machine.
# down  Removes the host rule, the kind network and, if up started it,
#       stops dockerd (with --clean-images, also its data: every image).
#       A daemon that was already running is left as it was.
#
# The state of what up changed is kept in ${STATE_DIR}, so that down undoes
# exactly that.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DOCKER_ROOT=${MCS_KIND_DOCKER_ROOT:-/var/lib/mcs-kind/docker}
STATE_DIR=/run/mcs-kind
CONFIG="${STATE_DIR}/daemon.json"
PIDFILE="${STATE_DIR}/dockerd.pid"
# Whether /run/docker existed before our dockerd made it (outside
# STATE_DIR, which down removes first).
HOST_STATE=/run/mcs-kind-docker.state
LOG="${STATE_DIR}/dockerd.log"
# kind uses the network named by KIND_EXPERIMENTAL_DOCKER_NETWORK if it
# exists; ours has a bridge name the host rule can match.
NETWORK=mcs-kind
BRIDGE=mcs-kind0
# Not 172.30.0.0/16: the local clusterset's fabric (test/clusterset) uses
# it, and refuses to start while the host routes it elsewhere.
SUBNET4=172.29.0.0/16
SUBNET6=fd00:6d63:736b::/64
TABLE=mcs-kind
# A privileged container that only prints and exits: the pause image's
# binary (hack/tools/kind/pause), the only image this script needs.
PROBE_IMAGE=mcs-kind/probe:latest

say() { echo "kind-docker: $*"; }
sudo_() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }

docker_answers() { docker info >/dev/null 2>&1; }

install_docker() {
  if command -v dockerd >/dev/null; then
    return
  fi
  say "installing Debian's docker.io (dockerd is missing)"
  # The one installer of Debian packages (hack/deps.txt lists them): it
  # starts no daemon, and disables the stock units under systemd.
  "$(dirname "${BASH_SOURCE[0]}")/install-deps.sh" test
}

# write_config RUNTIME_JSON writes dockerd's configuration; RUNTIME_JSON is
# "" or the runtimes/default-runtime members for the wrapper.
write_config() {
  local runtime=$1
  mkdir -p "${STATE_DIR}" "${DOCKER_ROOT}"
  cat >"${CONFIG}.tmp" <<EOF
{
  "data-root": "${DOCKER_ROOT}",
  "exec-root": "${STATE_DIR}/exec",
  "pidfile": "${PIDFILE}",
  "iptables": false,
  "ip-masq": false,
  "ip-forward": false,
  "bridge": "none",
  "dns": ["127.0.0.1"],
  "storage-driver": "overlay2",
  "log-driver": "json-file"${runtime}
}
EOF
  mv "${CONFIG}.tmp" "${CONFIG}"
}

start_dockerd() {
  write_config ""
  say "starting dockerd (data ${DOCKER_ROOT}, log ${LOG})"
  if [[ -e /run/docker ]]; then echo existed >"${HOST_STATE}"; else echo absent >"${HOST_STATE}"; fi
  # The proxy is a closed local port: dockerd sends a registry request
  # (a pull, or the lookup it makes when asked to run a missing tag) there
  # and fails at once. The containers' DNS is 127.0.0.1 (above), so the
  # embedded DNS forwards nothing beyond the machine either.
  sudo_ env -u NO_PROXY -u no_proxy HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 \
    setsid dockerd --config-file "${CONFIG}" >"${LOG}" 2>&1 </dev/null &
  echo true >"${STATE_DIR}/started"
  for _ in $(seq 60); do
    docker_answers && return
    sleep 0.5
  done
  tail -20 "${LOG}" >&2
  say "dockerd did not answer within 30s" >&2
  exit 1
}

# build_tool NAME builds a program of hack/tools/kind into _output/kind/bin.
build_tool() {
  (
    source "${ROOT}/hack/lib-build.sh"
    export GOWORK=off
    cd "${ROOT}/hack/tools/kind"
    go_build "" "${ROOT}/_output/kind/bin/$1" "./$1"
  )
}

probe_image() {
  if docker image inspect "${PROBE_IMAGE}" >/dev/null 2>&1; then
    return
  fi
  [[ -x "${ROOT}/_output/kind/bin/pause" ]] || build_tool pause
  local dir
  dir=$(mktemp -d)
  cp "${ROOT}/_output/kind/bin/pause" "${dir}/pause"
  printf 'FROM scratch\nCOPY pause /pause\nENTRYPOINT ["/pause"]\n' >"${dir}/Dockerfile"
  docker build -q -t "${PROBE_IMAGE}" "${dir}" >/dev/null
  rm -rf "${dir}"
}

# privileged_fails prints why a privileged container (run, then exec, as
# kind does) cannot start, or nothing.
privileged_fails() {
  local out name=mcs-kind-probe
  docker rm -f "${name}" >/dev/null 2>&1 || true
  if ! out=$(docker run --rm --privileged --cgroupns=private --network none "${PROBE_IMAGE}" -v 2>&1); then
    echo "${out}"
    return
  fi
  docker run -d --name "${name}" --privileged --network none "${PROBE_IMAGE}" >/dev/null 2>&1 || true
  if ! out=$(docker exec --privileged "${name}" /pause -v 2>&1); then
    echo "${out}"
  fi
  docker rm -f "${name}" >/dev/null 2>&1 || true
}

apply_capfilter() {
  local runc
  runc=$(command -v runc || echo /usr/sbin/runc)
  build_tool runc-capfilter
  local wrapper="${STATE_DIR}/runc-capfilter"
  # A copy outside the tree: `make clean` must not pull the runtime from
  # under running containers.
  cp "${ROOT}/_output/kind/bin/runc-capfilter" "${wrapper}"
  write_config ",
  \"runtimes\": {\"runc-capfilter\": {\"path\": \"${wrapper}\", \"runtimeArgs\": [\"--runtime=${runc}\"]}},
  \"default-runtime\": \"runc-capfilter\""
  # dockerd re-reads its runtimes on SIGHUP.
  sudo_ kill -HUP "$(cat "${PIDFILE}")"
  sleep 1
  echo true >"${STATE_DIR}/capfilter"
}

ensure_privileged() {
  probe_image
  local why
  why=$(privileged_fails)
  if [[ -z "${why}" ]]; then
    if [[ "$(cat "${STATE_DIR}/capfilter" 2>/dev/null)" == true ]]; then
      say "privileged containers start (with the runtime wrapper runc-capfilter, installed when they did not)"
    else
      say "privileged containers start: no runtime workaround needed"
    fi
    return
  fi
  if ! grep -q "unable to apply caps" <<<"${why}"; then
    echo "${why}" >&2
    say "a privileged container does not start, for a reason the CAP_SYS_RESOURCE workaround does not cover" >&2
    exit 1
  fi
  if [[ "$(cat "${STATE_DIR}/started" 2>/dev/null)" != true ]]; then
    say "privileged containers fail with 'unable to apply caps' on a daemon this script did not start: make hack/tools/kind/runc-capfilter its default runtime" >&2
    exit 1
  fi
  say "privileged containers fail with 'unable to apply caps' (the host's capability bounding set lacks CAP_SYS_RESOURCE):" \
    "applying the workaround, runtime wrapper runc-capfilter as dockerd's default runtime"
  apply_capfilter
  why=$(privileged_fails)
  if [[ -n "${why}" ]]; then
    echo "${why}" >&2
    say "privileged containers still fail with the wrapper" >&2
    exit 1
  fi
  say "privileged containers start with the wrapper"
}

ensure_network() {
  if ! docker network inspect "${NETWORK}" >/dev/null 2>&1; then
    docker network create -d bridge --subnet "${SUBNET4}" --ipv6 --subnet "${SUBNET6}" \
      -o com.docker.network.bridge.name="${BRIDGE}" \
      -o com.docker.network.bridge.enable_ip_masquerade=false "${NETWORK}" >/dev/null
  fi
  # Anything the kind network routes through this host (its nodes' default
  # route: frames to the bridge's own address) that is not for the host
  # itself is dropped here and counted: no packet of the clusters leaves
  # the machine. Frames bridged between nodes (node to node, cluster to
  # cluster) are addressed to another node and pass; with br_netfilter
  # they also cross these hooks, as the host's (pkttype cannot tell).
  local mac
  mac=$(cat "/sys/class/net/${BRIDGE}/address")
  sudo_ nft -f - <<EOF
table inet ${TABLE}
delete table inet ${TABLE}
table inet ${TABLE} {
  counter beyond_machine {}
  chain prerouting {
    type filter hook prerouting priority raw; policy accept;
    iifname "${BRIDGE}" ether daddr ${mac} fib daddr type != local counter name beyond_machine drop
  }
  chain forward {
    type filter hook forward priority filter; policy accept;
    iifname "${BRIDGE}" oifname != "${BRIDGE}" counter name beyond_machine drop
  }
}
EOF
  say "kind network ${NETWORK} (bridge ${BRIDGE}); host rule: table inet ${TABLE} drops what it sends beyond the machine"
}

up() {
  mkdir -p "${STATE_DIR}"
  if docker_answers; then
    if [[ "$(cat "${STATE_DIR}/started" 2>/dev/null)" == true ]]; then
      say "dockerd of an earlier run answers (${CONFIG})"
    else
      say "using the Docker daemon that answers (its configuration is left as it is)"
    fi
  else
    install_docker
    start_dockerd
  fi
  ensure_privileged
  ensure_network
}

down() {
  local clean_images=false
  [[ "${1:-}" == --clean-images ]] && clean_images=true
  sudo_ nft delete table inet "${TABLE}" 2>/dev/null || true
  if docker_answers; then
    docker network rm "${NETWORK}" >/dev/null 2>&1 || true
  fi
  if [[ "$(cat "${STATE_DIR}/started" 2>/dev/null)" == true ]]; then
    if [[ -f "${PIDFILE}" ]]; then
      local pid
      pid=$(cat "${PIDFILE}")
      sudo_ kill "${pid}" 2>/dev/null || true
      for _ in $(seq 60); do
        [[ -e "/proc/${pid}" ]] || break
        sleep 0.5
      done
    fi
    # dockerd bind-mounts its data root on itself (private propagation)
    # and leaves the mount when it stops.
    if mountpoint -q "${DOCKER_ROOT}" 2>/dev/null; then
      sudo_ umount "${DOCKER_ROOT}" || true
    fi
    if [[ "${clean_images}" == true ]]; then
      say "removing dockerd's data (every image) under ${DOCKER_ROOT}"
      sudo_ rm -rf "${DOCKER_ROOT}"
    fi
    sudo_ rm -rf "${STATE_DIR}"
    # dockerd keeps its plugin sockets here whatever its exec-root.
    if [[ "$(cat "${HOST_STATE}" 2>/dev/null)" == absent ]]; then
      sudo_ rm -rf /run/docker
    fi
    sudo_ rm -f "${HOST_STATE}"
    say "dockerd stopped; its configuration and runtime wrapper removed"
  elif [[ "${clean_images}" == true ]]; then
    say "the Docker daemon is not ours: hack/kind-e2e.sh removes the images it built, nothing else" >&2
  fi
}

case "${1:-}" in
  up) up ;;
  down) shift; down "$@" ;;
  status)
    docker_answers && docker info --format 'dockerd {{.ServerVersion}}, default runtime {{.DefaultRuntime}}'
    sudo_ nft list table inet "${TABLE}" 2>/dev/null || echo "no table inet ${TABLE}"
    ;;
  *) echo "usage: $0 up | down [--clean-images] | status" >&2; exit 2 ;;
esac
