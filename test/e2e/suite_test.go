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
	// The cases that change only their own namespaces run side by side;
	// each of them waits mostly on pods and on the controller.
	sideBySide(t, "namespaced cases side by side",
		namedCase{"1 export from A is reachable from B by VIP and DNS on every port", s.testReachable},
		namedCase{"2 export from A and B reaches endpoints in both", s.testBothClusters},
		namedCase{"3 local Service with the import's name is unaffected", s.testLocalServiceUnaffected},
		namedCase{"4 unexport withdraws endpoints, then the import", s.testUnexport},
		namedCase{"6 conflicting exports: oldest wins", s.testConflict},
		namedCase{"7 headless export DNS per KEP", s.testHeadlessDNS},
		namedCase{"8 session affinity ClientIP across clusters", s.testSessionAffinity},
		namedCase{"12 internalTrafficPolicy Local: node-local endpoints of the own cluster", s.testInternalTrafficPolicyLocal},
		namedCase{"17 diagnose --probe sends traffic from a pod of the importing member", s.testDiagnoseProbe},
	)
	// Alone from here: case 5 times the data path (its figures are
	// docs/kind.md's), 13 and 15 take the admission policies away, 14
	// stops the controller, 16 and 11 add Nodes, 10 restarts kube-proxy
	// and deletes the CRD, 9 takes cluster-a away.
	t.Run("5 scaling in A is followed by B's rules (latency)", s.testScaleLatency)
	t.Run("13 a namespace admin cannot capture an exported Service's clusterset IP", s.testCaptureAttack)
	t.Run("14 native names: RemoteAndLocal and LocalFirst by the cluster.local name", s.testNativeNames)
	t.Run("15 an exporter cannot capture another Service's clusterset IP through exportedAnnotations", s.testExportedAnnotationsCapture)
	t.Run("16 a member's administrator cannot escape its confinement: its Nodes, its cluster ID", s.testMemberConfinement)
	t.Run("11 gate off node behaves as upstream", s.testGateOff)
	t.Run("10 kube-proxy restart and ServiceImport CRD recreate", s.testRestartAndCRD)
	t.Run("9 cluster outage and return", s.testOutage)
	t.Logf("SUITE wall=%v", time.Since(started).Round(100*time.Millisecond))
}

// namedCase is one case of a suite: its name and its test.
type namedCase struct {
	name string
	run  func(*testing.T)
}

// sideBySide runs cases as parallel subtests of one group, which ends
// when all of them have: cases that work only in namespaces of their own
// and change nothing another case reads (the controller, kube-proxy, the
// admission policies, Nodes). As many run at once as go test's -parallel
// allows (hack/kind-e2e.sh sets it).
func sideBySide(t *testing.T, group string, cases ...namedCase) {
	t.Run(group, func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				c.run(t)
			})
		}
	})
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
