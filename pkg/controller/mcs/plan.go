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
	// IgnoredSelectors is how many clusterSelectors the export has, read
	// with the gate off: they do nothing, which its condition says.
	IgnoredSelectors int
	// Service is the member's Service of the name, nil when none.
	Service *v1.Service
	// Namespace is the namespace of the name in the member, nil when
	// none.
	Namespace *v1.Namespace
	// Slices are the member's own EndpointSlices of the Service.
	// SlicesChecked says the member's agent published them (pull mode)
	// after export.CheckSource, which it makes in the member, where the
	// slices' managers and owners are: they no longer carry them.
	Slices        []*discoveryv1.EndpointSlice
	SlicesChecked bool
	// EndpointRanges are where the member's endpoints may be, when
	// RangesKnown, and RangesSource whose word they are
	// (endpointRangesOf).
	EndpointRanges []netip.Prefix
	RangesKnown    bool
	RangesSource   string
	// IngressService is the Service of the name's ingress name in the
	// member, nil when none; EntryPoints are the addresses of its nodes
	// that serve node ports (export.EntryPoints), nil when not listed.
	IngressService *v1.Service
	EntryPoints    []string
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

// planName decides what every member should hold of s's name, in four
// steps: which exports are valid (checkExports), what they merge into
// and which of them provide (mergeExports), each export's conditions
// (exportConditions), and each source cluster's slices (planSlices).
func planName(cfg *Config, s snapshot) plan {
	c := checkExports(cfg, s)
	m := mergeExports(cfg, c)
	p := plan{Desired: &desiredState{ExportConditions: exportConditions(s, c, m)}, Conflicts: m.result.Conflicts}
	d := p.Desired
	if len(m.exports) == 0 {
		d.Retain = s.retained()
		return p
	}
	d.Import = importOf(cfg, s.Namespace, s.Name, m.result)
	d.Clusters = m.result.Clusters
	d.ImportedIn = s.withNamespace()
	if m.result.Spec.Type == mcsv1beta1.ClusterSetIP {
		d.ClusterSelectors = m.clusterSelectors
		d.SelectorResults = planSelectorResults(s, m.clusterSelectors, m.result.Clusters)
	}
	p.Reports = planSlices(cfg, s, c.byID, m, d)
	for _, e := range m.exports {
		if note := withheldNote(p.Reports, c.byID[e.Cluster]); note != "" {
			sayInReady(d.ExportConditions[e.Cluster], note)
		}
	}
	return p
}

// checked is what checkExports finds of a name's exports.
type checked struct {
	// exports are the valid ones, validity every export's verdict by
	// cluster ID, selectors the clusterSelectors of each (gate on).
	exports   []export.Export
	validity  map[string]export.Validity
	selectors map[string][]csv1beta1.ClusterSelector
	byID      map[string]*memberSnapshot
}

// checkExports decides which members' exports of s's name are valid: the
// namespace refused or not among those a member may export from, the
// Service, the exporter's maps and, with the gate on, its selectors.
func checkExports(cfg *Config, s snapshot) checked {
	ns := s.Namespace
	refused := slices.Contains(cfg.RefusedNamespaces, ns)
	c := checked{validity: map[string]export.Validity{}, selectors: map[string][]csv1beta1.ClusterSelector{}, byID: map[string]*memberSnapshot{}}
	for i := range s.Members {
		m := &s.Members[i]
		c.byID[m.ID] = m
		if !m.Synced || m.Export == nil {
			continue
		}
		if refused {
			c.validity[m.ID] = export.NamespaceNotAllowed(ns)
			continue
		}
		if refusal := export.CheckExportNamespace(cfg.ExportNamespaces, m.ID, ns); refusal != nil {
			c.validity[m.ID] = *refusal
			continue
		}
		v := export.Validate(m.Service)
		if v.Valid {
			// Control data never travels in an exporter's maps.
			v = export.ValidateExportedMetadata(m.Export)
		}
		switch {
		case v.Valid && cfg.ClusterSelection:
			v = export.ValidateClusterSelectors(m.Service, m.ClusterSelectors)
			c.selectors[m.ID] = m.ClusterSelectors
		case v.Valid && m.IgnoredSelectors > 0:
			v = selectorsIgnored(v, m.IgnoredSelectors)
		}
		c.validity[m.ID] = v
		if v.Valid {
			var notBefore time.Time
			if m.Namespace != nil {
				notBefore = m.Namespace.CreationTimestamp.Time
			}
			se := export.BoundCreation(m.Export, notBefore, s.Now)
			c.exports = append(c.exports, export.Export{Cluster: m.ID, ServiceExport: se, Service: m.Service})
		}
	}
	return c
}

// merged is what mergeExports makes of the valid exports.
type merged struct {
	result export.Result
	// exports are those that provide; notProviding the clusters whose
	// valid exports do not, and providers those named to.
	exports      []export.Export
	notProviding []string
	providers    []string
	// clusterSelectors are the merged selectors (gate on).
	clusterSelectors []csv1beta1.ClusterSelector
}

