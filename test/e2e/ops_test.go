package e2e

import (
	"context"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apiextensionsclientset "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/multiclusterservices/crds"
)

// traffic sends a request to addr from a client pod every 50ms until
// stopped and counts the answered and unanswered ones.
type traffic struct {
	ok, failed atomic.Int64
	stop       context.CancelFunc
	done       chan struct{}
}

func startTraffic(client *pod, addr string) *traffic {
	ctx, cancel := context.WithCancel(context.Background())
	tr := &traffic{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(tr.done)
		for ctx.Err() == nil {
			if client.ask("tcp", addr) != "" {
				tr.ok.Add(1)
			} else {
				tr.failed.Add(1)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return tr
}

func (tr *traffic) finish() (ok, failed int64) {
	tr.stop()
	<-tr.done
	return tr.ok.Load(), tr.failed.Load()
}

func (s *suite) testRestartAndCRD(t *testing.T) {
	sp := s.space(t, "e2e-restart")
	_, client, vip := sp.webInBoth()
	sp.service(s.a, "gone", nil)
	sp.echoPods(s.a, "gone", "gone-a-1")
	sp.export(s.a, "gone")
	vipGone := sp.vip(s.b, "gone")
	both := []string{"web-a-1", "web-b-1"}
	waitAnswers(t, client, "tcp", hostPort(vipGone, 80), 5, []string{"gone-a-1"})

	t.Run("kube-proxy restart", func(t *testing.T) {
		tr := startTraffic(client, hostPort(vip, 80))
		// A connection made before the restart must outlive it: the
		// node's connection tracking keeps where it goes, and the
		// restarted kube-proxy replaces the rules without touching it.
		// It is asked until the restarted kube-proxy has dropped the
		// rules of the import removed while it was down.
		held := client.hold(hostPort(vip, 80), hostPort(vipGone, 80))
		time.Sleep(2 * time.Second) // the connection is made in milliseconds
		start := s.p.stopKubeProxy(t, s.b, s.b.Node)
		// While kube-proxy is down an import goes away: its rules must not
		// survive the restart.
		sp.unexport(s.a, "gone")
		sp.waitNoImport(s.b, "gone")
		start(t)
		s.waitRules(t, s.b, 60*time.Second, []string{vip}, []string{vipGone})
		waitAnswers(t, client, "tcp", hostPort(vip, 80), 30, both)
		if got := client.answers("tcp", hostPort(vipGone, 80), 3); len(got) > 0 {
			t.Errorf("the VIP of an import deleted while kube-proxy was down still answers: %v", got)
		}
		held.check(t)
		ok, failed := tr.finish()
		t.Logf("traffic to %s during the restart: %d answered, %d unanswered", vip, ok, failed)
	})

	t.Run("ServiceImport CRD delete and recreate", func(t *testing.T) {
		ext, err := apiextensionsclientset.NewForConfig(s.b.Config)
		if err != nil {
			t.Fatal(err)
		}
		crd, err := crds.ServiceImport()
		if err != nil {
			t.Fatal(err)
		}
		tr := startTraffic(client, hostPort(vip, 80))
		if err := ext.ApiextensionsV1().CustomResourceDefinitions().Delete(t.Context(), crd.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 60*time.Second, "the CRD to go", func() (bool, string) {
			_, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(t.Context(), crd.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), errString(err)
		})
		s.waitRules(t, s.b, 60*time.Second, nil, []string{vip})
		if got := client.answers("tcp", hostPort(vip, 80), 3); len(got) > 0 {
			t.Errorf("the VIP answers without the ServiceImport CRD: %v", got)
		}
		if err := crds.Install(t.Context(), ext, crd); err != nil {
			t.Fatal(err)
		}
		// The controller writes the import again, kube-proxy's watch comes
		// back without a restart.
		if got := sp.vip(s.b, "web"); got != vip {
			t.Errorf("clusterset IP after the CRD came back: %s, was %s", got, vip)
		}
		s.waitRules(t, s.b, 60*time.Second, []string{vip}, []string{vipGone})
		waitAnswers(t, client, "tcp", hostPort(vip, 80), 30, both)
		ok, failed := tr.finish()
		t.Logf("traffic to %s across the CRD delete/recreate: %d answered, %d unanswered", vip, ok, failed)
	})
}

// testGateOff runs, next to each other and as the same extra Node, this
// project's kube-proxy with the gate off and upstream kube-proxy of the
// pinned version, each in a network namespace of its own, while B has a
// local Service and an import: their rulesets must be the same, without
// the import.
func (s *suite) testGateOff(t *testing.T) {
	sp := s.space(t, "e2e-gateoff")
	local := sp.service(s.b, "web", nil)
	sp.service(s.a, "web", nil)
	sp.echoPods(s.a, "web", "web-a-1")
	sp.echoPods(s.b, "web", "web-b-1")
	sp.export(s.a, "web")
	sp.export(s.b, "web")
	vip := sp.vip(s.b, "web")
	s.waitRules(t, s.b, 30*time.Second, []string{vip, local.Spec.ClusterIP}, nil)

	// kube-proxy waits for its Node object (for the node's IPs) before
	// giving up on it. Nothing schedules to this Node: it never becomes
	// Ready, and the local harness's scheduler binds only to its own nodes.
	extra := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-extra-node"},
		Spec:       v1.NodeSpec{Taints: []v1.Taint{{Key: "e2e.mcs-kube-proxy.io/no-pods", Effect: v1.TaintEffectNoSchedule}}},
		Status:     v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "172.30.1.250"}}},
	}
	if _, err := s.b.Client.CoreV1().Nodes().Create(t.Context(), extra, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.b.Client.CoreV1().Nodes().Delete(context.Background(), extra.Name, metav1.DeleteOptions{})
	})
	gateOff, upstream := s.p.startGateOff(t, s.b, sp.name, extra.Name)
	started := time.Now()
	for name, read := range map[string]func(context.Context) (string, error){"gate-off": gateOff, "upstream": upstream} {
		eventually(t, 120*time.Second, "the "+name+" kube-proxy to program the local Service", func() (bool, string) {
			rs, err := read(t.Context())
			return err == nil && hasIP(rs, local.Spec.ClusterIP), errString(err)
		})
		t.Logf("the %s kube-proxy programmed the local Service after %v", name, time.Since(started).Round(10*time.Millisecond))
	}
	// Upstream kube-proxy writes its "unallocated ClusterIPs" drop rule
	// on full syncs only, and a ServiceCIDR list that arrives after the
	// first full sync waits for the next (an hour later): either process
	// can lose that race at start-up. A topology label on the node makes
	// both do a full sync now, with every informer synced.
	patch := []byte(`{"metadata":{"labels":{"topology.kubernetes.io/zone":"e2e-gateoff"}}}`)
	if _, err := s.b.Client.CoreV1().Nodes().Patch(t.Context(), extra.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// Same rules as upstream, and no clusterset IP, once both settle.
	var off, up string
	eventually(t, 30*time.Second, "the gate-off ruleset to equal upstream's", func() (bool, string) {
		a, err1 := gateOff(t.Context())
		b, err2 := upstream(t.Context())
		if err1 != nil || err2 != nil {
			return false, errString(err1) + " " + errString(err2)
		}
		off, up = normalize(a), normalize(b)
		return off == up, lineDiff(off, up)
	})
	if hasIP(off, vip) || strings.Contains(off, "clusterset") {
		t.Errorf("the gate-off node programs the import (VIP %s)", vip)
	}
}

