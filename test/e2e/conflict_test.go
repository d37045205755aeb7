package e2e

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func (s *suite) testConflict(t *testing.T) {
	sp := s.space(t, "e2e-conflict")
	client := sp.client(s.b, "client")

	t.Run("ports", func(t *testing.T) {
		sp := *sp
		sp.t = t
		// A exports first (the oldest export wins), B the same name with
		// another port.
		sp.service(s.a, "web", nil)
		sp.service(s.b, "web", func(spec *v1.ServiceSpec) {
			spec.Ports = []v1.ServicePort{{Name: "tcp", Port: 81, TargetPort: intstr.FromInt(8080)}}
		})
		podsA := podNames(sp.echoPods(s.a, "web", "web-a-1"))
		sp.echoPods(s.b, "web", "web-b-1")
		sp.export(s.a, "web")
		sp.waitImport(s.b, "web", "from A", func(si *mcsv1beta1.ServiceImport) bool { return len(si.Spec.IPs) > 0 })
		time.Sleep(1100 * time.Millisecond) // creation timestamps have a one-second resolution
		sp.export(s.b, "web")
		for _, c := range s.p.members() {
			eventually(t, 30*time.Second, c.Name+"'s export to carry Conflict=True/PortConflict", func() (bool, string) {
				got := sp.exportConditions(c, "web")
				return strings.Contains(got, "Conflict=True/") && strings.Contains(got, "PortConflict"), got
			})
		}
		si := sp.waitImport(s.b, "web", "with A's port only", func(si *mcsv1beta1.ServiceImport) bool {
			return len(si.Spec.Ports) == 1 && si.Spec.Ports[0].Port == 80
		})
		vip := si.Spec.IPs[0]
		waitAnswers(t, client, "tcp", hostPort(vip, 80), 30, podsA)
		if got := client.answers("tcp", hostPort(vip, 81), 3); len(got) > 0 {
			t.Errorf("the losing export's port 81 answers on the VIP: %v", got)
		}
	})

	t.Run("types", func(t *testing.T) {
		sp := *sp
		sp.t = t
		// A exports a ClusterIP Service first, B a headless one.
		sp.service(s.a, "db", nil)
		sp.service(s.b, "db", func(spec *v1.ServiceSpec) { spec.ClusterIP = v1.ClusterIPNone })
		podsA := podNames(sp.echoPods(s.a, "db", "db-a-1"))
		sp.echoPods(s.b, "db", "db-b-1")
		sp.export(s.a, "db")
		sp.waitImport(s.b, "db", "from A", func(si *mcsv1beta1.ServiceImport) bool { return len(si.Spec.IPs) > 0 })
		time.Sleep(1100 * time.Millisecond)
		sp.export(s.b, "db")
		for _, c := range s.p.members() {
			eventually(t, 30*time.Second, c.Name+"'s export to carry Conflict=True/TypeConflict", func() (bool, string) {
				got := sp.exportConditions(c, "db")
				return strings.Contains(got, "Conflict=True/") && strings.Contains(got, "TypeConflict"), got
			})
		}
		si := sp.waitImport(s.b, "db", "of A's type", func(si *mcsv1beta1.ServiceImport) bool {
			return si.Spec.Type == mcsv1beta1.ClusterSetIP && len(si.Spec.IPs) > 0
		})
		vip := si.Spec.IPs[0]
		// The winner's type holds: a VIP that reaches A's pods. (Whether
		// B's endpoints join is the controller's port rule: same port,
		// protocol and appProtocol.)
		eventually(t, 30*time.Second, "the VIP to reach A's pods", func() (bool, string) {
			got := client.answers("tcp", hostPort(vip, 80), 30)
			for _, p := range podsA {
				if !strings.Contains(strings.Join(got, ","), p) {
					return false, strings.Join(got, ",")
				}
			}
			return true, ""
		})
		t.Logf("VIP %s reaches %v", vip, client.answers("tcp", hostPort(vip, 80), 30))
	})
}
