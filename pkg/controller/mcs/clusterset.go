package mcs

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
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
	// ImportedIn are the members that hold the import (synced, with the
	// namespace), sorted: where the service is exported to, which every
	// export's status.clusters says with the gate on.
	ImportedIn []string
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
	// some member cannot reach, by name (planIngress); IngressServices
	// the ingress Services to create, by exporting cluster.
	Ingress         map[string]*discoveryv1.EndpointSlice
	IngressServices map[string]*v1.Service
	// IngressMembers are the members reached only through their ingress
	// (ingressMembers), sorted: a member imports the pods' slices of the
	// sources it reaches (reaches), the entry points of the others.
	IngressMembers []string
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
	// SelectorResults are what ClusterSelectors give each member as the
	// importing cluster, by cluster ID; a member absent was not planned.
	SelectorResults map[string]selectorOutcome
	// Membership is the controller's membership count when the plan read
	// its members (Controller.membership).
	Membership uint64
	// removed records, for a name no cluster exports (Import nil), the
	// members that hold nothing of it any more; once all do, the name is
	// forgotten (prune). Guarded by Controller.mu.
	removed map[string]bool
}

// syncClusterset plans what every member should hold of key from a
// snapshot of their caches (planName), gives its import clusterset IPs,
// records it, says once what of the sources is not mirrored, and asks
// every member to write it.
func (c *Controller) syncClusterset(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	s, err := c.readSnapshot(ns, name)
	if err != nil {
		return err
	}
	p := planName(&c.cfg, s)
	d := p.Desired
	d.Membership = s.membership
	switch {
	case d.Import != nil && d.Import.Spec.Type == mcsv1beta1.ClusterSetIP:
		ips, err := c.clustersetIPs.AllocateFor(key, d.Import.Spec.IPFamilies, d.Clusters)
		d.Import.Spec.IPs = ips
		if err != nil {
			d.IPError = err.Error()
		}
	case !d.Retain:
		// Headless imports have no clusterset IP (KEP-1645); nor has a
		// name nobody exports.
		c.clustersetIPs.Release(key)
	}
	for _, r := range p.Reports {
		if m := c.members.get(r.Cluster); m != nil {
			c.writesTo(m).reportSource(r)
		}
	}
	c.mu.Lock()
	c.desired[key] = d
	c.mu.Unlock()
	c.metrics.setConflicts(key, p.Conflicts)
	c.enqueueMembers(key)
	return nil
}

// retainedSource says whether the endpoints of source cluster id must be
// kept although the controller cannot tell what it exports: it is not a
// synced member (caches not synced, or no longer configured) and its lease
// has not expired.
func (c *Controller) retainedSource(id string) bool {
	if m := c.members.get(id); m != nil && m.hasSynced() {
		return false
	}
	return c.leases.alive(id)
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
	for _, m := range c.members.all() {
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
