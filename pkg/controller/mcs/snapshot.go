package mcs

import (
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/multiclusterservices/export"
)

// readSnapshot reads what the members' caches hold of ns/name, for the
// planner. One snapshot of the members serves the whole plan: a member
// that joins or leaves meanwhile is planned again by its own enqueueAll.
func (c *Controller) readSnapshot(ns, name string) (snapshot, error) {
	key := ns + "/" + name
	members, membership := c.members.at()
	ids := memberIDs(members)
	s := snapshot{Namespace: ns, Name: name, Alive: map[string]bool{}, Now: time.Now(), membership: membership}
	if c.cfg.ClusterSelection {
		s.Properties = map[string]map[string]string{}
		for _, m := range members {
			// The member of this snapshot's membership, not whoever
			// holds its ID by now.
			if props := m.properties(); props != nil {
				s.Properties[m.id] = props
			}
		}
	}
	for _, m := range members {
		ms := memberSnapshot{ID: m.id, Synced: m.hasSynced()}
		s.Alive[m.id] = c.leases.alive(m.id)
		if !ms.Synced {
			s.Members = append(s.Members, ms)
			continue
		}
		if n, err := m.namespaces.Get(ns); err == nil {
			ms.Namespace = n
		}
		if si, err := m.imports.ServiceImports(ns).Get(name); err == nil && c.wrote(si) {
			for _, cs := range si.Status.Clusters {
				ms.ImportClusters = append(ms.ImportClusters, cs.Cluster)
				s.Alive[cs.Cluster] = c.leases.alive(cs.Cluster)
			}
		}
		se, err := m.exports.ServiceExports(ns).Get(name)
		switch {
		case apierrors.IsNotFound(err) || err == nil && se.DeletionTimestamp != nil:
			s.Members = append(s.Members, ms)
			continue
		case err != nil:
			return snapshot{}, err
		}
		ms.Export = se
		if c.cfg.ClusterSelection {
			ms.ClusterSelectors = exportSelectors(m, key)
		} else {
			ms.IgnoredSelectors = ignoredSelectors(m, key)
		}
		svc, err := m.services.Services(ns).Get(name)
		if err != nil && !apierrors.IsNotFound(err) {
			return snapshot{}, err
		}
		if err == nil {
			ms.Service = svc
		}
		ms.Slices = indexed[*discoveryv1.EndpointSlice](m.localSlices, byService, key)
		r := m.endpointRanges(c.cfg.MemberPodCIDRs)
		ms.EndpointRanges, ms.RangesKnown, ms.RangesSource = r.Prefixes, r.Known, r.Source
		if needsIngress(ingressMembers(&c.cfg, ids), m.id, ids) {
			if in, err := m.services.Services(ns).Get(export.IngressName(ns, name)); err == nil {
				ms.IngressService = in
			}
			if m.inf.nodes.HasSynced() {
				nodes, _ := m.nodes.List(labels.Everything())
				ms.EntryPoints = export.EntryPoints(nodes)
			}
		}
		s.Members = append(s.Members, ms)
	}
	return s, nil
}

// memberIDs returns the cluster IDs of members.
func memberIDs(members []*member) []string {
	out := make([]string, 0, len(members))
	for _, m := range members {
		out = append(out, m.id)
	}
	return out
}
