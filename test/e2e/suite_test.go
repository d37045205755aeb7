// Package e2e is the end-to-end suite of multi-cluster Services (KEP-1645
// test plan), run against a clusterset of two clusters with real
// apiservers, the real mcs-controller, this project's kube-proxy
// programming nftables, CoreDNS 1.15 and real pod processes, and checked
// the way an MCS user would: requests and DNS queries from inside a pod,
// and kube-proxy's rules on a node. The clusterset is the local one of
// test/clusterset (CI), or kind clusters (hack/kind-e2e.sh).
package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
)

// suite is the clusterset every case shares; each case works in its own
// Kubernetes namespace.
type suite struct {
	p    provider
	a, b *member
	top  *testing.T
}

// TestMultiClusterServices runs every case against one clusterset of two
// clusters. Order matters only at the end: the cases that restart
// kube-proxy, delete the ServiceImport CRD and take cluster-a's apiserver
// away come last.
func TestMultiClusterServices(t *testing.T) {
	runBeside(t)
	started := time.Now()
	p := newProvider(t)
	ms := p.members()
	s := &suite{p: p, a: ms[0], b: ms[1], top: t}
	t.Logf("cluster a: %s, cluster b: %s", s.a.Name, s.b.Name)
	t.Run("1 export from A is reachable from B by VIP and DNS on every port", s.testReachable)
	t.Run("2 export from A and B reaches endpoints in both", s.testBothClusters)
	t.Run("3 local Service with the import's name is unaffected", s.testLocalServiceUnaffected)
	t.Run("4 unexport withdraws endpoints, then the import", s.testUnexport)
	t.Run("5 scaling in A is followed by B's rules (latency)", s.testScaleLatency)
	t.Run("6 conflicting exports: oldest wins", s.testConflict)
	t.Run("7 headless export DNS per KEP", s.testHeadlessDNS)
	t.Run("8 session affinity ClientIP across clusters", s.testSessionAffinity)
	t.Run("12 internalTrafficPolicy Local: node-local endpoints of the own cluster", s.testInternalTrafficPolicyLocal)
	t.Run("13 a namespace admin cannot capture an exported Service's clusterset IP", s.testCaptureAttack)
	t.Run("14 native names: RemoteAndLocal and LocalFirst by the cluster.local name", s.testNativeNames)
	t.Run("15 an exporter cannot capture another Service's clusterset IP through exportedAnnotations", s.testExportedAnnotationsCapture)
	t.Run("16 a member's administrator cannot escape its confinement: its Nodes, its cluster ID", s.testMemberConfinement)
	t.Run("17 diagnose --probe sends traffic from a pod of the importing member", s.testDiagnoseProbe)
	t.Run("11 gate off node behaves as upstream", s.testGateOff)
	t.Run("10 kube-proxy restart and ServiceImport CRD recreate", s.testRestartAndCRD)
	t.Run("9 cluster outage and return", s.testOutage)
	t.Logf("SUITE wall=%v", time.Since(started).Round(100*time.Millisecond))
}

// runBeside lets a test that brings up a local clusterset of its own run
// beside the others (go test -parallel, GOMAXPROCS by default): each
// clusterset has its own prefix, network namespaces, host routes and
// ports, and most of a case waits on real processes. On kind every test
// shares the same clusters, and runs alone.
func runBeside(t *testing.T) {
	if p := os.Getenv("MCS_E2E_PROVIDER"); p == "" || p == "local" || p == "local-exec" {
		t.Parallel()
	}
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

// testWriter sends the harness's progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
