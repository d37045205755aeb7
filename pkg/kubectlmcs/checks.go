package kubectlmcs

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/multiclusterservices/export"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// ReasonProgrammed is the reason of kube-proxy's Normal event on an import
// it programmed (pkg/proxy/multicluster.ReasonProgrammed).
const ReasonProgrammed = "Programmed"

// Check is one line of diagnose's checklist.
type Check struct {
	// Cluster is the member the check is about.
	Cluster string `json:"cluster"`
	// Subject is what was checked ("ServiceExport", "DNS", ...).
	Subject string `json:"subject"`
	Passed  bool   `json:"passed"`
	// Detail is what was found: on a failure, the reason.
	Detail string `json:"detail"`
	// Fix is what to do about a failure.
	Fix string `json:"fix,omitempty"`
}

// ServiceState is everything diagnose reads about one exported name.
type ServiceState struct {
	Namespace, Name string
	// Members in the order of the command line.
	Members []MemberState
	// Importers are the contexts whose import side is checked.
	Importers []string
	// Now is when the state was read: lease ages are relative to it.
	Now time.Time
}

// MemberState is one member's view of the name.
type MemberState struct {
	Context, ClusterID string
	// Unreachable says why the member's API did not answer; empty when it did.
	Unreachable string
	Service     *v1.Service
	// ServiceSlices are the Service's own EndpointSlices (exporters only).
	ServiceSlices []discoveryv1.EndpointSlice
	// ServiceWarning is the Service's latest Warning event ("Reason:
	// message"), what says why it has no EndpointSlice.
	ServiceWarning string
	Export         *mcsv1beta1.ServiceExport
	Import         *mcsv1beta1.ServiceImport
	// DerivedService is the Service a derived import names, in this member.
	DerivedService *v1.Service
	// Slices are the MCS EndpointSlices of the import in this member.
	Slices []discoveryv1.EndpointSlice
	// Leases are the source Leases (mcs-source-<cluster>) in this member.
	Leases []coordinationv1.Lease
	// Nodes are the member's nodes and what their kube-proxy reported.
	Nodes []NodeReport
	// DNS is what the member's DNS answered, or what it serves from.
	DNS DNSResult
}

// NodeReport is what a node's kube-proxy reported about the import.
type NodeReport struct {
	Name string
	// Gate is "on", "off" or "" (unknown): kube-proxy's
	// kubernetes_feature_enabled{name="MultiClusterServices"}.
	Gate string
	// Last is kube-proxy's latest event on the import from this node.
	Last *NodeEvent
}

// NodeEvent is a kube-proxy event on an import.
type NodeEvent struct {
	Type, Reason, Note string
}

// DNSResult is the answer to the clusterset name, or the objects that
// stand in for it.
type DNSResult struct {
	// Queried is true when a question was asked (From says where); false
	// when only the objects CoreDNS serves from were read.
	Queried bool
	From    string
	Answer  []string
	Err     string
}

// SourceLeasePrefix starts the name of a source cluster's Lease.
const SourceLeasePrefix = "mcs-source-"

// Diagnose turns the state of one name into its checklist, exporters first,
// then each importer's import, slices, leases, nodes and DNS.
func Diagnose(s ServiceState) []Check {
	var out []Check
	ref := s.Namespace + "/" + s.Name
	exporters := 0
	for _, m := range s.Members {
		if m.Unreachable != "" {
			out = append(out, Check{Cluster: m.Context, Subject: "member", Detail: "unreachable: " + m.Unreachable,
				Fix: "check the context's server and credentials; its exports and leases are unknown"})
			continue
		}
		if m.Export == nil {
			continue
		}
		exporters++
		out = append(out, exportChecks(m, ref)...)
	}
	if exporters == 0 {
		withService := []string{}
		for _, m := range s.Members {
			if m.Service != nil {
				withService = append(withService, m.Context)
			}
		}
		c := Check{Cluster: "clusterset", Subject: "ServiceExport", Detail: "no member exports " + ref}
		if len(withService) > 0 {
			c.Detail += " (Service found in " + strings.Join(withService, ", ") + ")"
			c.Fix = fmt.Sprintf("create a ServiceExport %s in %s", ref, strings.Join(withService, ", "))
		} else {
			c.Fix = "create the Service and a ServiceExport of the same name in the exporting cluster"
		}
		out = append(out, c)
	}
	for _, ctx := range s.Importers {
		m := s.member(ctx)
		if m == nil || m.Unreachable != "" {
			continue
		}
		out = append(out, importChecks(*m, s, ref)...)
	}
	return out
}

