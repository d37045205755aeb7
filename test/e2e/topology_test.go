package e2e

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// testInternalTrafficPolicyLocal exports a Service with
// internalTrafficPolicy Local from A and B. A client reaches, through the
// clusterset IP, only the endpoints on its own node: the mcs-controller
// keeps the source cluster's node names and each kube-proxy knows, from its
// ClusterProperty, which slices are its own cluster's. Another cluster's
// endpoint is never node-local, whatever its node is called.
func (s *suite) testInternalTrafficPolicyLocal(t *testing.T) {
	sp := s.space(t, "e2e-itp-local")
	local := func(spec *v1.ServiceSpec) {
		policy := v1.ServiceInternalTrafficPolicyLocal
		spec.InternalTrafficPolicy = &policy
	}
	sp.service(s.a, "web", local)
	sp.service(s.b, "web", local)
	clientA := sp.client(s.a, "client")
	clientB := sp.client(s.b, "client")
	// An endpoint on each client's node.
	sp.createPod(s.a, onNode(echoPod("web-a-1", "web"), s.a.Node))
	sp.createPod(s.b, onNode(echoPod("web-b-1", "web"), s.b.Node))
	sp.waitReady(s.a, "web-a-1")
	sp.waitReady(s.b, "web-b-1")
	sp.export(s.a, "web")
	sp.export(s.b, "web")
	si := sp.waitImport(s.b, "web", "with internalTrafficPolicy Local", func(si *mcsv1beta1.ServiceImport) bool {
		return len(si.Spec.IPs) > 0 && si.Spec.InternalTrafficPolicy != nil && *si.Spec.InternalTrafficPolicy == v1.ServiceInternalTrafficPolicyLocal
	})
	vip := si.Spec.IPs[0]
	for _, c := range []struct {
		client *pod
		want   []string
	}{{clientB, []string{"web-b-1"}}, {clientA, []string{"web-a-1"}}} {
		waitAnswers(t, c.client, "tcp", hostPort(vip, 80), 30, c.want)
		if got := c.client.answers("tcp", hostPort(vip, 80), 40); !slices.Equal(got, c.want) {
			t.Errorf("40 requests from %s reached %v, want only its node's %v", c.client, got, c.want)
		}
	}
}

// onNode pins a pod to a node, as its scheduler would place it there.
func onNode(p *v1.Pod, node string) *v1.Pod {
	p.Spec.NodeSelector = map[string]string{v1.LabelHostname: node}
	return p
}
