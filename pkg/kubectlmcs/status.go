package kubectlmcs

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	"k8s.io/multiclusterservices/catalog"
	"k8s.io/multiclusterservices/crdgate"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// admissionPolicies are the ValidatingAdmissionPolicies of
// deploy/member/mcs-admission-policy.yaml, each with a binding of its name.
var admissionPolicies = []string{
	"multicluster.x-k8s.io-controller-writes-imports",
	"multicluster.x-k8s.io-exported-metadata",
	"multicluster.x-k8s.io-clusterset-ip-ranges",
	"multicluster.x-k8s.io-controller-scope",
}

// mcsResources are the APIs a member serves for multi-cluster Services.
// in any of the versions named, as the controller reads them.
var mcsResources = []struct {
	resource schema.GroupResource
	versions []string
}{
	{schema.GroupResource{Group: mcsv1beta1.GroupVersion.Group, Resource: "serviceexports"}, []string{mcsv1beta1.GroupVersion.Version}},
	{schema.GroupResource{Group: mcsv1beta1.GroupVersion.Group, Resource: "serviceimports"}, []string{mcsv1beta1.GroupVersion.Version}},
	{aboutv1alpha1.Resource.GroupResource(), aboutv1alpha1.Versions},
}

// leaderLease is the mcs-controller's leader election Lease.
const leaderLease = "mcs-controller"

// MemberStatus is one member as status shows it.
type MemberStatus struct {
	Context     string `json:"context"`
	ClusterID   string `json:"clusterID"`
	Unreachable string `json:"unreachable,omitempty"`
	Version     string `json:"version,omitempty"`
	CRDs        int    `json:"crds"`
	Policies    int    `json:"policies"`
	// Nodes is the number of nodes; GateOn those whose kube-proxy has the
	// gate on, GateKnown those whose gate could be read.
	Nodes     int    `json:"nodes"`
	GateOn    int    `json:"gateOn"`
	GateKnown int    `json:"gateKnown"`
	Model     string `json:"model"`
	Exports   int    `json:"exports"`
	Imports   int    `json:"imports"`
	Conflicts int    `json:"conflicts"`
	// NotReady are the exports not yet valid and ready; WithoutIPs the
	// ClusterSetIP imports without their clusterset IPs.
	NotReady   int      `json:"exportsNotReady"`
	WithoutIPs int      `json:"importsWithoutIPs"`
	Stale      []string `json:"staleSources,omitempty"`
	// Leader is the mcs-controller's leader election Lease, where this
	// member holds it.
	Leader *LeaderStatus `json:"leader,omitempty"`
	// Membership is what the mcs-controller last told this member of its
	// membership, when that is not that it joined: refused (say, for
	// claiming another cluster ID) or left.
	Membership *MembershipStatus `json:"membership,omitempty"`
}

// MembershipStatus is the mcs-controller's last word to a member on its
// membership: an event on the member's ClusterProperty
// cluster.clusterset.k8s.io (pkg/controller/inventory, memberEvent).
type MembershipStatus struct {
	State   string      `json:"state"`
	Message string      `json:"message"`
	Time    metav1.Time `json:"time"`
}

// membershipStates are the reasons of the membership events, by state.
var membershipStates = map[string]string{"MemberJoined": "joined", "MemberRefused": "refused", "MemberLeft": "left"}

// membership reads the mcs-controller's last membership event in m; nil
// when there is none or it says the member joined.
func membership(ctx context.Context, m *member) *MembershipStatus {
	events, err := m.Kube.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=ClusterProperty,involvedObject.name=" + aboutv1alpha1.ClusterIDProperty})
	if err != nil {
		return nil
	}
	var last *MembershipStatus
	for _, e := range events.Items {
		state, ok := membershipStates[e.Reason]
		if !ok || e.ReportingController != "mcs-controller" {
			continue
		}
		at := e.EventTime.Time
		if at.IsZero() {
			at = e.LastTimestamp.Time
		}
		if last == nil || at.After(last.Time.Time) {
			last = &MembershipStatus{State: state, Message: e.Message, Time: metav1.NewTime(at)}
		}
	}
	if last == nil || last.State == "joined" {
		return nil
	}
	return last
}

// LeaderStatus is the mcs-controller's leader as its Lease says.
type LeaderStatus struct {
	Holder  string `json:"holder"`
	Healthy bool   `json:"healthy"`
	Detail  string `json:"detail"`
}

func gatherStatus(ctx context.Context, members []*member, o *options) []MemberStatus {
	out := make([]MemberStatus, len(members))
	done := make(chan struct{}, len(members))
	now := time.Now()
	for i, m := range members {
		go func() {
			defer func() { done <- struct{}{} }()
			out[i] = memberStatus(ctx, m, o, now)
		}()
	}
	for range members {
		<-done
	}
	return out
}

