package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// lifecycle: a conflict, unexport, Service deletion, the last export gone, and bad input.
func (s *controllerScenario) lifecycle(t *testing.T) {
	ctx, members, a, b, c, replica1, vip := s.ctx, s.members, s.a, s.b, s.c, s.replica1, s.vip
	// --- Conflict: c exports "http" on another port, plus a port of its
	// own. The oldest export's "http" wins; the port sets are not
	// identical, so every export says so, naming the clusters without
	// "metrics"; and c's slices carry only the port c really serves.
	exportService(t, c, "demo", "web", servicePorts("http", 8080, "metrics", 9090), endpoints2("10.3.0.1", "http", 8080, "metrics", 9090))
	for _, m := range members {
		waitImport(t, m, "demo", "web", func(si *mcsv1beta1.ServiceImport) bool {
			return portsString(si.Spec.Ports) == "http:80/TCP,metrics:9090/TCP" && clustersString(si) == "cluster-a,cluster-b,cluster-c"
		})
		waitSlices(t, m, "demo", "web", "cluster-a=10.1.0.1,10.1.0.2 ports http:8080;cluster-b=10.2.0.1 ports http:8080;cluster-c=10.3.0.1 ports metrics:9090")
		waitExportConditions(t, m, "demo", "web", "Valid=True/Valid Ready=True/Exported Conflict=True/PortConflict")
	}
	for _, m := range members {
		se, _ := m.mcs.MulticlusterV1beta1().ServiceExports("demo").Get(ctx, "web", metav1.GetOptions{})
		msg := meta.FindStatusCondition(se.Status.Conditions, "Conflict").Message
		if !strings.Contains(msg, `port "http"`) || !strings.Contains(msg, `"cluster-a"`) {
			t.Errorf("%s: conflict message does not name the field and the winner: %s", m.id, msg)
		}
		if !strings.Contains(msg, `Conflicting port "metrics". Using 9090/TCP from oldest service export in "cluster-c". 2/3 clusters disagree: cluster-a, cluster-b. Not exposed by cluster-a, cluster-b.`) {
			t.Errorf("%s: conflict message does not name the port the others lack: %s", m.id, msg)
		}
	}
	waitEvent(t, c, "demo", "web", "PortConflict")

	// --- Unexport: c's endpoints leave every member, the conflict clears.
	if err := c.mcs.MulticlusterV1beta1().ServiceExports("demo").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		waitSlices(t, m, "demo", "web", "cluster-a=10.1.0.1,10.1.0.2 ports http:8080;cluster-b=10.2.0.1 ports http:8080")
		waitImport(t, m, "demo", "web", func(si *mcsv1beta1.ServiceImport) bool {
			return portsString(si.Spec.Ports) == "http:80/TCP" && clustersString(si) == "cluster-a,cluster-b" && si.Spec.IPs[0] == vip
		})
	}
	waitExportConditions(t, a, "demo", "web", "Valid=True/Valid Ready=True/Exported Conflict=False/NoConflicts")

	// --- Service deletion: b's export becomes invalid, b's endpoints go.
	if err := b.kube.CoreV1().Services("demo").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitExportConditions(t, b, "demo", "web", "Valid=False/NoService Ready=False/Failed Conflict=False/NoConflicts")
	for _, m := range members {
		waitSlices(t, m, "demo", "web", "cluster-a=10.1.0.1,10.1.0.2 ports http:8080")
		waitImport(t, m, "demo", "web", func(si *mcsv1beta1.ServiceImport) bool {
			return clustersString(si) == "cluster-a" && si.Spec.IPs[0] == vip
		})
	}

	// --- Last export gone: the import and its slices go everywhere.
	if err := a.mcs.MulticlusterV1beta1().ServiceExports("demo").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		eventually(t, 30*time.Second, "demo/web removed from "+m.id, func() (bool, string) {
			_, err := m.mcs.MulticlusterV1beta1().ServiceImports("demo").Get(ctx, "web", metav1.GetOptions{})
			n := len(importedSlices(t, m, "demo", "web"))
			return apierrors.IsNotFound(err) && n == 0, fmt.Sprintf("import err %v, %d slices", err, n)
		})
	}
	// Nothing is exported now: the controller forgets every name.
	eventually(t, 30*time.Second, "the controller to forget names nobody exports", func() (bool, string) {
		out, err := httpGet("http://" + replica1.metrics + "/metrics")
		return strings.Contains(out, "\nmcs_controller_names_tracked 0\n"), metricLine(out, "mcs_controller_names_tracked") + errString(err)
	})

	// --- Bad input: a refused namespace, an ExternalName Service, a
	// namespace missing in one member.
	exportService(t, a, "default", "refused", servicePorts("http", 80), endpoints("http", 80, "10.1.0.9"))
	waitExportConditions(t, a, "default", "refused", "Valid=False/NamespaceNotAllowed Ready=False/Failed Conflict=False/NoConflicts")
	createExternalName(t, a, "demo", "external")
	waitExportConditions(t, a, "demo", "external", "Valid=False/InvalidServiceType Ready=False/Failed Conflict=False/NoConflicts")
	exportService(t, a, "partial", "solo", servicePorts("http", 80), endpoints("http", 80, "10.1.0.7"))
	for _, m := range []*testMember{a, b} {
		waitSlices(t, m, "partial", "solo", "cluster-a=10.1.0.7 ports http:80")
	}
	se := waitExportConditions(t, a, "partial", "solo", "Valid=True/Valid Ready=True/Exported Conflict=False/NoConflicts")
	if msg := meta.FindStatusCondition(se.Status.Conditions, "Ready").Message; !strings.Contains(msg, "cluster-c") {
		t.Errorf("Ready message does not say where the namespace is missing: %s", msg)
	}
	for _, ns := range []string{"default", "partial"} {
		if list, _ := c.mcs.MulticlusterV1beta1().ServiceImports(ns).List(ctx, metav1.ListOptions{}); len(list.Items) > 0 {
			t.Errorf("cluster-c has imports in %s: %v", ns, list.Items)
		}
	}
	if list, _ := a.mcs.MulticlusterV1beta1().ServiceImports("default").List(ctx, metav1.ListOptions{}); len(list.Items) > 0 {
		t.Errorf("an export from a refused namespace was imported")
	}
}