// normalize sorts a ruleset's lines: element order inside sets and maps
// is not part of the behaviour.
func normalize(rs string) string {
	lines := strings.Split(rs, "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func lineDiff(a, b string) string {
	inA, inB := map[string]bool{}, map[string]bool{}
	for _, l := range strings.Split(a, "\n") {
		inA[l] = true
	}
	for _, l := range strings.Split(b, "\n") {
		inB[l] = true
	}
	var out []string
	for l := range inA {
		if !inB[l] {
			out = append(out, "gate-off only: "+l)
		}
	}
	for l := range inB {
		if !inA[l] {
			out = append(out, "upstream only: "+l)
		}
	}
	sort.Strings(out)
	if len(out) > 20 {
		out = out[:20]
	}
	return strings.Join(out, "\n")
}

func (s *suite) testOutage(t *testing.T) {
	sp := s.space(t, "e2e-outage")
	ips, client, vip := sp.webInBoth()

	ttl := s.p.endpointTTL()
	start := s.p.stopAPIServer(t, s.a)
	down := time.Now()
	s.waitRules(t, s.b, ttl+60*time.Second, []string{vip, ips["web-b-1"]}, []string{ips["web-a-1"]})
	t.Logf("OUTAGE A's endpoints left B's rules %v after A's apiserver stopped (endpoint TTL %v)", time.Since(down).Round(100*time.Millisecond), ttl)
	if elapsed := time.Since(down); elapsed < ttl/2 {
		t.Errorf("A's endpoints left after %v, before the endpoint TTL %v", elapsed, ttl)
	}
	waitAnswers(t, client, "tcp", hostPort(vip, 80), 20, []string{"web-b-1"})
	if got := sp.vip(s.b, "web"); got != vip {
		t.Errorf("clusterset IP moved during the outage: %s -> %s", vip, got)
	}

	t.Run("return", func(t *testing.T) {
		start(t)
		back := time.Now()
		s.waitRules(t, s.b, 90*time.Second, []string{vip, ips["web-a-1"], ips["web-b-1"]}, nil)
		t.Logf("OUTAGE A's endpoints back in B's rules %v after A's apiserver restarted", time.Since(back).Round(100*time.Millisecond))
		waitAnswers(t, client, "tcp", hostPort(vip, 80), 30, []string{"web-a-1", "web-b-1"})
	})
}
