package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclientset "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"
)

// importPolicyBinding binds the policy that keeps ServiceImports and MCS
// EndpointSlices to the mcs-controller (kind-config/mcs-admission-policy.yaml).
const importPolicyBinding = "multicluster.x-k8s.io-controller-writes-imports"

// exportPolicyBinding binds the policy on what an export may carry to its
// import.
const exportPolicyBinding = "multicluster.x-k8s.io-exported-metadata"

// testCaptureAttack is the attack that once captured a Service's traffic:
// prod/db is exported from A; a user with the rights of a namespace admin
// in B's "attacker" namespace, after db is unexported, creates a
// ServiceImport with db's clusterset IP and a plain EndpointSlice labelled
// kubernetes.io/service-name: evil.clusterset pointing at their own pod;
// db is exported again. Every request from a pod in prod to db's
// clusterset IP must reach db's pods, and db's import must say if someone
// else claims its IP. It is run twice: as a member is installed (with the
// admission policies), where the attacker's writes are refused, and with
// the policies gone, where kube-proxy and the controller must hold alone.
func (s *suite) testCaptureAttack(t *testing.T) {
	prod := s.space(t, "e2e-prod")
	att := s.space(t, "e2e-attacker")
	prod.service(s.a, "db", nil)
	podsA := podNames(prod.echoPods(s.a, "db", "db-a-1"))
	evilPod := att.echoPods(s.b, "evil", "evil-1")["evil-1"]
	client := prod.client(s.b, "client")
	attacker := s.attackerIn(t, s.b, att.name)

	attack := func(t *testing.T, policies bool) {
		prod.export(s.a, "db")
		old := prod.vip(s.b, "db")
		waitAnswers(t, client, "tcp", hostPort(old, 80), 20, podsA)
		prod.unexport(s.a, "db")
		prod.waitNoImport(s.b, "db")

		evil := &mcsv1beta1.ServiceImport{
			ObjectMeta: metav1.ObjectMeta{Name: "evil"},
			Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{old},
				Ports: []mcsv1beta1.ServicePort{{Name: "tcp", Protocol: v1.ProtocolTCP, Port: 80}}},
		}
		forged := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "evil-forged", Labels: map[string]string{discoveryv1.LabelServiceName: "evil" + mcsproxy.ServiceNameSuffix}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("tcp"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{evilPod}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		}
		_, errImport := attacker.mcs.MulticlusterV1beta1().ServiceImports(att.name).Create(t.Context(), evil, metav1.CreateOptions{})
		_, errSlice := attacker.kube.DiscoveryV1().EndpointSlices(att.name).Create(t.Context(), forged, metav1.CreateOptions{})
		if policies {
			for what, err := range map[string]error{"ServiceImport": errImport, "EndpointSlice": errSlice} {
				if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy") {
					t.Errorf("the attacker's %s: %v, want refused by the admission policy", what, err)
				}
			}
		} else if errImport != nil || errSlice != nil {
			t.Fatalf("without the policies the attacker's writes must go through (the rest of the defence is under test): %v, %v", errImport, errSlice)
		}
		defer func() {
			_ = attacker.mcs.MulticlusterV1beta1().ServiceImports(att.name).Delete(t.Context(), "evil", metav1.DeleteOptions{})
			_ = attacker.kube.DiscoveryV1().EndpointSlices(att.name).Delete(t.Context(), "evil-forged", metav1.DeleteOptions{})
		}()
		time.Sleep(2 * time.Second) // the attacker's objects are older than db's new import

		prod.export(s.a, "db")
		si := prod.waitImport(s.b, "db", "with a clusterset IP", func(si *mcsv1beta1.ServiceImport) bool { return len(si.Spec.IPs) > 0 })
		vipNow := si.Spec.IPs[0]
		waitAnswers(t, client, "tcp", hostPort(vipNow, 80), 20, podsA)
		if got := client.answers("tcp", hostPort(vipNow, 80), 40); slices.Contains(got, "evil-1") || !slices.Equal(got, podsA) {
			t.Errorf("db's clusterset IP %s answered %v, want only %v", vipNow, got, podsA)
		}
		if vipNow == old && !policies {
			// The same IP: the attacker's import still claims it, and
			// db's import says so.
			prod.waitImport(s.b, "db", "saying another import claims its IP", func(si *mcsv1beta1.ServiceImport) bool {
				c := meta.FindStatusCondition(si.Status.Conditions, "ClusterSetIPConflict")
				return c != nil && c.Status == metav1.ConditionTrue && strings.Contains(c.Message, att.name+"/evil")
			})
		}
		if vipNow != old {
			// A new IP: the old one, which the attacker's import claims,
			// leads nowhere.
			if got := client.answers("tcp", hostPort(old, 80), 5); len(got) > 0 {
				t.Errorf("the attacker's import on %s answered %v", old, got)
			}
		}
		eventually(t, 30*time.Second, "db's export to say it is exported without conflict", func() (bool, string) {
			got := prod.exportConditions(s.a, "db")
			return got == "Valid=True/Valid Ready=True/Exported Conflict=False/NoConflicts", got
		})
		prod.unexport(s.a, "db")
		prod.waitNoImport(s.b, "db")
	}

	t.Run("with the admission policies", func(t *testing.T) { attack(t, true) })
	t.Run("without the admission policies", func(t *testing.T) {
		s.withoutPolicyBinding(t, s.b)
		attack(t, false)
	})
}

