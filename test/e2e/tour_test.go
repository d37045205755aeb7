package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/clusterset"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/netns"
)

// TestReadmeTour runs the README's five-minute tour as a new user would
// after cloning: every command of its first sh block, in order, in one
// shell, each required to succeed. The only changes are where the
// clusterset lives (a directory and a network namespace prefix of the
// test's own, so that it meets no one else's clusterset) and that the
// shell waits for the line the README tells the user to wait for.
func TestReadmeTour(t *testing.T) {
	if p := os.Getenv("MCS_E2E_PROVIDER"); p != "" && p != "local" && p != "local-exec" {
		t.Skip("the tour runs on the local clusterset")
	}
	requireBuilt(t, "etcd", "kube-apiserver", "kube-controller-manager", "kube-proxy", "coredns", "mcs-controller", "clusterset", "kubectl", "kubectl-mcs")
	netns.Require(t, "nft", "ip")
	runBeside(t)
	const prefix = "tour"
	if left, _ := clusterset.Leftovers(prefix); len(left) > 0 {
		if err := clusterset.CleanLeftovers(prefix); err != nil {
			t.Fatal(err)
		}
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	lines := tourLines(t, filepath.Join(root, "README.md"))
	dir := t.TempDir()
	var script []string
	script = append(script, "set -o errexit -o nounset -o pipefail", "cd "+root, "up=", `trap '[ -z "$up" ] || { kill -INT "$up"; wait "$up" || true; }' EXIT`)
	var ran []string
	for _, line := range lines {
		line = strings.ReplaceAll(line, "$PWD/_output/clusterset", dir)
		if !strings.HasSuffix(line, "&") {
			script = append(script, "echo '+ "+strings.ReplaceAll(line, "'", `'\''`)+"'", line)
			ran = append(ran, line)
			continue
		}
		// The clusterset kept up in the background: started in the
		// test's own directory, then waited for as the README says.
		cmd := strings.TrimSpace(strings.TrimSuffix(line, "&"))
		if !strings.HasPrefix(cmd, "hack/local-up-clusterset.sh") {
			t.Fatalf("the tour runs %q in the background: this test knows only hack/local-up-clusterset.sh there", cmd)
		}
		log := filepath.Join(dir, "up.log")
		script = append(script,
			"echo '+ "+cmd+" &'",
			cmd+" --dir="+dir+" --prefix="+prefix+" >"+log+" 2>&1 &",
			"up=$!",
			"for i in $(seq 600); do grep -q 'The clusterset is up' "+log+" && break; kill -0 $up || { cat "+log+"; exit 1; }; sleep 1; done",
			"grep -q 'The clusterset is up' "+log+" || { cat "+log+"; exit 1; }")
		ran = append(ran, line)
	}
	if len(ran) < 5 {
		t.Fatalf("the tour has %d commands: %v", len(ran), ran)
	}
	started := time.Now()
	sh := exec.CommandContext(t.Context(), "bash", "-c", strings.Join(script, "\n"))
	out, err := sh.CombinedOutput()
	t.Logf("the tour (%d commands) in %v:\n%s", len(ran), time.Since(started).Round(time.Second), out)
	if err != nil {
		t.Fatalf("the tour failed: %v (its up.log: %s)", err, tail(filepath.Join(dir, "up.log")))
	}
	if left, _ := clusterset.Leftovers(prefix); len(left) > 0 {
		t.Errorf("the tour's clusterset left %v behind after Ctrl-C", left)
	}
}

// tourLines returns the commands of the README's tour: its first sh block
// after the heading "A five-minute tour", each without its comment.
func tourLines(t *testing.T, readme string) []string {
	t.Helper()
	f, err := os.Open(readme)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	inTour, inBlock := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			inTour = strings.Contains(line, "five-minute tour")
		case inTour && line == "```sh":
			inBlock = true
		case inBlock && line == "```":
			return out
		case inBlock:
			cmd, _, _ := strings.Cut(line, "#")
			if cmd = strings.TrimSpace(cmd); cmd != "" {
				out = append(out, cmd)
			}
		}
	}
	t.Fatal("no sh block under the README's five-minute tour")
	return nil
}

func tail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(data) > 2000 {
		data = data[len(data)-2000:]
	}
	return string(data)
}
