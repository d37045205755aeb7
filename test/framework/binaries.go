package framework

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// BinDirEnv names the environment variable that overrides where the
// binaries built by hack/build-tools.sh are looked up.
const BinDirEnv = "MCS_BIN_DIR"

// KubeProxyDirEnv names the environment variable that points the tests at
// the kube-proxy binaries of another Kubernetes release
// (_output/v1.MINOR/bin, hack/build.sh with KUBERNETES_VERSION): kube-proxy
// and kube-proxy-upstream are taken from there, everything else from
// BinDir, so that one release's kube-proxy runs against the pinned
// release's control plane, as the version skew policy allows.
const KubeProxyDirEnv = "MCS_KUBE_PROXY_DIR"

// ErrBinaryNotFound is returned (wrapped) by Binary when a binary has not been
// built. Tests use it to skip rather than fail on a machine without them.
var ErrBinaryNotFound = errors.New("binary not found (build it with hack/build-tools.sh)")

// BinDir returns the directory that holds the tool binaries: $MCS_BIN_DIR if
// set, otherwise the first _output/bin found walking up from the working
// directory (go test runs in the package directory, deep inside the repo).
func BinDir() (string, error) {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		return dir, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		candidate := filepath.Join(dir, "_output", "bin")
		if fi, err := os.Stat(candidate); err == nil && fi.IsDir() {
			return candidate, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no _output/bin above %s and $%s is unset: %w", wd, BinDirEnv, ErrBinaryNotFound)
		}
	}
}

// Binary returns the path of the named executable (etcd, kube-apiserver,
// kube-controller-manager, coredns) in BinDir.
func Binary(name string) (string, error) {
	dir, err := BinDir()
	if err != nil {
		return "", err
	}
	if kp := os.Getenv(KubeProxyDirEnv); kp != "" && (name == "kube-proxy" || name == "kube-proxy-upstream") {
		dir = kp
	}
	path := filepath.Join(dir, name)
	fi, err := os.Stat(path)
	if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%s: %w", path, ErrBinaryNotFound)
	}
	return path, nil
}