// attackerClients act as a user who has, in one namespace, the rights to
// ServiceImports and EndpointSlices that a generous namespace-admin Role
// grants, and nothing else.
type attackerClients struct {
	kube kubernetes.Interface
	mcs  mcsclientset.Interface
}

func (s *suite) attackerIn(t *testing.T, m *member, ns string) attackerClients {
	t.Helper()
	const user = "e2e-attacker"
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "namespace-admin"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"multicluster.x-k8s.io"}, Resources: []string{"serviceimports", "serviceexports"}, Verbs: []string{"*"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"*"}},
			{APIGroups: []string{""}, Resources: []string{"services", "pods"}, Verbs: []string{"*"}},
		},
	}
	if _, err := m.Client.RbacV1().Roles(ns).Create(t.Context(), role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if _, err := m.Client.RbacV1().RoleBindings(ns).Create(t.Context(), binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(m.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	return attackerClients{kube: kubernetes.NewForConfigOrDie(cfg), mcs: mcsclientset.NewForConfigOrDie(cfg)}
}

// withoutPolicyBinding removes, for the rest of t, the binding that keeps
// imports and MCS slices to the controller in m, and the other bindings
// named: a member installed without them.
func (s *suite) withoutPolicyBinding(t *testing.T, m *member, others ...string) {
	t.Helper()
	api := m.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	for _, name := range others {
		b, err := api.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the admission policy binding %s is not installed in %s: %v", name, m.Name, err)
		}
		if err := api.Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			restored := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: b.Name, Labels: b.Labels}, Spec: b.Spec}
			if _, err := api.Create(s.top.Context(), restored, metav1.CreateOptions{}); err != nil {
				s.top.Errorf("restoring %s in %s: %v", name, m.Name, err)
			}
		})
	}
	b, err := api.Get(t.Context(), importPolicyBinding, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the admission policy binding %s is not installed in %s: %v", importPolicyBinding, m.Name, err)
	}
	if err := api.Delete(t.Context(), importPolicyBinding, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		restored := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: b.Name, Labels: b.Labels}, Spec: b.Spec}
		if _, err := api.Create(s.top.Context(), restored, metav1.CreateOptions{}); err != nil {
			s.top.Errorf("restoring %s in %s: %v", importPolicyBinding, m.Name, err)
		}
	})
	// The apiserver stops enforcing it a moment later.
	probe := &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "default"},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.Headless, Ports: []mcsv1beta1.ServicePort{{Port: 80}}}}
	eventually(t, 30*time.Second, fmt.Sprintf("%s to stop enforcing %s", m.Name, importPolicyBinding), func() (bool, string) {
		_, err := m.MCS.MulticlusterV1beta1().ServiceImports("default").Create(t.Context(), probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil, errString(err)
	})
}

