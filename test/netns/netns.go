// Package netns runs tests inside fresh Linux network namespaces, so that
// they can program real nftables and iptables rules and carry real traffic
// without touching the host.
package netns

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

const childEnv = "MCS_TEST_IN_NETNS"

// Require skips the test, saying why, unless it runs as root and every
// tool is installed. Under CI (CI=true) it fails instead: CI has them all,
// and a skipped data-plane test there would hide a broken set-up.
func Require(t testing.TB, tools ...string) {
	t.Helper()
	fail := t.Skipf
	if os.Getenv("CI") == "true" {
		fail = t.Fatalf
	}
	if os.Geteuid() != 0 {
		fail("this test needs root (CAP_NET_ADMIN) to create network namespaces and program nftables/iptables")
		return
	}
	for _, tool := range append([]string{"unshare", "ip"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			fail("this test needs %q (install nftables, iptables, iproute2, util-linux, conntrack): %v", tool, err)
			return
		}
	}
}

// Isolate re-runs the calling top-level test in a new network namespace.
// In the parent it waits for the child, reports its output and returns
// false; in the child, where the test should do its work, it brings up
// loopback and returns true.
func Isolate(t *testing.T, tools ...string) bool {
	t.Helper()
	if os.Getenv(childEnv) == t.Name() {
		Run(t, "ip", "link", "set", "lo", "up")
		return true
	}
	Require(t, tools...)
	args := []string{"--net", "--", os.Args[0], "-test.run", "^" + regexp.QuoteMeta(t.Name()) + "$", "-test.count=1", "-test.v"}
	cmd := exec.Command("unshare", args...)
	cmd.Env = append(os.Environ(), childEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		t.Log(line)
	}
	if err != nil {
		t.Fatalf("test in its network namespace failed: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("test in its network namespace did not pass")
	}
	return false
}

// Run runs a command and fails the test if it fails.
func Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}
