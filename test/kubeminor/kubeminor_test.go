// Package kubeminor tests hack/kube-minor.sh --check, which tells whether
// every Kubernetes release this tree builds is the newest patch the module
// proxy serves, against a module proxy of its own: a directory served as
// GOPROXY=file://, holding exactly the versions each case says, listed
// or not (the real proxy serves patches its version list omits).
package kubeminor

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(wd, "..", "..")
}

var (
	pinnedRequire = regexp.MustCompile(`(?m)^\tk8s.io/kubernetes (v[0-9.]+)$`)
	minorReplace  = regexp.MustCompile(`(?m)^\tk8s.io/kubernetes => k8s.io/kubernetes (v[0-9a-z.-]+)$`)
)

// pinnedRelease is the k8s.io/kubernetes version go.mod requires.
func pinnedRelease(t *testing.T, root string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := pinnedRequire.FindSubmatch(data)
	if m == nil {
		t.Fatal("go.mod requires no k8s.io/kubernetes")
	}
	return string(m[1])
}

// pins returns the release of every module that builds a kube-proxy: the
// pinned one (go.mod) and each under minors/, previews (pre-releases)
// apart.
func pins(t *testing.T, root string) (released, previews []string) {
	t.Helper()
	released = []string{pinnedRelease(t, root)}
	mods, _ := filepath.Glob(filepath.Join(root, "minors", "v1.*", "go.mod"))
	for _, mod := range mods {
		data, err := os.ReadFile(mod)
		if err != nil {
			t.Fatal(err)
		}
		if m := minorReplace.FindSubmatch(data); m != nil {
			if v := string(m[1]); strings.Contains(v, "-") {
				previews = append(previews, v)
			} else {
				released = append(released, v)
			}
		}
	}
	return released, previews
}

// highestMinor is the newest minor of versions.
func highestMinor(t *testing.T, versions []string) int {
	highest := 0
	for _, v := range versions {
		if m, _ := parse(t, v); m > highest {
			highest = m
		}
	}
	return highest
}

// proxy writes a module proxy serving k8s.io/kubernetes at versions (its
// list names none of them).
func proxy(t *testing.T, versions ...string) string {
	t.Helper()
	dir := t.TempDir()
	at := filepath.Join(dir, "k8s.io", "kubernetes", "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, v := range versions {
		info := fmt.Sprintf(`{"Version":%q,"Time":"2026-11-01T00:00:00Z"}`, v)
		if err := os.WriteFile(filepath.Join(at, v+".info"), []byte(info), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(at, v+".mod"), []byte("module k8s.io/kubernetes\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(at, "list"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// check runs hack/kube-minor.sh --check against the proxy in dir.
func check(t *testing.T, root, dir string) (string, int) {
	t.Helper()
	cache := t.TempDir()
	// The module cache is written read-only.
	t.Cleanup(func() { _ = exec.Command("chmod", "-R", "u+w", cache).Run() })
	cmd := exec.Command("bash", filepath.Join(root, "hack", "kube-minor.sh"), "--check")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOPROXY=file://"+dir, "GOSUMDB=off", "GONOSUMDB=", "GOPRIVATE=", "GOFLAGS=",
		"GOMODCACHE="+cache, "GOTOOLCHAIN=local")
	out, err := cmd.CombinedOutput()
	code := 0
	if exit, ok := err.(*exec.ExitError); ok {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// parse splits v1.MINOR.PATCH.
func parse(t *testing.T, v string) (int, int) {
	t.Helper()
	parts := strings.Split(strings.TrimPrefix(v, "v1."), ".")
	minor, err1 := strconv.Atoi(parts[0])
	patch, err2 := strconv.Atoi(parts[len(parts)-1])
	if err1 != nil || err2 != nil {
		t.Fatalf("release %s", v)
	}
	return minor, patch
}

func TestCheckSaysUpToDate(t *testing.T) {
	root := repoRoot(t)
	released, previews := pins(t, root)
	out, code := check(t, root, proxy(t, append(released, previews...)...))
	if code != 0 {
		t.Errorf("exit %d with every release the newest served; output:\n%s", code, out)
	}
	for _, v := range released {
		minor, _ := parse(t, v)
		if !strings.Contains(out, fmt.Sprintf("1.%d: %s", minor, v)) || !strings.Contains(out, v) {
			t.Errorf("nothing said of %s:\n%s", v, out)
		}
	}
	if n := strings.Count(out, "up to date"); n != len(released) {
		t.Errorf("%d releases up to date, want %d:\n%s", n, len(released), out)
	}
}

// A release whose newer patches are served, one of them missing in
// between, and the next minor's pre-release.
func TestCheckFindsNewerPatches(t *testing.T) {
	root := repoRoot(t)
	released, previews := pins(t, root)
	older := released[len(released)-1]
	minor, patch := parse(t, older)
	newest := fmt.Sprintf("v1.%d.%d", minor, patch+3)
	preview := fmt.Sprintf("v1.%d.0-rc.1", highestMinor(t, append(released, previews...))+1)
	served := append(append(released, previews...), fmt.Sprintf("v1.%d.%d", minor, patch+1), newest, preview)
	out, code := check(t, root, proxy(t, served...))
	if code != 1 {
		t.Errorf("exit %d with %s behind, want 1; output:\n%s", code, older, out)
	}
	if want := fmt.Sprintf("%s is served", newest); !strings.Contains(out, want) || !strings.Contains(out, "hack/kube-minor.sh "+strings.TrimPrefix(newest, "v")) {
		t.Errorf("want %q and the command that moves the release:\n%s", want, out)
	}
	if !strings.Contains(out, preview+" is the newest pre-release served") {
		t.Errorf("the next minor's %s not found:\n%s", preview, out)
	}
	if n := strings.Count(out, "up to date"); n != len(released)-1 {
		t.Errorf("%d releases up to date, want %d:\n%s", n, len(released)-1, out)
	}
}

// The next minor released: its first release is found.
func TestCheckFindsTheNextMinor(t *testing.T) {
	root := repoRoot(t)
	released, previews := pins(t, root)
	next := fmt.Sprintf("v1.%d.0", highestMinor(t, append(released, previews...))+1)
	out, code := check(t, root, proxy(t, append(append(released, previews...), next)...))
	if code != 1 || !strings.Contains(out, next+" is served: hack/kube-minor.sh "+strings.TrimPrefix(next, "v")+" adds it") {
		t.Errorf("exit %d, output:\n%s\nwant %s found", code, out, next)
	}
}
