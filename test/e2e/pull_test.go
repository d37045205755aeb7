package e2e

import (
	"os"
	"testing"
	"time"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/clusterset"
)

// TestMultiClusterServicesPullMode runs the KEP suite's cases on a local
// clusterset in pull mode (docs/architecture.md, "Pull mode"): the last
// cluster doubles as the hub, where the planner plans from what every
// member's agent publishes, and each agent writes its own cluster's part
// with its own credentials. The same cases, the same checks as
// TestMultiClusterServices: both modes must pass every case they share.
// On kind (MCS_E2E_PROVIDER=kind) it runs against the clusters
// hack/kind-e2e.sh has switched to pull mode: cluster b doubles as the hub,
// the planner and the agents are Deployments (connectKindPull).
func TestMultiClusterServicesPullMode(t *testing.T) {
	var p provider
	switch name := os.Getenv("MCS_E2E_PROVIDER"); name {
	case "", "local":
		runBeside(t)
		p = upLocalPull(t, clusterset.Options{Clusters: 2, Prefix: "e2epull"})
	case "kind":
		p = connectKindPull(t)
	default:
		t.Skipf("pull mode runs on the local clusterset or on kind, not on MCS_E2E_PROVIDER=%s", name)
	}
	started := time.Now()
	ms := p.members()
	s := &suite{p: p, a: ms[0], b: ms[1], top: t}
	t.Logf("cluster a: %s, cluster b: %s (the hub)", s.a.Name, s.b.Name)
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
	// Alone from here, as in push mode: 13 and 15 take the admission
	// policies away (the planner is what refuses then), 14 stops the
	// planner and every agent, 10 restarts kube-proxy and deletes the
	// CRD (the agent writes the imports again), 9 takes cluster-a's
	// apiserver away (its agent cannot vouch for it and stops renewing
	// its Lease: its endpoints leave B after the planner's TTL). Not
	// here: 11, kube-proxy alone with the gate off, which no mode
	// changes; 16, whose cluster-ID half is push mode's check (in pull
	// mode a member's name is its hub namespace, and an agent whose
	// ClusterProperty says otherwise does not start:
	// TestPullAgentCommand, TestPullHubConfinesEachMember).
	t.Run("5 scaling in A is followed by B's rules (latency)", s.testScaleLatency)
	t.Run("13 a namespace admin cannot capture an exported Service's clusterset IP", s.testCaptureAttack)
	t.Run("14 native names: RemoteAndLocal and LocalFirst by the cluster.local name", s.testNativeNames)
	t.Run("15 an exporter cannot capture another Service's clusterset IP through exportedAnnotations", s.testExportedAnnotationsCapture)
	t.Run("10 kube-proxy restart and ServiceImport CRD recreate", s.testRestartAndCRD)
	t.Run("9 cluster outage and return", s.testOutage)
	t.Logf("SUITE wall=%v", time.Since(started).Round(100*time.Millisecond))
}
