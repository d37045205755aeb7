# shellcheck shell=bash
# Sourced by the clusterset scripts: makes sure the binaries they run exist.

# ensure_binaries builds the pinned tools and kube-proxy when missing (a
# cold build takes several minutes; both scripts keep what they built), and
# the clusterset command itself, which is quick when it is up to date.
ensure_binaries() {
  local missing=()
  for b in etcd kube-apiserver kube-controller-manager coredns; do
    [[ -x "_output/bin/${b}" ]] || missing+=("${b}")
  done
  if [[ ${#missing[@]} -gt 0 ]]; then
    echo "building ${missing[*]} (first run only) ..."
    hack/build-tools.sh "${missing[@]}"
  fi
  if [[ ! -x _output/bin/kube-proxy ]]; then
    hack/build.sh kube-proxy
  fi
  hack/build.sh clusterset >/dev/null
}
