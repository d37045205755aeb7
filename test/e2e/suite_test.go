// Package e2e is the end-to-end suite of multi-cluster Services (KEP-1645
// test plan): one local clusterset (test/clusterset) with real apiservers,
// the real mcs-controller, this project's kube-proxy programming nftables,
// CoreDNS 1.15 and pods running as processes, and behaviour checked the
// way an MCS user would: requests and DNS queries from inside a pod.
package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/clusterset"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/netns"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/process"
)

const (
	prefix = "e2e"
	// endpointTTL is the controller's --endpoint-ttl: how long a source
	// cluster's endpoints outlive its unreachable apiserver.
	endpointTTL = 10 * time.Second
)

// suite is the clusterset every case shares; each case works in its own
// Kubernetes namespace.
type suite struct {
	cs         *clusterset.ClusterSet
	a, b       *clusterset.Cluster
	controller *process.Process
	top        *testing.T
}

// TestMultiClusterServices runs every case against one clusterset of two
// clusters. Order matters only at the end: the cases that restart
// kube-proxy, delete the ServiceImport CRD and take cluster-a's apiserver
// away come last.
func TestMultiClusterServices(t *testing.T) {
	started := time.Now()
	s := upSuite(t)
	t.Run("1 export from A is reachable from B by VIP and DNS on every port", s.testReachable)
	t.Run("2 export from A and B reaches endpoints in both", s.testBothClusters)
	t.Run("3 local Service with the import's name is unaffected", s.testLocalServiceUnaffected)
	t.Run("4 unexport withdraws endpoints, then the import", s.testUnexport)
	t.Run("5 scaling in A is followed by B's rules (latency)", s.testScaleLatency)
	t.Run("6 conflicting exports: oldest wins", s.testConflict)
	t.Run("7 headless export DNS per KEP", s.testHeadlessDNS)
	t.Run("8 session affinity ClientIP across clusters", s.testSessionAffinity)
	t.Run("11 gate off node behaves as upstream", s.testGateOff)
	t.Run("10 kube-proxy restart and ServiceImport CRD recreate", s.testRestartAndCRD)
	t.Run("9 cluster outage and return", s.testOutage)
	t.Logf("SUITE wall=%v", time.Since(started).Round(100*time.Millisecond))
}

// requireBuilt skips when a binary is missing, but fails under CI, where
// everything is built and a skipped suite would hide a broken set-up.
func requireBuilt(t *testing.T, names ...string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		for _, name := range names {
			if _, err := framework.Binary(name); err != nil {
				t.Fatalf("%s is not built under CI: %v", name, err)
			}
		}
	}
	framework.SkipUnlessBuilt(t, names...)
}

func upSuite(t *testing.T) *suite {
	t.Helper()
	requireBuilt(t, "etcd", "kube-apiserver", "kube-controller-manager", "kube-proxy", "kube-proxy-upstream", "coredns", "mcs-controller")
	netns.Require(t, "nft", "ip")
	if left, _ := clusterset.Leftovers(prefix); len(left) > 0 {
		t.Logf("removing namespaces an earlier run left: %v", left)
		if err := clusterset.CleanLeftovers(prefix); err != nil {
			t.Fatal(err)
		}
	}
	upStart := time.Now()
	cs, err := clusterset.Up(t.Context(), clusterset.Options{
		Clusters: 2, Prefix: prefix, Dir: t.TempDir(), Progress: testWriter{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("clusterset up in %v", time.Since(upStart).Round(10*time.Millisecond))
	s := &suite{cs: cs, a: cs.Clusters[0], b: cs.Clusters[1], top: t}
	t.Cleanup(func() {
		cs.Down()
		if t.Failed() {
			dumpLogs(t, cs)
		}
	})
	binary, err := framework.Binary("mcs-controller")
	if err != nil {
		t.Fatal(err)
	}
	// The leader election Lease lives in cluster-b so that cluster-a's
	// outage (case 9) does not take the controller's leadership with it.
	s.controller, err = process.Start(process.Options{
		Name: "mcs-controller",
		Argv: []string{binary, "--kubeconfig=" + cs.Kubeconfig(), "--v=2",
			"--metrics-bind-address=0", "--healthz-bind-address=0",
			"--leader-elect-context=" + s.b.Name,
			"--endpoint-ttl=" + endpointTTL.String()},
		Log: filepath.Join(cs.Dir(), "mcs-controller.log"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.controller.Stop(5 * time.Second)
		if t.Failed() {
			t.Logf("last lines of %s:\n%s", s.controller.LogFile(), process.Tail(s.controller.LogFile(), 40))
		}
	})
	return s
}

func dumpLogs(t *testing.T, cs *clusterset.ClusterSet) {
	logs, _ := filepath.Glob(filepath.Join(cs.Dir(), "cluster-*", "*.log"))
	for _, log := range logs {
		t.Logf("--- last lines of %s ---\n%s", log, process.Tail(log, 15))
	}
}

// testWriter sends the harness's progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