func (s ServiceState) member(ctx string) *MemberState {
	for i := range s.Members {
		if s.Members[i].Context == ctx {
			return &s.Members[i]
		}
	}
	return nil
}

func exportChecks(m MemberState, ref string) []Check {
	var out []Check
	if m.Service == nil {
		out = append(out, Check{Cluster: m.Context, Subject: "Service", Detail: "no Service " + ref + " beside the export",
			Fix: "create the Service, or delete the ServiceExport"})
	} else {
		out = append(out, Check{Cluster: m.Context, Subject: "Service", Passed: true, Detail: describeService(m.Service)})
		if m.Service.Spec.Type != v1.ServiceTypeExternalName {
			out = append(out, serviceEndpointsCheck(m))
		}
	}
	conds := m.Export.Status.Conditions
	valid := meta.FindStatusCondition(conds, string(mcsv1beta1.ServiceExportConditionValid))
	switch {
	case valid == nil:
		out = append(out, Check{Cluster: m.Context, Subject: "ServiceExport", Detail: "no Valid condition: the mcs-controller has not seen it",
			Fix: "check that the mcs-controller runs and serves this member (kubectl mcs status)"})
		return out
	case valid.Status != metav1.ConditionTrue:
		out = append(out, Check{Cluster: m.Context, Subject: "ServiceExport", Detail: fmt.Sprintf("invalid (%s): %s", valid.Reason, valid.Message),
			Fix: invalidFix(valid.Reason)})
		return out
	}
	conflict := meta.FindStatusCondition(conds, string(mcsv1beta1.ServiceExportConditionConflict))
	if conflict != nil && conflict.Status == metav1.ConditionTrue {
		out = append(out, Check{Cluster: m.Context, Subject: "ServiceExport", Detail: fmt.Sprintf("conflict (%s): %s", conflict.Reason, conflict.Message),
			Fix: "make the conflicting fields of " + ref + " identical in every exporting cluster; the oldest export wins meanwhile"})
		return out
	}
	ready := meta.FindStatusCondition(conds, string(mcsv1beta1.ServiceExportConditionReady))
	if ready != nil && ready.Status != metav1.ConditionTrue && ready.Reason == export.ReasonNotAProvider {
		// Cluster selection decided it: a choice, not a fault.
		out = append(out, Check{Cluster: m.Context, Subject: "ServiceExport", Passed: true, Detail: "valid, not a provider: " + ready.Message})
		return out
	}
	if ready != nil && ready.Status != metav1.ConditionTrue {
		out = append(out, Check{Cluster: m.Context, Subject: "ServiceExport", Detail: fmt.Sprintf("not ready (%s): %s", ready.Reason, ready.Message),
			Fix: "see the export's events (kubectl describe serviceexport)"})
		return out
	}
	out = append(out, Check{Cluster: m.Context, Subject: "ServiceExport", Passed: true, Detail: "valid, no conflict" + readyWord(ready)})
	return out
}

// serviceEndpointsCheck: the endpoints the exporting cluster has to give,
// in the Service's own EndpointSlices.
func serviceEndpointsCheck(m MemberState) Check {
	c := Check{Cluster: m.Context, Subject: "Service endpoints"}
	ready, total := 0, 0
	for _, s := range m.ServiceSlices {
		for _, ep := range s.Endpoints {
			total += len(ep.Addresses)
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				ready += len(ep.Addresses)
			}
		}
	}
	switch {
	case len(m.ServiceSlices) == 0:
		c.Detail = "no EndpointSlice"
		if m.ServiceWarning != "" {
			c.Detail += "; last warning: " + m.ServiceWarning
		}
		c.Fix = "kube-controller-manager writes them: see the Service's events"
	case ready == 0:
		c.Detail = fmt.Sprintf("0 ready of %d", total)
		c.Fix = "no pod of the Service is ready here: check its selector and the pods' readiness"
	default:
		c.Passed, c.Detail = true, fmt.Sprintf("%d ready of %d", ready, total)
	}
	return c
}

