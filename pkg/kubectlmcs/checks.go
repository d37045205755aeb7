package kubectlmcs

import (
	"fmt"
	"sort"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/multiclusterservices/export"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// ReasonProgrammed is the reason of kube-proxy's Normal event on an import
// it programmed after having refused it
// (pkg/proxy/multicluster.ReasonProgrammed).
const ReasonProgrammed = "Programmed"

// ReasonServingImports is the reason of the Normal event kube-proxy
// records on its Node while the MultiClusterServices gate is on
// (pkg/proxy/multicluster.ReasonServingImports), and
// reasonKubeProxyStarting that of upstream kube-proxy's start-up event on
// its Node.
const (
	ReasonServingImports    = "ServingServiceImports"
	reasonKubeProxyStarting = "Starting"
)

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

// IgnoredSlice is an EndpointSlice labelled with an import's name that
// kube-proxy does not program, and why.
type IgnoredSlice struct {
	Name   string
	Reason string
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
	// Hub is pull mode's hub as diagnose --hub-context read it: where a
	// source's liveness is (its agent's Lease), not in the importers.
	Hub *HubLiveness
}

// HubLiveness is what pull mode's hub says of the sources' liveness.
type HubLiveness struct {
	Context string
	// Unreachable says why the hub did not answer; empty when it did.
	Unreachable string
	// Leases are the agents' Leases by cluster ID (the member namespace).
	Leases map[string]*coordinationv1.Lease
	// TTL is the planner's --endpoint-ttl: a source whose Lease was
	// renewed longer ago has left the plan.
	TTL time.Duration
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
	// Slices are the MCS EndpointSlices of the import in this member that
	// its kube-proxy programs; Ignored are the others labelled with the
	// import's name, with why kube-proxy drops each (an untrusted
	// manager, an FQDN slice, ...). Nothing in them is checked or probed.
	Slices  []discoveryv1.EndpointSlice
	Ignored []IgnoredSlice
	// ImportIgnored says why kube-proxy would not program the import
	// itself; empty when it would.
	ImportIgnored string
	// Selection is the import's cluster selectors and this member's
	// results (KEP-5939); nil when not read.
	Selection *Selection
	// Leases are the source Leases (mcs-source-<cluster>) in this member.
	Leases []coordinationv1.Lease
	// Nodes are the member's nodes and what their kube-proxy reported.
	Nodes []NodeReport
	// DNS is what the member's DNS answered, or what it serves from.
	DNS DNSResult
	// Probe is what the probe pod found (diagnose --probe); nil when none
	// ran.
	Probe *ProbeOutcome
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
	if s.Hub != nil {
		out = append(out, hubLeaseChecks(s)...)
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
	return portList(ports, func(p v1.ServicePort) (int32, v1.Protocol) { return p.Port, p.Protocol })
}

func importPorts(ports []mcsv1beta1.ServicePort) string {
	return portList(ports, func(p mcsv1beta1.ServicePort) (int32, v1.Protocol) { return p.Port, p.Protocol })
}

// portList writes ports as "80/TCP,53/UDP", whichever API they come from.
func portList[P any](ports []P, number func(P) (int32, v1.Protocol)) string {
	var p []string
	for _, port := range ports {
		n, proto := number(port)
		p = append(p, fmt.Sprintf("%d/%s", n, protocol(proto)))
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

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ",")
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
