package mcs

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
	"k8s.io/multiclusterservices/export"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// desiredState is what the members should hold for one namespace/name.
type desiredState struct {
	// Import is the import every member with the namespace gets; nil when
	// no member should have one.
	Import *mcsv1beta1.ServiceImport
	// Clusters is the import's status.clusters.
	Clusters []string
	// IPError says why clusterset IPs are missing, if they are.
	IPError string
	// Slices are the imported slices by name, without owner references
	// (each member's import has its own UID).
	Slices map[string]*discoveryv1.EndpointSlice
	// ExportConditions are the conditions of each member's export, by
	// cluster ID.
	ExportConditions map[string][]metav1.Condition
	// Retain is set when no known cluster exports the name but a cluster
	// whose state is unknown (caches not synced, lease still valid) is
	// listed by an existing import: the members' imports and slices are
	// then left as they are rather than deleted on a guess.
	Retain bool
	// Triggers are, per imported slice name, when the change its source
	// slice carries happened (endpoints.kubernetes.io/last-change-trigger-time,
	// set by the EndpointSlice controller), for the propagation metric.
	Triggers map[string]time.Time
	// Ingress are the entry-point slices of the source clusters whose pods
	// some member cannot reach, by name (desiredIngress); IngressServices
	// the ingress Services to create, by exporting cluster.
	Ingress         map[string]*discoveryv1.EndpointSlice
	IngressServices map[string]*v1.Service
	// Stale are the source clusters whose endpoints are kept although
	// their leases expired, because no source of the name is alive.
	Stale []string
	// Variants, in catalog mode, are what each member holds of the name
	// (by cluster ID): the catalog places different global services under
	// one local name in different clusters. A member without a variant
	// holds nothing of it. The other fields are then unused.
	Variants map[string]*desiredState
	// ClusterSelectors are the resolved clusterSelectors (KEP-5939) of a
	// ClusterSetIP import; always empty with the gate off.
	ClusterSelectors []csv1beta1.ClusterSelector
	// removed records, for a name no cluster exports (Import nil), the
	// members that hold nothing of it any more; once all do, the name is
	// forgotten (prune). Guarded by Controller.mu.
	removed map[string]bool
}

