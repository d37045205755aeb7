package mcs

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
	"k8s.io/multiclusterservices/clusterselection"
	"k8s.io/multiclusterservices/export"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// The planner: what every member should hold of one exported name, as a
// pure function of what the members' caches hold of it (a snapshot) and
// the controller's configuration. Reading the caches (readSnapshot),
// allocating clusterset IPs and writing into the members are the
// callers'; nothing here reads a cache, a clock or a lease, so each
// decision can be called with plain values, table-tested and rerun on
// the members in any order (TestPlan).

// snapshot is what the caches hold of one namespace/name across the
// members at one moment.
type snapshot struct {
	Namespace, Name string
	// Members are every member, synced or not, in no particular order.
	Members []memberSnapshot
	// Alive tells, by cluster ID, whose endpoint lease has not expired:
	// the members' and those of the clusters the members' imports list.
	Alive map[string]bool
	// Now bounds export creation times (export.BoundCreation).
	Now time.Time
	// Properties are, by cluster ID, the merged cluster properties of
	// each member whose properties are known; read only with cluster
	// selection on.
	Properties map[string]map[string]string
	// membership is the controller's membership count the members were
	// read at; not the planner's business, carried to the desired state.
	membership uint64
}

// memberSnapshot is what one member's caches hold of the name.
type memberSnapshot struct {
	ID string
	// Synced is false while the member's caches are not synced: nothing
	// else is known of it then.
	Synced bool
	// Export is the member's ServiceExport of the name (nil: none, or
	// being deleted); ClusterSelectors its KEP-5939 selectors, read only
	// with the gate on.
	Export           *mcsv1beta1.ServiceExport
	ClusterSelectors []csv1beta1.ClusterSelector
	// Service is the member's Service of the name, nil when none.
	Service *v1.Service
	// Namespace is the namespace of the name in the member, nil when
	// none.
	Namespace *v1.Namespace
	// Slices are the member's own EndpointSlices of the Service.
	Slices []*discoveryv1.EndpointSlice
	// EndpointRanges are where the member's endpoints may be, when
	// RangesKnown, and RangesSource whose word they are
	// (endpointRangesOf).
	EndpointRanges []netip.Prefix
	RangesKnown    bool
	RangesSource   string
	// IngressService is the Service of the name's ingress name in the
	// member, nil when none; Nodes are its nodes, nil when not listed.
	IngressService *v1.Service
	Nodes          []*v1.Node
	// ImportClusters are the status.clusters of the member's import of
	// the name, when this controller wrote one.
	ImportClusters []string
}

// plan is what the planner decides for one name.
type plan struct {
	// Desired is what every member should hold. Its import has no
	// clusterset IPs yet: allocating them is the caller's.
	Desired *desiredState
	// Conflicts are the fields the exports disagree on, for the metric.
	Conflicts []export.Conflict
	// Reports are the source slices, or their addresses, not mirrored,
	// for the source cluster's export to say once.
	Reports []sourceReport
}

// sourceReport says why a source cluster's slice, or some of its
// addresses, is not mirrored. Reason is the event's reason.
type sourceReport struct {
	Cluster string
	Slice   *discoveryv1.EndpointSlice
	Reason  string
	// Why explains a refusal by export.CheckSource; Dropped are the
	// addresses left out (outside the pod ranges, or vouched by nobody).
	Why     string
	Dropped []string
	// Service is the exported Service.
	Service *v1.Service
}

// Reasons of the events on an export whose slices are not mirrored, not
// named by export.SourceRefusal.
const (
	ReasonEndpointSliceNotMirrored  = "EndpointSliceNotMirrored"
	ReasonEndpointsOutsidePodRanges = "EndpointsOutsidePodRanges"
)