// testExportedAnnotationsCapture is the capture through exportedAnnotations:
// prod/db is exported from A; in B a user who may write Services, Pods
// and ServiceExports of her namespace exports a Service whose
// exportedAnnotations name a derived Service and, as the IPs proxies
// program for it, db's clusterset IP; db is unexported and exported again
// (its import is then younger than hers). Every request from a pod in B's
// prod to db's clusterset IP, sampled for 30 s while the controller runs,
// must reach db's pods, and her export must say why it is refused. Run
// with the admission policies (her export is refused at once) and without
// them (the controller must hold alone).
func (s *suite) testExportedAnnotationsCapture(t *testing.T) {
	victim := s.space(t, "e2e-victim")
	att := s.space(t, "e2e-exporter")
	victim.service(s.a, "db", nil)
	podsA := podNames(victim.echoPods(s.a, "db", "db-a-1"))
	att.service(s.b, "evil", nil)
	att.echoPods(s.b, "evil", "evil-1")
	client := victim.client(s.b, "client")
	attacker := s.attackerIn(t, s.b, att.name)

	attack := func(t *testing.T, policies bool) {
		victim.export(s.a, "db")
		vip := victim.vip(s.b, "db")
		waitAnswers(t, client, "tcp", hostPort(vip, 80), 20, podsA)

		evil := &mcsv1beta1.ServiceExport{
			ObjectMeta: metav1.ObjectMeta{Name: "evil"},
			Spec: mcsv1beta1.ServiceExportSpec{ExportedAnnotations: map[string]string{
				mcsproxy.AnnotationDerivedService: "derived-x", mcsproxy.AnnotationClusterSetIPs: vip,
			}},
		}
		_, err := attacker.mcs.MulticlusterV1beta1().ServiceExports(att.name).Create(t.Context(), evil, metav1.CreateOptions{})
		switch {
		case policies && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy")):
			t.Errorf("the attacker's ServiceExport: %v, want refused by the admission policy", err)
		case !policies && err != nil:
			t.Fatalf("without the policies the attacker's export must go through (the controller is under test): %v", err)
		}
		defer func() {
			_ = attacker.mcs.MulticlusterV1beta1().ServiceExports(att.name).Delete(t.Context(), "evil", metav1.DeleteOptions{})
		}()
		if !policies {
			eventually(t, 30*time.Second, "the attacker's export to be refused", func() (bool, string) {
				got := att.exportConditions(s.b, "evil")
				return got == "Valid=False/ReservedKey Ready=False/Failed Conflict=False/NoConflicts", got
			})
		}
		time.Sleep(2 * time.Second) // her export is older than db's new import

		victim.unexport(s.a, "db")
		victim.waitNoImport(s.b, "db")
		victim.export(s.a, "db")
		vipNow := victim.vip(s.b, "db")
		waitAnswers(t, client, "tcp", hostPort(vipNow, 80), 20, podsA)
		// A request not answered is asked once more at once, as a real
		// client's TCP retransmits a lost SYN (the test client gives up
		// on one after 300 ms): a capture answers from the attacker's
		// pod, and an import that lost its rules leaves both unanswered.
		// Ten requests a second: the sample is of what the controller
		// does over time, not a load test of a busy node (asked as fast
		// as the pod proxy answers, about 50 a second, a SYN now and then
		// waited past the client's 300 ms twice in a row on kind).
		counts, retried := map[string]int{}, 0
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
			next := time.Now().Add(time.Second)
			for name, n := range client.countAnswers(hostPort(vipNow, 80), 10) {
				if name != "" {
					counts[name] += n
					continue
				}
				for range n {
					retried++
					counts[client.ask("tcp", hostPort(vipNow, 80))]++
				}
			}
			time.Sleep(time.Until(next))
		}
		if counts["evil-1"] > 0 || counts[""] > 0 || counts[podsA[0]] == 0 {
			t.Errorf("over 30 s, db's clusterset IP %s was answered by %v (\"\": no answer, twice in a row), want %s only", vipNow, counts, podsA[0])
		}
		t.Logf("over 30 s, db's clusterset IP answered %v (%d asked again)", counts, retried)
		if si := victim.waitImport(s.b, "db", "ready", func(si *mcsv1beta1.ServiceImport) bool { return len(si.Spec.IPs) > 0 }); si.Annotations[mcsproxy.AnnotationClusterSetIPs] != "" {
			t.Errorf("db's import carries %s=%s", mcsproxy.AnnotationClusterSetIPs, si.Annotations[mcsproxy.AnnotationClusterSetIPs])
		}
		if _, err := s.b.MCS.MulticlusterV1beta1().ServiceImports(att.name).Get(t.Context(), "evil", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the attacker's refused export has an import: %v", err)
		}
		victim.unexport(s.a, "db")
		victim.waitNoImport(s.b, "db")
	}

	t.Run("with the admission policies", func(t *testing.T) { attack(t, true) })
	t.Run("without the admission policies", func(t *testing.T) {
		s.withoutPolicyBinding(t, s.b, exportPolicyBinding)
		attack(t, false)
	})
}
