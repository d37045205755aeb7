package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
)

// waitMetric waits until the controller's /metrics holds line, e.g.
// `mcs_controller_clusters 3`; what is a line that says what.
func (r *runningController) waitMetric(t *testing.T, what, line string) {
	t.Helper()
	eventually(t, 30*time.Second, what, func() (bool, string) {
		out, err := httpGet("http://" + r.metrics + "/metrics")
		return strings.Contains(out, line), "no " + line + errString(err)
	})
}

// metricLine returns the lines of a /metrics text that start with name.
func metricLine(out, name string) string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, name) {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "; ")
}

// setExported sets the exportedLabels and exportedAnnotations of m's export.
func setExported(t *testing.T, m *testMember, ns, name string, labels, annotations map[string]string) {
	t.Helper()
	api := m.mcs.MulticlusterV1beta1().ServiceExports(ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		se, err := api.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		se.Spec.ExportedLabels, se.Spec.ExportedAnnotations = labels, annotations
		_, err = api.Update(context.Background(), se, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func createExport(t *testing.T, m *testMember, ns, name string) {
	t.Helper()
	_, err := m.mcs.MulticlusterV1beta1().ServiceExports(ns).Create(context.Background(), &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func deleteExport(t *testing.T, m *testMember, ns, name string) {
	t.Helper()
	if err := m.mcs.MulticlusterV1beta1().ServiceExports(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createExternalName(t *testing.T, m *testMember, ns, name string) {
	t.Helper()
	_, err := m.kube.CoreV1().Services(ns).Create(context.Background(), &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeExternalName, ExternalName: "example.com"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	createExport(t, m, ns, name)
}

func waitImport(t *testing.T, m *testMember, ns, name string, ok func(*mcsv1beta1.ServiceImport) bool) *mcsv1beta1.ServiceImport {
	t.Helper()
	var got *mcsv1beta1.ServiceImport
	eventually(t, 60*time.Second, fmt.Sprintf("import %s/%s in %s", ns, name, m.id), func() (bool, string) {
		si, err := m.mcs.MulticlusterV1beta1().ServiceImports(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got = si
		return ok(si), describeImport(si)
	})
	return got
}

// waitExportConditions waits until an export's conditions read want, e.g.
// "Valid=True/Valid Ready=True/Exported Conflict=False/NoConflicts".
func waitExportConditions(t *testing.T, m *testMember, ns, name, want string) *mcsv1beta1.ServiceExport {
	t.Helper()
	var se *mcsv1beta1.ServiceExport
	eventually(t, 60*time.Second, fmt.Sprintf("conditions of export %s/%s in %s", ns, name, m.id), func() (bool, string) {
		var err error
		se, err = m.mcs.MulticlusterV1beta1().ServiceExports(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		var got []string
		for _, typ := range []string{"Valid", "Ready", "Conflict"} {
			if c := meta.FindStatusCondition(se.Status.Conditions, typ); c != nil {
				got = append(got, fmt.Sprintf("%s=%s/%s", typ, c.Status, c.Reason))
			}
		}
		s := strings.Join(got, " ")
		return s == want, s
	})
	return se
}

// waitEvent waits for an event with reason on ServiceExport ns/name.
func waitEvent(t *testing.T, m *testMember, ns, name, reason string) {
	t.Helper()
	waitEventOn(t, m, "ServiceExport", ns, name, reason)
}

func waitEventOn(t *testing.T, m *testMember, kind, ns, name, reason string) {
	t.Helper()
	eventually(t, 30*time.Second, fmt.Sprintf("a %s event on %s %s/%s in %s", reason, kind, ns, name, m.id), func() (bool, string) {
		events, err := m.kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var got []string
		for _, e := range events.Items {
			if e.InvolvedObject.Name == name && e.InvolvedObject.Kind == kind {
				got = append(got, e.Reason)
				if strings.Contains(e.Reason, reason) {
					return true, ""
				}
			}
		}
		return false, strings.Join(got, ",")
	})
}

func importedSlices(t *testing.T, m *testMember, ns, name string) []discoveryv1.EndpointSlice {
	t.Helper()
	list, err := m.kube.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{LabelSelector: mcsv1beta1.LabelServiceName + "=" + name})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// waitSlices waits until a member's imported slices of ns/name read want:
// "<source>=<addrs> ports <name:port,...>" per source cluster, sorted, ";"
// separated.
func waitSlices(t *testing.T, m *testMember, ns, name, want string) {
	t.Helper()
	eventually(t, 60*time.Second, fmt.Sprintf("imported slices of %s/%s in %s", ns, name, m.id), func() (bool, string) {
		got := slicesString(importedSlices(t, m, ns, name))
		return got == want, got
	})
}

func slicesString(slices []discoveryv1.EndpointSlice) string {
	var parts []string
	for _, s := range slices {
		var addrs, ports []string
		for _, e := range s.Endpoints {
			addrs = append(addrs, e.Addresses...)
		}
		for _, p := range s.Ports {
			ports = append(ports, fmt.Sprintf("%s:%d", ptr.Deref(p.Name, ""), ptr.Deref(p.Port, 0)))
		}
		sort.Strings(addrs)
		sort.Strings(ports)
		parts = append(parts, fmt.Sprintf("%s=%s ports %s", s.Labels[mcsv1beta1.LabelSourceCluster], strings.Join(addrs, ","), strings.Join(ports, ",")))
	}
	sort.Strings(parts)
	return strings.Join(parts, ";")
}

// checkSliceMetadata checks the labels and owner of imported slices, and
// that kube-proxy would accept them.
func checkSliceMetadata(t *testing.T, m *testMember, ns, name string) {
	t.Helper()
	si, err := m.mcs.MulticlusterV1beta1().ServiceImports(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	opts := &mcsproxy.Options{TrustedManagers: []string{mcsproxy.DefaultManagedBy}}
	for _, s := range importedSlices(t, m, ns, name) {
		if s.Labels[discoveryv1.LabelManagedBy] != mcsproxy.DefaultManagedBy {
			t.Errorf("%s: managed-by %q", s.Name, s.Labels[discoveryv1.LabelManagedBy])
		}
		// kubernetes.io/service-name names the import's synthetic
		// Service, never a local one: kube-proxy hands the slice on as it is.
		if !mcsproxy.IsMultiClusterEndpointSlice(&s) || !mcsproxy.SharesImportService(&s) {
			t.Errorf("%s is not an MCS slice naming its import's synthetic Service: %v", s.Name, s.Labels)
		}
		if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != si.UID || s.OwnerReferences[0].Kind != "ServiceImport" {
			t.Errorf("%s: owner references %v, want the ServiceImport %s", s.Name, s.OwnerReferences, si.UID)
		}
		// The source's node names stay for its own proxies, in its own
		// member only; hints are the import's (no trafficDistribution:
		// none); Pods stay private.
		source := s.Labels[mcsv1beta1.LabelSourceCluster]
		for _, e := range s.Endpoints {
			if own := source == m.id; (e.NodeName != nil && *e.NodeName == "node-1") != own || e.Hints != nil || e.TargetRef != nil {
				t.Errorf("%s in %s: endpoint %v: want the source's node name node-1 in the source's member only, no hints, no target", s.Name, m.id, e)
			}
		}
		for _, proxyIn := range []string{source, "elsewhere"} {
			opts.LocalClusterID = proxyIn
			got, err := mcsproxy.EndpointSliceForImport(&s, opts)
			if err != nil {
				t.Errorf("kube-proxy would reject %s: %v", s.Name, err)
				continue
			}
			for _, e := range got.Endpoints {
				if keep := proxyIn == source && source == m.id; (e.NodeName != nil) != keep {
					t.Errorf("%s as kube-proxy of %s programs it: node name %v, want kept=%v", s.Name, proxyIn, e.NodeName, keep)
				}
			}
		}
	}
	opts.ClusterSetIPCIDRs, _ = mcsproxy.ParseCIDRs(mcsproxy.DefaultClusterSetIPCIDRs)
	if _, err := mcsproxy.ServiceForImport(si, opts); err != nil {
		t.Errorf("kube-proxy would reject the import: %v", err)
	}
}

// snapshot describes the imports and slices of ns/name in every member
// with their resource versions and clusterset IPs.
func snapshot(t *testing.T, members []*testMember, ns, name string) string {
	t.Helper()
	var parts []string
	for _, m := range members {
		si, err := m.mcs.MulticlusterV1beta1().ServiceImports(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, fmt.Sprintf("%s import rv=%s ips=%v", m.id, si.ResourceVersion, si.Spec.IPs))
		for _, s := range importedSlices(t, m, ns, name) {
			parts = append(parts, fmt.Sprintf("%s slice %s rv=%s", m.id, s.Name, s.ResourceVersion))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

func sliceVersions(t *testing.T, m *testMember, ns, name, source string) string {
	var parts []string
	for _, s := range importedSlices(t, m, ns, name) {
		if s.Labels[mcsv1beta1.LabelSourceCluster] == source {
			parts = append(parts, s.Name+"@"+s.ResourceVersion)
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func describeImport(si *mcsv1beta1.ServiceImport) string {
	if si == nil {
		return "<nil>"
	}
	ready := meta.FindStatusCondition(si.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady))
	return fmt.Sprintf("type=%s ips=%v ports=%s families=%v clusters=%s ready=%v", si.Spec.Type, si.Spec.IPs, portsString(si.Spec.Ports), si.Spec.IPFamilies, clustersString(si), ready)
}

func importReady(si *mcsv1beta1.ServiceImport) bool {
	return meta.IsStatusConditionTrue(si.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady))
}

func portsString(ports []mcsv1beta1.ServicePort) string {
	var out []string
	for _, p := range ports {
		out = append(out, fmt.Sprintf("%s:%d/%s", p.Name, p.Port, p.Protocol))
	}
	return strings.Join(out, ",")
}

func clustersString(si *mcsv1beta1.ServiceImport) string {
	var out []string
	for _, c := range si.Status.Clusters {
		out = append(out, c.Cluster)
	}
	return strings.Join(out, ",")
}

// mustFreePort is a free loopback port, for a component's endpoints.
func mustFreePort(t *testing.T) int {
	t.Helper()
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

func httpGet(url string) (string, error) {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body), nil
}
