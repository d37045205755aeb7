package clusterset

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
)

// repoFile returns the path of a file of the repository (kind-config/...),
// which the harness reads at run time rather than embedding, so that the
// manifests users deploy and the ones the harness uses are the same files.
// The repository is found above the working directory (go test runs in the
// package's directory) or above the binaries' directory (_output/bin).
func repoFile(elem ...string) (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if bin, err := framework.BinDir(); err == nil {
		starts = append(starts, bin)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	rel := filepath.Join(elem...)
	for _, start := range starts {
		for dir := start; ; dir = filepath.Dir(dir) {
			candidate := filepath.Join(dir, rel)
			if _, err := os.Stat(candidate); err == nil {
				return candidate, nil
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	return "", fmt.Errorf("%s not found above %v", rel, starts)
}