// syncClusterset merges the exports of key across the members and records
// what every member should hold, then asks every member to write it.
func (c *Controller) syncClusterset(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	refused := slices.Contains(c.cfg.RefusedNamespaces, ns)
	var exports []export.Export
	validity := map[string]export.Validity{}
	selectors := map[string][]csv1beta1.ClusterSelector{}
	// One snapshot of the members for the whole merge: one that joins or
	// leaves meanwhile is merged again by its own enqueueAll.
	members := c.memberList()
	byID := map[string]*member{}
	for _, m := range members {
		byID[m.id] = m
	}
	for _, m := range members {
		if !m.hasSynced() {
			continue
		}
		se, err := m.exports.ServiceExports(ns).Get(name)
		if apierrors.IsNotFound(err) || err == nil && se.DeletionTimestamp != nil {
			continue
		} else if err != nil {
			return err
		}
		if refused {
			validity[m.id] = export.NamespaceNotAllowed(ns)
			continue
		}
		if allowed, limited := c.cfg.ExportNamespaces[m.id]; limited && !slices.Contains(allowed, ns) {
			validity[m.id] = export.NamespaceNotAllowedForCluster(ns, m.id, allowed)
			continue
		}
		svc, err := m.services.Services(ns).Get(name)
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		v := export.Validate(svc)
		if v.Valid {
			// Control data never travels in an exporter's maps.
			v = export.ValidateExportedMetadata(se)
		}
		if v.Valid && c.cfg.ClusterSelection {
			sels := exportSelectors(m, key)
			v = export.ValidateClusterSelectors(svc, sels)
			selectors[m.id] = sels
		}
		validity[m.id] = v
		if v.Valid {
			var notBefore time.Time
			if n, err := m.namespaces.Get(ns); err == nil {
				notBefore = n.CreationTimestamp.Time
			}
			se = export.BoundCreation(se, notBefore, time.Now())
			exports = append(exports, export.Export{Cluster: m.id, ServiceExport: se, Service: svc})
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
	if c.cfg.ClusterSelection {
		var conflicts []export.Conflict
		clusterSelectors, conflicts = export.MergeClusterSelectors(exports, func(id string) []csv1beta1.ClusterSelector { return selectors[id] })
		r.Conflicts = append(r.Conflicts, conflicts...)
	}
	d := &desiredState{ExportConditions: map[string][]metav1.Condition{}}
	readyMessage := ""
	if missing := membersWithoutNamespace(members, ns); len(exports) > 0 && len(missing) > 0 {
		// KEP-1645: a service is imported only where its namespace exists.
		readyMessage = fmt.Sprintf("imported in %d of %d member clusters; namespace %q does not exist in: %s",
			len(members)-len(missing), len(members), ns, strings.Join(missing, ", "))
	}
	for id, v := range validity {
		d.ExportConditions[id] = export.ExportConditions(v, r.Conflicts, readyMessage)
		if slices.Contains(notProviding, id) {
			d.ExportConditions[id] = export.NotAProvider(v, id, providers, r.Conflicts)
		}
	}

	if len(exports) == 0 {
		if c.retained(ns, name) {
			d.Retain = true
		} else {
			c.vips.Release(key)
		}
	} else {
		d.Import = c.desiredImport(key, ns, name, r, d)
		d.Clusters = r.Clusters
		if r.Spec.Type == mcsv1beta1.ClusterSetIP {
			d.ClusterSelectors = clusterSelectors
		}
		d.Slices = map[string]*discoveryv1.EndpointSlice{}
		// An expired source cluster still counts for the import (its last
		// known export) but its endpoints are withdrawn, so that traffic
		// fails over to the sources that answer. When none answers, the
		// endpoints of all are kept, marked stale: withdrawing the last
		// ones would turn an outage of the hub's view (a cut link, the
		// hub's own network) into an outage of the service.
		var alive []string
		for _, e := range exports {
			if c.ttl.alive(e.Cluster) {
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
			// What a member may publish: slices Kubernetes wrote for
			// the exported Service, within where its endpoints may be,
			// or, where that is not known, what the writer vouches for.
			ranges, known := byID[e.Cluster].endpointRanges(c.cfg.MemberPodCIDRs[e.Cluster])
			var own []*discoveryv1.EndpointSlice
			for _, s := range indexed[*discoveryv1.EndpointSlice](byID[e.Cluster].localSlices, byService, key) {
				if s = c.sourceSlice(byID[e.Cluster], s, e.Service, known); s == nil {
					continue
				}
				if is := export.ImportedSlice(s, name, e.Cluster, c.cfg.ManagedBy, r.ServedPorts[e.Cluster], r.Spec.TrafficDistribution); is != nil {
					if dropped := export.KeepWithin(is, ranges); len(dropped) > 0 {
						c.reportOutsidePodRanges(byID[e.Cluster], s, dropped)
					}
					d.Slices[is.Name] = is
					own = append(own, is)
					if t, err := time.Parse(time.RFC3339Nano, s.Annotations[v1.EndpointsLastChangeTriggerTime]); err == nil {
						if d.Triggers == nil {
							d.Triggers = map[string]time.Time{}
						}
						d.Triggers[is.Name] = t
					}
				}
			}
			if c.needsIngress(e.Cluster, members) {
				c.desiredIngress(byID[e.Cluster], e, r, own, d)
			}
		}
	}

	c.mu.Lock()
	c.desired[key] = d
	c.mu.Unlock()
	c.metrics.setConflicts(key, r.Conflicts)
	c.enqueueMembers(key)
	return nil
}

// desiredImport builds the import for a merge result and allocates its
// clusterset IPs.
func (c *Controller) desiredImport(key, ns, name string, r export.Result, d *desiredState) *mcsv1beta1.ServiceImport {
	si := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   ns,
			Name:        name,
			Labels:      maps.Clone(export.WithoutReservedKeys(r.Labels)),
			Annotations: export.WithoutReservedKeys(r.Annotations),
		},
		Spec: r.Spec,
	}
	if si.Labels == nil {
		si.Labels = map[string]string{}
	}
	// Set last: an exported label cannot take an import away from us.
	si.Labels[managedLabel] = c.cfg.ManagedBy
	if r.Spec.Type == mcsv1beta1.ClusterSetIP {
		ips, err := c.vips.Allocate(key, r.Spec.IPFamilies)
		si.Spec.IPs = ips
		if err != nil {
			d.IPError = err.Error()
		}
	} else {
		// Headless imports have no clusterset IP (KEP-1645).
		c.vips.Release(key)
	}
	return si
}

// membersWithoutNamespace returns the IDs of the synced members in which
// namespace ns does not exist.
func membersWithoutNamespace(members []*member, ns string) []string {
	var out []string
	for _, m := range members {
		if !m.hasSynced() {
			continue
		}
		if n, err := m.namespaces.Get(ns); err != nil || n.Status.Phase == v1.NamespaceTerminating {
			out = append(out, m.id)
		}
	}
	return out
}

// retained says whether an existing import of ns/name lists a source
// cluster whose exports are unknown right now but may still exist.
func (c *Controller) retained(ns, name string) bool {
	for _, m := range c.memberList() {
		if !m.hasSynced() {
			continue
		}
		si, err := m.imports.ServiceImports(ns).Get(name)
		if err != nil || !c.wrote(si) {
			continue
		}
		for _, cs := range si.Status.Clusters {
			if c.retainedSource(cs.Cluster) {
				return true
			}
		}
	}
	return false
}

// retainedSource says whether the endpoints of source cluster id must be
// kept although the controller cannot tell what it exports: it is not a
// synced member (caches not synced, or no longer configured) and its lease
// has not expired.
func (c *Controller) retainedSource(id string) bool {
	if m := c.member(id); m != nil && m.hasSynced() {
		return false
	}
	return c.ttl.alive(id)
}

// removedFrom records that member holds nothing of key, whose desired
// state d imports nothing, and forgets key once every member is in that
// state: names exported once do not stay in memory, nor are they merged
// again on every Service event or full resync.
func (c *Controller) removedFrom(key string, d *desiredState, member string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.desired[key] != d || d.Import != nil || d.Retain {
		return
	}
	if d.removed == nil {
		d.removed = map[string]bool{}
	}
	d.removed[member] = true
	for _, m := range c.memberList() {
		if !d.removed[m.id] {
			return
		}
	}
	delete(c.desired, key)
}

// forMember is what member m holds of d: d itself, or its variant for m
// in catalog mode (nothing when it has none).
func (d *desiredState) forMember(m string) *desiredState {
	if d.Variants == nil {
		return d
	}
	if v := d.Variants[m]; v != nil {
		return v
	}
	return &desiredState{}
}

func (c *Controller) getDesired(key string) *desiredState {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.desired[key]
}

// reportOutsidePodRanges says, once per slice, that addresses of a slice
// of an exported Service are not mirrored because they lie outside the
// source cluster's pod ranges.
func (c *Controller) reportOutsidePodRanges(m *member, s *discoveryv1.EndpointSlice, dropped []string) {
	cluster := m.id
	id := cluster + "/" + string(s.UID) + "/outside"
	if _, seen := c.told.LoadOrStore(id, true); seen {
		return
	}
	c.logger.Info("Not mirroring endpoint addresses outside the source cluster's pod ranges", "cluster", cluster, "endpointSlice", klog.KObj(s), "addresses", dropped)
	c.metrics.countOutsidePodRanges(cluster, len(dropped))
	if se, err := m.exports.ServiceExports(s.Namespace).Get(s.Labels[discoveryv1.LabelServiceName]); err == nil {
		m.recorder.Eventf(se, v1.EventTypeWarning, "EndpointsOutsidePodRanges",
			"EndpointSlice %s: addresses %v are outside cluster %s's pod ranges and node addresses; they are not exported", s.Name, dropped, cluster)
	}
}

// reportUnmirrored says, once per slice, that a slice of an exported
// Service is not mirrored because no trusted source manager wrote it: an
// event on the export, a log line and a metric.
func (c *Controller) reportUnmirrored(m *member, s *discoveryv1.EndpointSlice) {
	cluster := m.id
	id := cluster + "/" + string(s.UID)
	if _, seen := c.told.LoadOrStore(id, true); seen {
		return
	}
	manager := s.Labels[discoveryv1.LabelManagedBy]
	c.logger.Info("Not mirroring an EndpointSlice of an exported Service: its manager is not trusted", "cluster", cluster, "endpointSlice", klog.KObj(s), "managedBy", manager, "trusted", c.cfg.SourceManagers)
	c.metrics.countUnmirrored(cluster)
	if se, err := m.exports.ServiceExports(s.Namespace).Get(s.Labels[discoveryv1.LabelServiceName]); err == nil {
		m.recorder.Eventf(se, v1.EventTypeWarning, "EndpointSliceNotMirrored",
			"EndpointSlice %s is not exported: its endpointslice.kubernetes.io/managed-by %q is not one of %v", s.Name, manager, c.cfg.SourceManagers)
	}
}