// planName decides what every member should hold of s's name.
func planName(cfg *Config, s snapshot) plan {
	ns, name := s.Namespace, s.Name
	refused := slices.Contains(cfg.RefusedNamespaces, ns)
	var exports []export.Export
	validity := map[string]export.Validity{}
	selectors := map[string][]csv1beta1.ClusterSelector{}
	byID := map[string]*memberSnapshot{}
	for i := range s.Members {
		m := &s.Members[i]
		byID[m.ID] = m
		if !m.Synced || m.Export == nil {
			continue
		}
		if refused {
			validity[m.ID] = export.NamespaceNotAllowed(ns)
			continue
		}
		if refusal := export.CheckExportNamespace(cfg.ExportNamespaces, m.ID, ns); refusal != nil {
			validity[m.ID] = *refusal
			continue
		}
		v := export.Validate(m.Service)
		if v.Valid {
			// Control data never travels in an exporter's maps.
			v = export.ValidateExportedMetadata(m.Export)
		}
		if v.Valid && cfg.ClusterSelection {
			v = export.ValidateClusterSelectors(m.Service, m.ClusterSelectors)
			selectors[m.ID] = m.ClusterSelectors
		}
		validity[m.ID] = v
		if v.Valid {
			var notBefore time.Time
			if m.Namespace != nil {
				notBefore = m.Namespace.CreationTimestamp.Time
			}
			se := export.BoundCreation(m.Export, notBefore, s.Now)
			exports = append(exports, export.Export{Cluster: m.ID, ServiceExport: se, Service: m.Service})
		}
	}

	r := export.Merge(exports)
	// Provision: the exporters may name the clusters whose endpoints serve
	// the name (in the oldest export's annotations, as every exported
	// annotation). The others' exports then shape and serve nothing; the
	// import keeps the annotations that said so.
	providers, limited := export.Providers(r.Annotations)
	var notProviding []string
	if limited {
		var serving []export.Export
		for _, e := range exports {
			if slices.Contains(providers, e.Cluster) {
				serving = append(serving, e)
			} else {
				notProviding = append(notProviding, e.Cluster)
			}
		}
		all := r
		exports = serving
		r = export.Merge(exports)
		r.Labels, r.Annotations, r.Conflicts = all.Labels, all.Annotations, all.Conflicts
	}
	var clusterSelectors []csv1beta1.ClusterSelector
	if cfg.ClusterSelection {
		var conflicts []export.Conflict
		clusterSelectors, conflicts = export.MergeClusterSelectors(exports, func(id string) []csv1beta1.ClusterSelector { return selectors[id] })
		r.Conflicts = append(r.Conflicts, conflicts...)
	}
	p := plan{Desired: &desiredState{ExportConditions: map[string][]metav1.Condition{}}, Conflicts: r.Conflicts}
	d := p.Desired
	readyMessage := ""
	if missing := s.withoutNamespace(); len(exports) > 0 && len(missing) > 0 {
		// KEP-1645: a service is imported only where its namespace exists.
		readyMessage = fmt.Sprintf("imported in %d of %d member clusters; namespace %q does not exist in: %s",
			len(s.Members)-len(missing), len(s.Members), ns, strings.Join(missing, ", "))
	}
	for id, v := range validity {
		d.ExportConditions[id] = export.ExportConditions(v, r.Conflicts, readyMessage)
		if slices.Contains(notProviding, id) {
			d.ExportConditions[id] = export.NotAProvider(v, id, providers, r.Conflicts)
		}
	}

	if len(exports) == 0 {
		d.Retain = s.retained()
		return p
	}
	d.Import = importOf(cfg, ns, name, r)
	d.Clusters = r.Clusters
	if r.Spec.Type == mcsv1beta1.ClusterSetIP {
		d.ClusterSelectors = clusterSelectors
		d.SelectorResults = planSelectorResults(s, clusterSelectors, r.Clusters)
	}
	d.Slices = map[string]*discoveryv1.EndpointSlice{}
	// An expired source cluster still counts for the import (its last
	// known export) but its endpoints are withdrawn, so that traffic
	// fails over to the sources that answer. When none answers, the
	// endpoints of all are kept, marked stale: withdrawing the last ones
	// would turn an outage of the hub's view (a cut link, the hub's own
	// network) into an outage of the service.
	var alive []string
	for _, e := range exports {
		if s.Alive[e.Cluster] {
			alive = append(alive, e.Cluster)
		}
	}
	if len(alive) == 0 {
		d.Stale = r.Clusters
	}
	for _, e := range exports {
		if len(alive) > 0 && !slices.Contains(alive, e.Cluster) {
			continue
		}
		m := byID[e.Cluster]
		// What a member may publish: slices Kubernetes wrote for the
		// exported Service, within where its endpoints may be, or,
		// where that is not known, what the writer vouches for.
		var own []*discoveryv1.EndpointSlice
		for _, src := range m.Slices {
			src, reports := trustedPart(cfg, m, src, e.Service)
			p.Reports = append(p.Reports, reports...)
			if src == nil {
				continue
			}
			if is := export.ImportedSlice(src, name, e.Cluster, cfg.ManagedBy, r.ServedPorts[e.Cluster], r.Spec.TrafficDistribution); is != nil {
				if dropped := export.KeepWithin(is, m.EndpointRanges); len(dropped) > 0 {
					p.Reports = append(p.Reports, sourceReport{Cluster: m.ID, Slice: src, Reason: ReasonEndpointsOutsidePodRanges, Dropped: dropped, Service: e.Service})
				}
				d.Slices[is.Name] = is
				own = append(own, is)
				if t, err := time.Parse(time.RFC3339Nano, src.Annotations[v1.EndpointsLastChangeTriggerTime]); err == nil {
					if d.Triggers == nil {
						d.Triggers = map[string]time.Time{}
					}
					d.Triggers[is.Name] = t
				}
			}
		}
		if needsIngress(cfg, e.Cluster, s.memberIDs()) {
			planIngress(cfg, m, e, r, own, d)
		}
	}
	for _, e := range exports {
		if note := withheldNote(p.Reports, byID[e.Cluster]); note != "" {
			sayInReady(d.ExportConditions[e.Cluster], note)
		}
	}
	return p
}