func readyWord(ready *metav1.Condition) string {
	if ready == nil {
		return ""
	}
	return ", ready"
}

func invalidFix(reason string) string {
	switch reason {
	case string(mcsv1beta1.ServiceExportReasonNoService):
		return "create the Service the export names, in the same namespace"
	case string(mcsv1beta1.ServiceExportReasonInvalidServiceType):
		return "ExternalName Services cannot be exported; export a ClusterIP or headless Service"
	case string(export.ReasonNamespaceNotAllowed):
		return "export from a namespace the mcs-controller serves (its --refuse-namespaces, --export-namespaces)"
	}
	return "see the condition's message and the export's events"
}

func describeService(svc *v1.Service) string {
	kind := "ClusterIP " + svc.Spec.ClusterIP
	switch {
	case svc.Spec.Type == v1.ServiceTypeExternalName:
		kind = "ExternalName " + svc.Spec.ExternalName
	case svc.Spec.ClusterIP == v1.ClusterIPNone:
		kind = "headless"
	}
	return kind + ", ports " + servicePorts(svc.Spec.Ports)
}

func servicePorts(ports []v1.ServicePort) string {
	var p []string
	for _, port := range ports {
		p = append(p, fmt.Sprintf("%d/%s", port.Port, protocol(port.Protocol)))
	}
	if len(p) == 0 {
		return "none"
	}
	return strings.Join(p, ",")
}

func importPorts(ports []mcsv1beta1.ServicePort) string {
	var p []string
	for _, port := range ports {
		p = append(p, fmt.Sprintf("%d/%s", port.Port, protocol(port.Protocol)))
	}
	if len(p) == 0 {
		return "none"
	}
	return strings.Join(p, ",")
}

func protocol(p v1.Protocol) v1.Protocol {
	if p == "" {
		return v1.ProtocolTCP
	}
	return p
}

// importSources are the source clusters an import lists.
func importSources(si *mcsv1beta1.ServiceImport) []string {
	var out []string
	for _, c := range si.Status.Clusters {
		out = append(out, c.Cluster)
	}
	sort.Strings(out)
	return out
}

func importChecks(m MemberState, s ServiceState, ref string) []Check {
	var out []Check
	if m.Import == nil {
		if annotations, ok := selection(s); ok && !export.Consumes(annotations, m.ClusterID) {
			return append(out, Check{Cluster: m.Context, Subject: "ServiceImport", Passed: true,
				Detail: "none: not a consumer cluster (" + export.AnnotationConsumerClusters + "=" + annotations[export.AnnotationConsumerClusters] + ")"})
		}
		return append(out, Check{Cluster: m.Context, Subject: "ServiceImport", Detail: "no ServiceImport " + ref,
			Fix: "export " + ref + " from a member, and check that the mcs-controller serves " + m.Context})
	}
	si := m.Import
	sources := importSources(si)
	headless := si.Spec.Type == mcsv1beta1.Headless
	what := "headless"
	if !headless {
		what = "ClusterSetIP " + strings.Join(si.Spec.IPs, ",")
	}
	c := Check{Cluster: m.Context, Subject: "ServiceImport", Detail: fmt.Sprintf("%s, ports %s, sources %s",
		what, importPorts(si.Spec.Ports), orNone(sources))}
	switch {
	case !headless && len(si.Spec.IPs) == 0:
		c.Detail = "no clusterset IP yet, sources " + orNone(sources)
		c.Fix = "the mcs-controller allocates it: check its health (kubectl mcs status)"
	case len(sources) == 0:
		c.Fix = "no source cluster: check the exports above"
	default:
		c.Passed = true
	}
	out = append(out, c)
	out = append(out, modeChecks(m, ref)...)
	out = append(out, sliceChecks(m, sources)...)
	out = append(out, leaseChecks(m, sources, s.Now)...)
	if !headless {
		out = append(out, nodeChecks(m)...)
	}
	out = append(out, dnsCheck(m, ref, headless))
	return out
}

// selection returns the exportedAnnotations of the exports, where one
// limits the consumer clusters.
func selection(s ServiceState) (map[string]string, bool) {
	for _, m := range s.Members {
		if m.Export == nil {
			continue
		}
		if _, ok := m.Export.Spec.ExportedAnnotations[export.AnnotationConsumerClusters]; ok {
			return m.Export.Spec.ExportedAnnotations, true
		}
	}
	return nil, false
}

