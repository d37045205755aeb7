package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// testNativeNames: what native names promise an application, by the
// cluster.local name from a pod of B.
func (s *suite) testNativeNames(t *testing.T) {
	// resolve asks B's kube-dns for name's cluster.local address.
	resolve := func(t *testing.T, client *pod, name string) string {
		t.Helper()
		var ip string
		eventually(t, 30*time.Second, name+" to resolve in "+s.b.Name, func() (bool, string) {
			got, err := client.query(s.b.DNSIP, name, dnsmessage.TypeA)
			if err != nil || len(got.A) != 1 {
				return false, got.String() + " " + errString(err)
			}
			ip = got.A[0]
			return true, ""
		})
		return ip
	}

	t.Run("RemoteAndLocal: a Service only A has is reachable by name from B", func(t *testing.T) {
		sp := s.space(t, "e2e-native-remote")
		client := sp.client(s.b, "client")
		sp.service(s.a, "web", nil)
		podsA := podNames(sp.echoPods(s.a, "web", "web-a-1"))
		sp.exportWith(s.a, "web", mcsv1beta1.ServiceExportSpec{
			ExportedAnnotations: map[string]string{mcsproxy.AnnotationNativeNames: string(mcsproxy.RemoteAndLocal)},
		})
		ip := resolve(t, client, "web."+sp.name+".svc.cluster.local")
		waitAnswers(t, client, "tcp", hostPort(ip, 80), 20, podsA)
		// The clusterset name works as before.
		waitAnswers(t, client, "tcp", hostPort(sp.vip(s.b, "web"), 80), 20, podsA)
	})

	t.Run("LocalFirst: B's own pods, A's while B has none ready, B's again", func(t *testing.T) {
		sp := s.space(t, "e2e-native-local")
		client := sp.client(s.b, "client")
		sp.service(s.a, "web", nil)
		sp.service(s.b, "web", nil)
		// B's Service is its owner's: joined only with consent.
		sp.acceptNativeNames(s.b, "web", true)
		ipsA := sp.echoPods(s.a, "web", "web-a-1")
		podsA := podNames(ipsA)
		podsB := podNames(sp.echoPods(s.b, "web", "web-b-1"))
		spec := mcsv1beta1.ServiceExportSpec{ExportedAnnotations: map[string]string{mcsproxy.AnnotationNativeNames: string(mcsproxy.LocalFirst)}}
		sp.exportWith(s.a, "web", spec)
		sp.exportWith(s.b, "web", spec)
		ip := resolve(t, client, "web."+sp.name+".svc.cluster.local")
		svc, err := s.b.Client.CoreV1().Services(sp.name).Get(t.Context(), "web", metav1.GetOptions{})
		if err != nil || svc.Spec.ClusterIP != ip {
			t.Fatalf("web.%s.svc.cluster.local is %s, want B's own Service's ClusterIP (%v)", sp.name, ip, err)
		}
		waitAnswers(t, client, "tcp", hostPort(ip, 80), 20, podsB)
		// B answers with its own pods before A's endpoints reach it: they
		// must be in B's rules (the clusterset IP's, which LocalFirst does
		// not steer) before the writers stop.
		s.waitRules(t, s.b, 60*time.Second, []string{ipsA["web-a-1"]}, nil)

		// With the mcs-controller stopped (failover needs no API write),
		// B's pod goes: failover to A's, decided by B's kube-proxy.
		startController := s.p.stopController(t)
		if err := s.b.Client.CoreV1().Pods(sp.name).Delete(t.Context(), "web-b-1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitAnswers(t, client, "tcp", hostPort(ip, 80), 20, podsA)
		// Back: failback to B's own.
		sp.echoPods(s.b, "web", "web-b-2")
		waitAnswers(t, client, "tcp", hostPort(ip, 80), 20, []string{"web-b-2"})
		if got := client.answers("tcp", hostPort(ip, 80), 20); strings.Contains(strings.Join(got, ","), "web-a") {
			t.Errorf("after failback A's pods still answer: %v", got)
		}
		startController(t)
	})

	// The attack: an exporter in A (or whoever holds the controller's
	// credentials) asks for RemoteAndLocal of a name whose Service in B
	// belongs to someone else, to put A's pods behind B's Service. B's
	// Service serves only its own pods until its owner accepts; when it
	// withdraws, A's pods leave it again.
	t.Run("RemoteAndLocal reaches B's own Service only with its owner's consent", func(t *testing.T) {
		sp := s.space(t, "e2e-native-consent")
		client := sp.client(s.b, "client")
		sp.service(s.a, "api", nil)
		own := sp.service(s.b, "api", nil)
		podsA := podNames(sp.echoPods(s.a, "api", "api-a-1"))
		podsB := podNames(sp.echoPods(s.b, "api", "api-b-1"))
		sp.exportWith(s.a, "api", mcsv1beta1.ServiceExportSpec{
			ExportedAnnotations: map[string]string{mcsproxy.AnnotationNativeNames: string(mcsproxy.RemoteAndLocal)},
		})
		ip := own.Spec.ClusterIP
		// The import is served (its clusterset IP reaches A), so the
		// proxies have decided: B's Service is B's alone.
		waitAnswers(t, client, "tcp", hostPort(sp.vip(s.b, "api"), 80), 20, podsA)
		sp.waitImport(s.b, "api", "saying B's Service did not accept", func(si *mcsv1beta1.ServiceImport) bool {
			c := meta.FindStatusCondition(si.Status.Conditions, "NativeNames")
			return c != nil && c.Reason == string(mcsproxy.ReasonNativeNamesNotAccepted)
		})
		if got := client.answers("tcp", hostPort(ip, 80), 20); !slices.Equal(got, podsB) {
			t.Errorf("B's own Service answered by %v without its owner's consent, want %v", got, podsB)
		}
		both := append(slices.Clone(podsA), podsB...)
		slices.Sort(both)
		sp.acceptNativeNames(s.b, "api", true)
		waitAnswers(t, client, "tcp", hostPort(ip, 80), 30, both)
		sp.acceptNativeNames(s.b, "api", false)
		waitAnswers(t, client, "tcp", hostPort(ip, 80), 20, podsB)
	})
}