// withheldNote says, for m's export, how many of its endpoint addresses
// are withheld for lying outside where its endpoints may be, and whose
// word those ranges are; "" when none is.
func withheldNote(reports []sourceReport, m *memberSnapshot) string {
	n := 0
	for _, r := range reports {
		if r.Cluster == m.ID && (r.Reason == ReasonEndpointsOutsidePodRanges || r.Reason == ReasonEndpointRangesUnknown) {
			n += len(r.Dropped)
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d endpoint address(es) withheld: outside cluster %s's endpoint ranges (whose source is %s)", n, m.ID, m.RangesSource)
}

// sayInReady adds note to the message of the Ready condition of conds.
func sayInReady(conds []metav1.Condition, note string) {
	for i := range conds {
		if conds[i].Type == string(mcsv1beta1.ServiceExportConditionReady) {
			conds[i].Message += "; " + note
		}
	}
}

// importOf is the import of merge result r, without clusterset IPs.
func importOf(cfg *Config, ns, name string, r export.Result) *mcsv1beta1.ServiceImport {
	si := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   ns,
			Name:        name,
			Labels:      export.WithoutReservedKeys(r.Labels),
			Annotations: export.WithoutReservedKeys(r.Annotations),
		},
		Spec: r.Spec,
	}
	labels := map[string]string{}
	for k, v := range si.Labels {
		labels[k] = v
	}
	// Set last: an exported label cannot take an import away from us.
	labels[managedLabel] = cfg.ManagedBy
	si.Labels = labels
	return si
}