// modeChecks say what derived mode and native names decided for the
// import in this member.
func modeChecks(m MemberState, ref string) []Check {
	var out []Check
	si := m.Import
	if name := si.Annotations[mcsproxy.AnnotationDerivedService]; name != "" {
		c := Check{Cluster: m.Context, Subject: "derived Service " + name}
		switch {
		case m.DerivedService == nil:
			c.Detail = "missing: this member is served in derived mode, its clients need that Service"
			c.Fix = "the mcs-controller writes it (--derived-members): check its events on the import"
		case !sameAddresses(m.DerivedService.Spec.ClusterIPs, si.Spec.IPs):
			c.Detail = fmt.Sprintf("cluster IPs %s, the import says %s", orNone(m.DerivedService.Spec.ClusterIPs), orNone(si.Spec.IPs))
			c.Fix = "the mcs-controller writes the import's IPs after the Service: wait, or check its log"
		default:
			c.Passed, c.Detail = true, "cluster IPs "+strings.Join(si.Spec.IPs, ",")+" (served by upstream kube-proxy's Service path)"
		}
		out = append(out, c)
	}
	if mode := si.Annotations[mcsproxy.AnnotationNativeNames]; mode != "" {
		c := Check{Cluster: m.Context, Subject: "native names (" + mode + ")"}
		if m.Service == nil {
			c.Detail = "no Service " + ref + " here to answer the cluster.local name"
			c.Fix = "the mcs-controller creates a selector-less one: check its events on the import"
		} else {
			c.Passed, c.Detail = true, "Service "+ref+" "+m.Service.Spec.ClusterIP+" serves the clusterset's endpoints (decided per node by kube-proxy)"
		}
		out = append(out, c)
	}
	return out
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ",")
}

func sliceChecks(m MemberState, sources []string) []Check {
	ready := map[string]int{}
	total := map[string]int{}
	for _, slice := range m.Slices {
		src := slice.Labels[mcsv1beta1.LabelSourceCluster]
		for _, ep := range slice.Endpoints {
			total[src] += len(ep.Addresses)
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				ready[src] += len(ep.Addresses)
			}
		}
	}
	var out []Check
	for _, src := range sources {
		c := Check{Cluster: m.Context, Subject: "EndpointSlices from " + src,
			Detail: fmt.Sprintf("%d ready of %d endpoints", ready[src], total[src])}
		switch {
		case total[src] == 0:
			c.Detail = "none"
			c.Fix = "no endpoints of " + src + " here: its pods are not ready, or its lease expired"
		case ready[src] == 0:
			c.Fix = "no ready endpoint in " + src + ": check its pods' readiness"
		default:
			c.Passed = true
		}
		out = append(out, c)
	}
	return out
}

func leaseChecks(m MemberState, sources []string, now time.Time) []Check {
	var out []Check
	for _, src := range sources {
		name := SourceLeasePrefix + src
		c := Check{Cluster: m.Context, Subject: "Lease " + name}
		i := slices.IndexFunc(m.Leases, func(l coordinationv1.Lease) bool { return l.Name == name })
		if i < 0 {
			c.Detail = "missing"
			c.Fix = "the mcs-controller writes it while " + src + " answers: check both (kubectl mcs status)"
			out = append(out, c)
			continue
		}
		fresh, detail := leaseFreshness(m.Leases[i], now)
		c.Passed, c.Detail = fresh, detail
		if !fresh {
			c.Fix = src + "'s API has not answered the mcs-controller: its endpoints are withdrawn (or kept if it is the only source)"
		}
		out = append(out, c)
	}
	return out
}

// leaseFreshness says whether a Lease was renewed within its duration.
func leaseFreshness(l coordinationv1.Lease, now time.Time) (bool, string) {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return false, "never renewed"
	}
	age := now.Sub(l.Spec.RenewTime.Time)
	ttl := time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	if age > ttl {
		return false, fmt.Sprintf("stale: renewed %s ago, TTL %s", shortDuration(age), shortDuration(ttl))
	}
	return true, fmt.Sprintf("renewed %s ago, TTL %s", shortDuration(age), shortDuration(ttl))
}

