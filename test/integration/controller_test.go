package integration

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	mcsclientset "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
)

// controllerUser is the identity the mcs-controller uses in every member;
// it has only what kind-config/mcs-controller-rbac.yaml grants, so these
// tests also check that manifest.
const controllerUser = "system:mcs-controller"

// member is one member cluster of the test clusterset.
type testMember struct {
	id      string
	cluster *framework.Cluster
	kube    kubernetes.Interface
	mcs     mcsclientset.Interface
	// link is the TCP path the controller reaches the member through, so
	// that a test can cut it to simulate an outage.
	link *tcpLink
}

// TestMCSController runs the mcs-controller (two replicas, leader elected)
// against three real apiservers and checks, in order: export → import in
// all three members, a port conflict, unexport, Service deletion, refused
// and missing namespaces, controller restart (same clusterset IPs, no
// writes), failover between replicas, and endpoint TTL across a member
// outage and return, and removing a member. Each phase is a method of
// controllerScenario (controller_phases_test.go, controller_lifecycle_test.go).
func TestMCSController(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	etcd := framework.StartTestEtcd(t)

	var members []*testMember
	for _, id := range []string{"cluster-a", "cluster-b", "cluster-c"} {
		members = append(members, startMember(t, etcd, dir, id))
	}
	a, b, c := members[0], members[1], members[2]
	kubeconfig := writeControllerKubeconfig(t, dir, members)
	for _, m := range members {
		createNamespace(t, m, "demo")
	}
	createNamespace(t, a, "partial")
	createNamespace(t, b, "partial")

	const ttl = 8 * time.Second
	replica1 := startController(t, kubeconfig, "replica-1", ttl)
	waitLeader(t, a, "replica-1")
	replica2 := startController(t, kubeconfig, "replica-2", ttl)
	s := &controllerScenario{ctx: ctx, dir: dir, kubeconfig: kubeconfig, members: members, a: a, b: b, c: c, replica1: replica1, replica2: replica2, ttl: ttl}
	s.exportAndImport(t)
	s.nativeNames(t)
	s.exportedMetadata(t)
	s.untrustedSlices(t)
	s.foreignClaims(t)
	s.lifecycle(t)
	s.replicas(t)
}