func memberStatus(ctx context.Context, m *member, o *options, now time.Time) MemberStatus {
	s := MemberStatus{Context: m.Context, ClusterID: m.ClusterID, Version: m.Version}
	if m.Err != nil {
		s.Unreachable = m.Err.Error()
		return s
	}
	for _, r := range mcsResources {
		if v, err := crdgate.Discover(m.Kube.Discovery(), r.resource, r.versions); err == nil && v != "" {
			s.CRDs++
		}
	}
	policies, _ := m.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().List(ctx, metav1.ListOptions{})
	bindings, _ := m.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().List(ctx, metav1.ListOptions{})
	if policies != nil && bindings != nil {
		for _, name := range admissionPolicies {
			hasPolicy := slices.ContainsFunc(policies.Items, func(p admissionPolicy) bool { return p.Name == name })
			hasBinding := slices.ContainsFunc(bindings.Items, func(b admissionBinding) bool { return b.Spec.PolicyName == name })
			if hasPolicy && hasBinding {
				s.Policies++
			}
		}
	}
	if nodes, err := m.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
		s.Nodes = len(nodes.Items)
		gated := nodesServingImports(ctx, m)
		for _, n := range nodes.Items {
			switch gateOf(ctx, m, n.Name, o.kubeProxyMetricsPort) {
			case "on":
				s.GateOn++
				s.GateKnown++
			case "off":
				s.GateKnown++
			default:
				// Its kube-proxy's announcement says the gate is on.
				if gated[n.Name] {
					s.GateOn++
					s.GateKnown++
				}
			}
		}
	}
	var imports []mcsv1beta1.ServiceImport
	if list, err := m.MCS.MulticlusterV1beta1().ServiceImports(v1.NamespaceAll).List(ctx, metav1.ListOptions{}); err == nil {
		imports = list.Items
	}
	var exports []mcsv1beta1.ServiceExport
	if list, err := m.MCS.MulticlusterV1beta1().ServiceExports(v1.NamespaceAll).List(ctx, metav1.ListOptions{}); err == nil {
		exports = list.Items
	}
	s.Imports, s.Exports = len(imports), len(exports)
	for _, e := range exports {
		if meta.IsStatusConditionTrue(e.Status.Conditions, string(mcsv1beta1.ServiceExportConditionConflict)) {
			s.Conflicts++
		}
		if !meta.IsStatusConditionTrue(e.Status.Conditions, string(mcsv1beta1.ServiceExportConditionValid)) ||
			!meta.IsStatusConditionTrue(e.Status.Conditions, string(mcsv1beta1.ServiceExportConditionReady)) {
			s.NotReady++
		}
	}
	for _, si := range imports {
		if si.Spec.Type == mcsv1beta1.ClusterSetIP && len(si.Spec.IPs) == 0 {
			s.WithoutIPs++
		}
	}
	s.Model = servedModel(imports)
	s.Membership = membership(ctx, m)
	if leases, err := m.Kube.CoordinationV1().Leases(o.leaseNamespace).List(ctx, metav1.ListOptions{}); err == nil {
		s.Stale = staleLeases(leases.Items, now)
		for _, l := range leases.Items {
			if l.Name == leaderLease {
				s.Leader = leaderStatus(l, now)
			}
		}
	}
	return s
}

// nodesServingImports are the nodes whose kube-proxy last announced, on
// its Node, that it programs ServiceImports (ReasonServingImports): its
// latest event of that kind is younger than its latest "Starting" event,
// which every kube-proxy records at start-up, so that a kube-proxy
// restarted with the gate off is not taken for one with the gate on.
func nodesServingImports(ctx context.Context, m *member) map[string]bool {
	out := map[string]bool{}
	events, err := m.Kube.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Node"})
	if err != nil {
		return out
	}
	latest := map[string]*v1.Event{}
	for i := range events.Items {
		e := &events.Items[i]
		if e.ReportingController != "kube-proxy" || (e.Reason != ReasonServingImports && e.Reason != reasonKubeProxyStarting) {
			continue
		}
		if prev := latest[e.InvolvedObject.Name]; prev == nil || eventTime(e).After(eventTime(prev)) {
			latest[e.InvolvedObject.Name] = e
		}
	}
	for node, e := range latest {
		out[node] = e.Reason == ReasonServingImports
	}
	return out
}

// servedModel says how a member is served, from what its imports carry:
// catalog or namespace sameness, then derived Services and native names.
func servedModel(imports []mcsv1beta1.ServiceImport) string {
	model := "sameness"
	var extra []string
	derived, native := false, false
	for _, si := range imports {
		if si.Annotations[catalog.AnnotationGlobalService] != "" {
			model = "catalog"
		}
		derived = derived || si.Annotations[mcsproxy.AnnotationDerivedService] != ""
		native = native || si.Annotations[mcsproxy.AnnotationNativeNames] != ""
	}
	if derived {
		extra = append(extra, "derived")
	}
	if native {
		extra = append(extra, "native")
	}
	return strings.Join(append([]string{model}, extra...), "+")
}

