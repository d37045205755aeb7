package e2e

import (
	"slices"
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

	t.Run("port sets and exported labels", func(t *testing.T) {
		sp := *sp
		sp.t = t
		// A exports first with one port and its labels; B adds a port
		// (same pods, second service port) and exports other labels
		// and annotations. The import exposes both ports, each reaching
		// only the clusters that expose it, and carries A's maps whole;
		// the port sets and maps are not identical, so both exports
		// say Conflict.
		sp.service(s.a, "api", nil)
		sp.service(s.b, "api", func(spec *v1.ServiceSpec) {
			spec.Ports = append(spec.Ports, v1.ServicePort{Name: "alt", Port: 81, TargetPort: intstr.FromInt(8080)})
		})
		podsA := podNames(sp.echoPods(s.a, "api", "api-a-1"))
		podsB := podNames(sp.echoPods(s.b, "api", "api-b-1"))
		sp.exportWith(s.a, "api", mcsv1beta1.ServiceExportSpec{
			ExportedLabels: map[string]string{"tier": "api"}, ExportedAnnotations: map[string]string{"owner": "team-a"},
		})
		sp.waitImport(s.b, "api", "from A", func(si *mcsv1beta1.ServiceImport) bool { return len(si.Spec.IPs) > 0 })
		time.Sleep(1100 * time.Millisecond)
		sp.exportWith(s.b, "api", mcsv1beta1.ServiceExportSpec{
			ExportedLabels: map[string]string{"tier": "api", "env": "b"}, ExportedAnnotations: map[string]string{"owner": "team-b"},
		})
		for _, c := range s.p.members() {
			eventually(t, 30*time.Second, c.Name+"'s export to carry Conflict=True/PortConflict,LabelsConflict,AnnotationsConflict", func() (bool, string) {
				got := sp.exportConditions(c, "api")
				return strings.Contains(got, "Conflict=True/PortConflict,LabelsConflict,AnnotationsConflict"), got
			})
		}
		for _, c := range s.p.members() {
			sp.waitImport(c, "api", "with both ports and A's labels and annotations only", func(si *mcsv1beta1.ServiceImport) bool {
				return len(si.Spec.Ports) == 2 && si.Labels["tier"] == "api" && si.Labels["env"] == "" &&
					si.Annotations["owner"] == "team-a"
			})
		}
		vip := sp.vip(s.b, "api")
		waitAnswers(t, client, "tcp", hostPort(vip, 80), 30, append(podsA, podsB...))
		waitAnswers(t, client, "tcp", hostPort(vip, 81), 30, podsB)
		for _, p := range podsA {
			if got := client.answers("tcp", hostPort(vip, 81), 20); slices.Contains(got, p) {
				t.Errorf("port 81, which only B exposes, reached A's pod %s: %v", p, got)
			}
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
