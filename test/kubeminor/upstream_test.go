package kubeminor

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestUpstreamSpecsAreThePinnedRelease: Kubernetes' sig-network specs
// (test/upstream, run against our kube-proxy on kind) are those of the
// release the main module pins, every staging module at its v0 twin: a
// release moved in go.mod alone would test today's kube-proxy with
// yesterday's specs.
func TestUpstreamSpecsAreThePinnedRelease(t *testing.T) {
	root := repoRoot(t)
	pinned := pinnedRelease(t, root)
	staging := "v0." + strings.TrimPrefix(pinned, "v1.")
	upstream, err := os.ReadFile(filepath.Join(root, "test", "upstream", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^(require |\t)k8s.io/kubernetes ` + regexp.QuoteMeta(pinned) + `$`).Match(upstream) {
		t.Errorf("test/upstream/go.mod does not require k8s.io/kubernetes %s, the pinned release", pinned)
	}
	replaces := regexp.MustCompile(`(?m)^\t(k8s.io/[a-z-]+) => k8s.io/[a-z-]+ (v[0-9a-z.-]+)$`).FindAllSubmatch(upstream, -1)
	if len(replaces) < 20 {
		t.Fatalf("test/upstream/go.mod replaces %d staging modules, want upstream's whole list", len(replaces))
	}
	for _, r := range replaces {
		if string(r[2]) != staging {
			t.Errorf("test/upstream/go.mod: %s at %s, want %s (the pinned release's)", r[1], r[2], staging)
		}
	}
}
