// Package deps tests hack/check-deps.sh, the check `make demo` and `make
// test` run first: with one dependency hidden, it must fail at once and
// name the Debian package that provides it.
package deps

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// repoRoot is two levels up from this package, where go test runs it
// (source paths are trimmed from the binary: -trimpath).
func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(wd, "..", "..")
}

// pathWithout returns a directory holding a link to every command on PATH
// but hidden, to be used as the whole PATH.
func pathWithout(t *testing.T, hidden string) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if e.Name() == hidden {
				continue
			}
			link := filepath.Join(dir, e.Name())
			if _, err := os.Lstat(link); err == nil {
				continue // an earlier PATH entry wins, as for the shell
			}
			if err := os.Symlink(filepath.Join(d, e.Name()), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// check runs hack/check-deps.sh PROFILE with env added to the test's own.
func check(t *testing.T, profile string, env ...string) (string, int) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bash, filepath.Join(repoRoot(t), "hack", "check-deps.sh"), profile)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	code := 0
	if exitErr, ok := err.(*exec.ExitError); ok {
		code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), code
}

// problems returns the lines the check reported as missing.
func problems(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "  - ") {
			lines = append(lines, l)
		}
	}
	return lines
}

func TestCheckNamesTheMissingPackage(t *testing.T) {
	// Under CI every dependency is installed (hack/install-deps.sh ran
	// first), so the one hidden must be the only one reported.
	ci := os.Getenv("CI") == "true"
	cases := []struct {
		name, profile string
		env           func(t *testing.T) []string
		want          []string
	}{
		{
			name:    "a command hidden from PATH",
			profile: "demo",
			env:     func(t *testing.T) []string { return []string{"PATH=" + pathWithout(t, "nft")} },
			want:    []string{"command nft not found", "install Debian package nftables"},
		},
		{
			name:    "a tool of the kind step hidden from PATH",
			profile: "test",
			env:     func(t *testing.T) []string { return []string{"PATH=" + pathWithout(t, "debootstrap")} },
			want:    []string{"command debootstrap not found", "install Debian package debootstrap"},
		},
		{
			name:    "a cgo library pkg-config cannot find",
			profile: "test",
			env:     func(t *testing.T) []string { return []string{"PKG_CONFIG_LIBDIR=" + t.TempDir(), "PKG_CONFIG_PATH="} },
			want:    []string{"pkg-config module libseccomp not found", "install Debian package libseccomp-dev"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, code := check(t, tc.profile, tc.env(t)...)
			if code != 1 {
				t.Fatalf("check-deps %s exited %d, want 1:\n%s", tc.profile, code, out)
			}
			var found string
			for _, l := range problems(out) {
				if strings.Contains(l, tc.want[0]) {
					found = l
				}
			}
			if found == "" {
				t.Fatalf("check-deps %s did not report %q:\n%s", tc.profile, tc.want[0], out)
			}
			for _, w := range tc.want[1:] {
				if !strings.Contains(found, w) {
					t.Errorf("check-deps reported %q without %q", found, w)
				}
			}
			if ci && len(problems(out)) != 1 {
				t.Errorf("check-deps reported more than the hidden dependency:\n%s", out)
			}
		})
	}
}

// The demo needs nothing of the kind step: a machine without Docker or
// libseccomp runs it.
func TestDemoProfileLeavesOutTheKindStep(t *testing.T) {
	out, _ := check(t, "demo", "PKG_CONFIG_LIBDIR="+t.TempDir(), "PKG_CONFIG_PATH=", "PATH="+pathWithout(t, "dockerd"))
	for _, l := range problems(out) {
		if strings.Contains(l, "libseccomp") || strings.Contains(l, "dockerd") {
			t.Errorf("the demo's check asks for a dependency of the kind step: %s", l)
		}
	}
}