// replicas: failover, restart (nothing written), a member's outage within the TTL, and removing a member.
func (s *controllerScenario) replicas(t *testing.T) {
	ctx, kubeconfig, members, a, b, c, replica1, replica2, ttl := s.ctx, s.kubeconfig, s.members, s.a, s.b, s.c, s.replica1, s.replica2, s.ttl
	// --- A service for the restart, failover and outage phases.
	exportService(t, a, "demo", "api", servicePorts("grpc", 9000), endpoints("grpc", 9000, "10.1.1.1"))
	exportService(t, b, "demo", "api", servicePorts("grpc", 9000), endpoints("grpc", 9000, "10.2.1.1"))
	for _, m := range members {
		waitSlices(t, m, "demo", "api", "cluster-a=10.1.1.1 ports grpc:9000;cluster-b=10.2.1.1 ports grpc:9000")
	}
	time.Sleep(2 * time.Second) // let status writes settle
	before := snapshot(t, members, "demo", "api")

	// --- Failover: the leader stops, the standby takes over and serves.
	replica1.stop()
	waitLeader(t, a, "replica-2")
	exportService(t, c, "demo", "api", servicePorts("grpc", 9000), endpoints("grpc", 9000, "10.3.1.1"))
	for _, m := range members {
		waitSlices(t, m, "demo", "api", "cluster-a=10.1.1.1 ports grpc:9000;cluster-b=10.2.1.1 ports grpc:9000;cluster-c=10.3.1.1 ports grpc:9000")
	}
	deleteExport(t, c, "demo", "api")
	for _, m := range members {
		waitSlices(t, m, "demo", "api", "cluster-a=10.1.1.1 ports grpc:9000;cluster-b=10.2.1.1 ports grpc:9000")
	}
	time.Sleep(2 * time.Second)
	before = snapshot(t, members, "demo", "api")

	// --- Restart: a new controller process finds the same clusterset IP
	// and writes nothing.
	replica2.stop()
	replica3 := startController(t, kubeconfig, "replica-3", ttl)
	waitLeader(t, a, "replica-3")
	replica3.waitReady(t)
	eventually(t, 30*time.Second, "the controller's metrics", func() (bool, string) {
		out, err := httpGet("http://" + replica3.metrics + "/metrics")
		for _, want := range []string{"mcs_controller_clusters_reachable 3", "mcs_controller_clusterset_ips_allocated 2", "mcs_controller_member_queue_depth{cluster=\"cluster-a\"}", "mcs_controller_member_sync_duration_seconds_bucket"} {
			if !strings.Contains(out, want) {
				return false, "no " + want + errString(err)
			}
		}
		return true, ""
	})
	time.Sleep(5 * time.Second)
	if after := snapshot(t, members, "demo", "api"); after != before {
		t.Errorf("restart changed objects:\nbefore %s\nafter  %s", before, after)
	}

	// --- Outage: b's API is cut off from the controller. After the TTL
	// b's endpoints leave the members the controller can reach, and a's
	// slices are not touched; they come back when b returns.
	// A name only b exports keeps b's endpoints (fail static), marked
	// stale, since withdrawing them would help no client.
	exportService(t, b, "demo", "onlyb", servicePorts("grpc", 9000), endpoints("grpc", 9000, "10.2.2.1"))
	for _, m := range members {
		waitSlices(t, m, "demo", "onlyb", "cluster-b=10.2.2.1 ports grpc:9000")
	}
	aSlices := sliceVersions(t, c, "demo", "api", "cluster-a")
	b.link.cut()
	for _, m := range []*testMember{a, c} {
		waitSlices(t, m, "demo", "api", "cluster-a=10.1.1.1 ports grpc:9000")
	}
	for _, m := range []*testMember{a, c} {
		waitImport(t, m, "demo", "onlyb", func(si *mcsv1beta1.ServiceImport) bool {
			cond := meta.FindStatusCondition(si.Status.Conditions, "EndpointsStale")
			return cond != nil && cond.Status == metav1.ConditionTrue && strings.Contains(cond.Message, "cluster-b")
		})
		waitSlices(t, m, "demo", "onlyb", "cluster-b=10.2.2.1 ports grpc:9000")
		waitImport(t, m, "demo", "api", func(si *mcsv1beta1.ServiceImport) bool {
			cond := meta.FindStatusCondition(si.Status.Conditions, "EndpointsStale")
			return cond != nil && cond.Status == metav1.ConditionFalse
		})
	}
	if got := sliceVersions(t, c, "demo", "api", "cluster-a"); got != aSlices {
		t.Errorf("cluster-a's slices moved during cluster-b's outage: %s -> %s", aSlices, got)
	}
	if si, err := c.mcs.MulticlusterV1beta1().ServiceImports("demo").Get(ctx, "api", metav1.GetOptions{}); err != nil || clustersString(si) != "cluster-a,cluster-b" {
		t.Errorf("the import changed during the outage: %v %v", describeImport(si), err)
	}
	b.link.restore()
	for _, m := range members {
		waitSlices(t, m, "demo", "api", "cluster-a=10.1.1.1 ports grpc:9000;cluster-b=10.2.1.1 ports grpc:9000")
		waitImport(t, m, "demo", "onlyb", func(si *mcsv1beta1.ServiceImport) bool {
			cond := meta.FindStatusCondition(si.Status.Conditions, "EndpointsStale")
			return cond != nil && cond.Status == metav1.ConditionFalse
		})
	}

	// --- Removing a member: the controller restarts without cluster-b.
	// b's exports no longer count, and its endpoints leave the remaining
	// members once its lease (renewed by the previous run) expires.
	aSlices = sliceVersions(t, c, "demo", "api", "cluster-a")
	replica3.stop()
	replica4 := startController(t, kubeconfig, "replica-4", ttl, "cluster-a", "cluster-c")
	waitLeader(t, a, "replica-4")
	for _, m := range []*testMember{a, c} {
		waitImport(t, m, "demo", "api", func(si *mcsv1beta1.ServiceImport) bool { return clustersString(si) == "cluster-a" })
		waitSlices(t, m, "demo", "api", "cluster-a=10.1.1.1 ports grpc:9000")
	}
	if got := sliceVersions(t, c, "demo", "api", "cluster-a"); got != aSlices {
		t.Errorf("cluster-a's slices moved when cluster-b was removed: %s -> %s", aSlices, got)
	}
	replica4.stop()
}