// mergeExports merges the valid exports. The exporters may name the
// clusters whose endpoints serve the name (in the oldest export's
// annotations, as every exported annotation): the others' exports then
// shape and serve nothing, and the import keeps the annotations that
// said so.
func mergeExports(cfg *Config, c checked) merged {
	m := merged{result: export.Merge(c.exports), exports: c.exports}
	providers, limited := export.Providers(m.result.Annotations)
	if limited {
		var serving []export.Export
		for _, e := range c.exports {
			if slices.Contains(providers, e.Cluster) {
				serving = append(serving, e)
			} else {
				m.notProviding = append(m.notProviding, e.Cluster)
			}
		}
		all := m.result
		m.exports, m.providers = serving, providers
		m.result = export.Merge(serving)
		m.result.Labels, m.result.Annotations, m.result.Conflicts = all.Labels, all.Annotations, all.Conflicts
	}
	if cfg.ClusterSelection {
		var conflicts []export.Conflict
		m.clusterSelectors, conflicts = export.MergeClusterSelectors(m.exports, func(id string) []csv1beta1.ClusterSelector { return c.selectors[id] })
		m.result.Conflicts = append(m.result.Conflicts, conflicts...)
	}
	return m
}

// exportConditions are the conditions of every member's export of s's
// name, by cluster ID.
func exportConditions(s snapshot, c checked, m merged) map[string][]metav1.Condition {
	readyMessage := ""
	if missing := s.withoutNamespace(); len(m.exports) > 0 && len(missing) > 0 {
		// KEP-1645: a service is imported only where its namespace exists.
		readyMessage = fmt.Sprintf("imported in %d of %d member clusters; namespace %q does not exist in: %s",
			len(s.Members)-len(missing), len(s.Members), s.Namespace, strings.Join(missing, ", "))
	}
	out := map[string][]metav1.Condition{}
	for id, v := range c.validity {
		out[id] = export.ExportConditions(v, m.result.Conflicts, readyMessage)
		if slices.Contains(m.notProviding, id) {
			out[id] = export.NotAProvider(v, id, m.providers, m.result.Conflicts)
		}
	}
	return out
}

// planSlices fills d with each providing source cluster's slices (and
// ingress entry points), and returns what of the sources is not mirrored.
// An expired source cluster still counts for the import (its last known
// export) but its endpoints are withdrawn, so that traffic fails over to
// the sources that answer. When none answers, the endpoints of all are
// kept, marked stale: withdrawing the last ones would turn an outage of
// the hub's view (a cut link, the hub's own network) into an outage of
// the service.
func planSlices(cfg *Config, s snapshot, byID map[string]*memberSnapshot, m merged, d *desiredState) []sourceReport {
	d.Slices = map[string]*discoveryv1.EndpointSlice{}
	var alive []string
	for _, e := range m.exports {
		if s.Alive[e.Cluster] {
			alive = append(alive, e.Cluster)
		}
	}
	if len(alive) == 0 {
		d.Stale = m.result.Clusters
	}
	ids := s.memberIDs()
	d.IngressMembers = ingressMembers(cfg, ids)
	var reports []sourceReport
	for _, e := range m.exports {
		if len(alive) > 0 && !slices.Contains(alive, e.Cluster) {
			continue
		}
		src := byID[e.Cluster]
		// What a member may publish: slices Kubernetes wrote for the
		// exported Service, within where its endpoints may be, or,
		// where that is not known, what the writer vouches for.
		var own []*discoveryv1.EndpointSlice
		for _, sl := range src.Slices {
			sl, r := trustedPart(cfg, src, sl, e.Service)
			reports = append(reports, r...)
			if sl == nil {
				continue
			}
			is := export.ImportedSlice(sl, s.Name, e.Cluster, cfg.ManagedBy, m.result.ServedPorts[e.Cluster], m.result.Spec.TrafficDistribution)
			if is == nil {
				continue
			}
			if dropped := export.KeepWithin(is, src.EndpointRanges); len(dropped) > 0 {
				reports = append(reports, sourceReport{Cluster: src.ID, Slice: sl, Reason: ReasonEndpointsOutsidePodRanges, Dropped: dropped, Service: e.Service})
			}
			d.Slices[is.Name] = is
			own = append(own, is)
			if t, err := time.Parse(time.RFC3339Nano, sl.Annotations[v1.EndpointsLastChangeTriggerTime]); err == nil {
				if d.Triggers == nil {
					d.Triggers = map[string]time.Time{}
				}
				d.Triggers[is.Name] = t
			}
		}
		if needsIngress(d.IngressMembers, e.Cluster, ids) {
			planIngress(cfg, src, e, m.result, own, d)
		}
	}
	return reports
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
	refusal, why := export.SourceRefusal(""), ""
	if !m.SlicesChecked {
		refusal, why = export.CheckSource(src, svc, cfg.SourceManagers)
	}
	switch refusal {
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

// withNamespace returns, sorted, the synced members that have the
// namespace (and are not deleting it): those an import is written in.
func (s snapshot) withNamespace() []string {
	var out []string
	for _, m := range s.Members {
		if m.Synced && m.Namespace != nil && m.Namespace.Status.Phase != v1.NamespaceTerminating {
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