// trustedPart returns what of src, member m's own slice of Service svc,
// may be mirrored to the other members (nil: none of it), and reports
// what may not: a slice Kubernetes did not write for svc
// (export.CheckSource: its managed-by is a label anyone who writes slices
// sets, its owner is what the controllers really set), and, while m's
// endpoint ranges are unknown, the endpoints nothing vouches for
// (export.Vouched). The caller keeps the rest within the ranges when
// they are known (export.KeepWithin).
func trustedPart(cfg *Config, m *memberSnapshot, src *discoveryv1.EndpointSlice, svc *v1.Service) (*discoveryv1.EndpointSlice, []sourceReport) {
	switch refusal, why := export.CheckSource(src, svc, cfg.SourceManagers); refusal {
	case "":
	case export.SourceUntrustedManager:
		return nil, []sourceReport{{Cluster: m.ID, Slice: src, Reason: ReasonEndpointSliceNotMirrored, Service: svc}}
	default:
		return nil, []sourceReport{{Cluster: m.ID, Slice: src, Reason: string(refusal), Why: why, Service: svc}}
	}
	if m.RangesKnown {
		return src, nil
	}
	vouched, dropped := export.Vouched(src, svc)
	if len(dropped) == 0 {
		return vouched, nil
	}
	report := []sourceReport{{Cluster: m.ID, Slice: src, Reason: ReasonEndpointRangesUnknown, Dropped: dropped, Service: svc}}
	if len(vouched.Endpoints) == 0 {
		return nil, report
	}
	return vouched, report
}

// withoutNamespace returns the IDs of the synced members in which the
// name's namespace does not exist (or is terminating).
func (s snapshot) withoutNamespace() []string {
	var out []string
	for _, m := range s.Members {
		if m.Synced && (m.Namespace == nil || m.Namespace.Status.Phase == v1.NamespaceTerminating) {
			out = append(out, m.ID)
		}
	}
	slices.Sort(out)
	return out
}

// memberIDs returns the cluster IDs of every member.
func (s snapshot) memberIDs() []string {
	out := make([]string, 0, len(s.Members))
	for _, m := range s.Members {
		out = append(out, m.ID)
	}
	return out
}

// retained says whether an existing import of the name lists a source
// cluster whose exports are unknown right now but may still exist: not a
// synced member, and its lease not expired. The members' imports and
// slices are then left as they are rather than deleted on a guess.
func (s snapshot) retained() bool {
	synced := map[string]bool{}
	for _, m := range s.Members {
		synced[m.ID] = m.Synced
	}
	for _, m := range s.Members {
		for _, id := range m.ImportClusters {
			if !synced[id] && s.Alive[id] {
				return true
			}
		}
	}
	return false
}

// selectorOutcome is what the selectors of an import give one importing
// member: its clusterSelectorResults, or why they cannot be evaluated now
// (Failed; KEP-5939: the import's previous results then stay whole).
type selectorOutcome struct {
	Results []csv1beta1.ClusterSelectorResult
	Failed  string
}

// planSelectorResults evaluates the selectors with every synced member as
// the importing cluster over the import's source clusters.
func planSelectorResults(s snapshot, selectors []csv1beta1.ClusterSelector, clusters []string) map[string]selectorOutcome {
	if len(selectors) == 0 {
		return nil
	}
	sources := make([]clusterselection.Properties, 0, len(clusters))
	var unknown string
	for _, id := range clusters {
		props, ok := s.Properties[id]
		if !ok {
			unknown = fmt.Sprintf("the cluster properties of source cluster %s are not known yet", id)
			break
		}
		sources = append(sources, clusterselection.Properties{ID: id, Properties: props})
	}
	out := map[string]selectorOutcome{}
	for _, m := range s.Members {
		if !m.Synced {
			continue
		}
		own, ok := s.Properties[m.ID]
		switch {
		case !ok:
			out[m.ID] = selectorOutcome{Failed: fmt.Sprintf("the cluster properties of %s are not known yet", m.ID)}
		case unknown != "":
			out[m.ID] = selectorOutcome{Failed: unknown}
		default:
			results, err := clusterselection.Resolve(selectors, clusterselection.Properties{ID: m.ID, Properties: own}, sources)
			if err != nil {
				out[m.ID] = selectorOutcome{Failed: err.Error()}
			} else {
				out[m.ID] = selectorOutcome{Results: results}
			}
		}
	}
	return out
}