func nodeChecks(m MemberState) []Check {
	var out []Check
	for _, n := range m.Nodes {
		c := Check{Cluster: m.Context, Subject: "kube-proxy on " + n.Name}
		switch {
		case n.Gate == "off":
			c.Detail = "MultiClusterServices gate off: clusterset IPs get no rules on this node"
			c.Fix = "run kube-proxy with --feature-gates=MultiClusterServices=true (featureGates in its config file)"
		case n.Last != nil && n.Last.Type == v1.EventTypeWarning:
			c.Detail = fmt.Sprintf("refused (%s): %s", n.Last.Reason, n.Last.Note)
			c.Fix = refusalFix(n.Last.Reason)
		case n.Last != nil && n.Last.Reason == ReasonProgrammed:
			c.Passed, c.Detail = true, "programmed"
		case n.Gate == "on":
			c.Passed, c.Detail = true, "gate on, no refusal reported"
		default:
			c.Passed, c.Detail = true, "no refusal reported (gate not readable)"
		}
		out = append(out, c)
	}
	return out
}

func refusalFix(reason string) string {
	switch reason {
	case string(mcsproxy.ReasonIPInUseByImport), string(mcsproxy.ReasonIPInUseByService):
		return "another import or a local Service holds this IP: the older one keeps it (kubectl mcs get imports -A)"
	case string(mcsproxy.ReasonIPOutsideClusterSetCIDR):
		return "the import's IPs are outside kube-proxy's --clusterset-ip-cidrs: align them with the mcs-controller's"
	case string(mcsproxy.ReasonUntrustedManager):
		return "only the mcs-controller may write imports: check who wrote this one"
	}
	return "see kube-proxy's log on the node"
}

func dnsCheck(m MemberState, ref string, headless bool) Check {
	parts := strings.SplitN(ref, "/", 2)
	name := parts[1] + "." + parts[0] + ".svc.clusterset.local"
	c := Check{Cluster: m.Context, Subject: "DNS " + name}
	want := m.Import.Spec.IPs
	if headless {
		want = readyAddresses(m.Slices)
	}
	d := m.DNS
	if d.Queried && len(want) > 0 {
		// One question, of the primary family: the addresses of that family.
		v6 := strings.Contains(want[0], ":")
		want = slices.DeleteFunc(slices.Clone(want), func(a string) bool { return strings.Contains(a, ":") != v6 })
	}
	if !d.Queried {
		// No pod to ask from: what CoreDNS's multicluster option serves.
		c.Subject = "DNS (objects only)"
		if len(want) == 0 {
			c.Detail = "nothing to serve for " + name + ": no IP or ready endpoint"
			c.Fix = "see the checks above"
			return c
		}
		c.Passed, c.Detail = true, name+" would be "+strings.Join(want, ",")+"; not asked (pass --dns-pod)"
		return c
	}
	switch {
	case d.Err != "":
		c.Detail = "no answer from " + d.From + ": " + d.Err
		c.Fix = "check CoreDNS (kube-system/kube-dns) and its multicluster clusterset.local option"
	case !sameAddresses(d.Answer, want):
		c.Detail = fmt.Sprintf("answered %s, want %s (asked from %s)", orNone(d.Answer), orNone(want), d.From)
		c.Fix = "CoreDNS serves another answer: check its kubernetes plugin's multicluster option and its RBAC"
	default:
		c.Passed, c.Detail = true, strings.Join(d.Answer, ",")+" (asked from "+d.From+")"
	}
	return c
}

func readyAddresses(slices []discoveryv1.EndpointSlice) []string {
	var out []string
	for _, s := range slices {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				out = append(out, ep.Addresses...)
			}
		}
	}
	return out
}

func sameAddresses(a, b []string) bool {
	norm := func(in []string) []string {
		var out []string
		for _, s := range in {
			if ip, err := netip.ParseAddr(strings.TrimSpace(s)); err == nil {
				out = append(out, ip.String())
			}
		}
		sort.Strings(out)
		return out
	}
	na, nb := norm(a), norm(b)
	return len(na) > 0 && slices.Equal(na, nb)
}

// shortDuration prints d as kubectl prints ages.
func shortDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d.Round(time.Second)/time.Second))
	case d < 2*time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}

// Failed counts the failed checks.
func Failed(checks []Check) int {
	n := 0
	for _, c := range checks {
		if !c.Passed {
			n++
		}
	}
	return n
}