func leaderStatus(l coordinationv1.Lease, now time.Time) *LeaderStatus {
	holder := ""
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	fresh, detail := leaseFreshness(l, now)
	return &LeaderStatus{Holder: holder, Healthy: fresh && holder != "", Detail: detail}
}

// StatusLines renders status: a table of members, then the controller's
// leader and every unreachable member with its reason.
func StatusLines(members []MemberStatus) []string {
	rows := [][]string{{"CONTEXT", "CLUSTER", "REACH", "VERSION", "CRDS", "POLICY", "GATE-ON", "MODEL", "EXP", "IMP", "CONFL", "STALE"}}
	var notes []string
	leaders := 0
	for _, m := range members {
		if m.Unreachable != "" {
			rows = append(rows, []string{m.Context, orDash(m.ClusterID), "no", "-", "-", "-", "-", "-", "-", "-", "-", "-"})
			notes = append(notes, fmt.Sprintf("%s: unreachable: %s", m.Context, m.Unreachable))
			continue
		}
		gate := fmt.Sprintf("%d/%d", m.GateOn, m.Nodes)
		if m.GateKnown < m.Nodes {
			gate += "?"
		}
		rows = append(rows, []string{m.Context, orDash(m.ClusterID), "yes", m.Version,
			fmt.Sprintf("%d/%d", m.CRDs, len(mcsResources)), fmt.Sprintf("%d/%d", m.Policies, len(admissionPolicies)),
			gate, m.Model, fmt.Sprint(m.Exports), fmt.Sprint(m.Imports), fmt.Sprint(m.Conflicts), fmt.Sprint(len(m.Stale))})
		if ms := m.Membership; ms != nil {
			said := "refused by the mcs-controller"
			if ms.State != "refused" {
				said = "not a member of the clusterset"
			}
			notes = append(notes, fmt.Sprintf("%s: %s: %s", m.Context, said, ms.Message))
		}
		if len(m.Stale) > 0 {
			notes = append(notes, fmt.Sprintf("%s: stale source leases: %s", m.Context, strings.Join(m.Stale, ",")))
		}
		if m.GateKnown < m.Nodes {
			notes = append(notes, fmt.Sprintf("%s: gate of %d node(s) unknown (kube-proxy metrics not readable through the node proxy, no announcement on the Node)", m.Context, m.Nodes-m.GateKnown))
		}
		if l := m.Leader; l != nil {
			leaders++
			health := "healthy"
			if !l.Healthy {
				health = "unhealthy"
			}
			notes = append(notes, fmt.Sprintf("mcs-controller: leader %s (Lease in %s, %s): %s", orDash(l.Holder), m.Context, l.Detail, health))
		}
	}
	if leaders == 0 {
		notes = append(notes, "mcs-controller: no leader election Lease in any reachable member")
	}
	out := table(rows)
	for _, n := range notes {
		out = append(out, wrap(n, width, "  ")...)
	}
	return out
}

// Waiting says what keeps the clusterset from having converged, one line
// per reason: a member that does not answer, lacks an API, or was refused
// or left by the mcs-controller; no healthy leader; a stale source lease;
// an export not yet valid and ready, or in conflict; a ClusterSetIP import
// without its clusterset IPs. Nothing: every member joined and every
// import converged (status --wait).
func Waiting(members []MemberStatus) []string {
	var out []string
	leader := false
	for _, m := range members {
		if m.Unreachable != "" {
			out = append(out, fmt.Sprintf("%s: unreachable", m.Context))
			continue
		}
		if m.CRDs < len(mcsResources) {
			out = append(out, fmt.Sprintf("%s: serves %d of the %d multi-cluster APIs", m.Context, m.CRDs, len(mcsResources)))
		}
		if ms := m.Membership; ms != nil {
			out = append(out, fmt.Sprintf("%s: %s by the mcs-controller", m.Context, ms.State))
		}
		if len(m.Stale) > 0 {
			out = append(out, fmt.Sprintf("%s: stale source leases: %s", m.Context, strings.Join(m.Stale, ",")))
		}
		if m.NotReady > 0 {
			out = append(out, fmt.Sprintf("%s: %d export(s) not valid and ready", m.Context, m.NotReady))
		}
		if m.Conflicts > 0 {
			out = append(out, fmt.Sprintf("%s: %d export(s) in conflict", m.Context, m.Conflicts))
		}
		if m.WithoutIPs > 0 {
			out = append(out, fmt.Sprintf("%s: %d import(s) without a clusterset IP", m.Context, m.WithoutIPs))
		}
		leader = leader || (m.Leader != nil && m.Leader.Healthy)
	}
	if !leader {
		out = append(out, "mcs-controller: no healthy leader")
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

type (
	admissionPolicy  = admissionregistrationv1.ValidatingAdmissionPolicy
	admissionBinding = admissionregistrationv1.ValidatingAdmissionPolicyBinding
)
