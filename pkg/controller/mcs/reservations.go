package mcs

import (
	"net/netip"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
	"k8s.io/multiclusterservices/export"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/clustersetip"
)

// reservations keeps the clusterset IP allocator in step with what the
// members hold that the controller did not allocate: their Service ranges
// that overlap the clusterset's (servicerange.go), the IPs of imports
// someone else wrote into them (foreign.go), and, at start and at every
// join, the IPs of the imports the controller already wrote
// (restoreClusterSetIPs).
type reservations struct {
	ips     *clustersetip.Allocator
	ranges  []netip.Prefix
	manager string
	members *memberSet
	// enqueue asks every member to write a name again; ipKey names the
	// allocation an import of ours holds (desiredSource.ipKey).
	enqueue func(name string)
	ipKey   func(si *mcsv1beta1.ServiceImport) string
	logger  klog.Logger
}

// restoreClusterSetIPs adopts the IPs of the imports members already have.
func (r *reservations) restoreClusterSetIPs() {
	var claims []clustersetip.Claim
	for _, m := range r.members.all() {
		if !m.hasSynced() {
			continue
		}
		imports, _ := m.imports.List(labels.SelectorFromSet(labels.Set{managedLabel: r.manager}))
		for _, si := range imports {
			// A derived import carries its derived Service's IPs,
			// which are the member's, not the clusterset's. One being
			// deleted (or held by someone's finalizer) is no record.
			if len(si.Spec.IPs) > 0 && si.Annotations[export.AnnotationDerivedService] == "" && si.DeletionTimestamp == nil {
				claims = append(claims, clustersetip.Claim{Key: r.ipKey(si), IPs: si.Spec.IPs, Created: si.CreationTimestamp.Time, Member: m.id})
			}
		}
	}
	disputed := r.ips.Restore(claims)
	r.logger.Info("Restored clusterset IPs from existing imports", "imports", len(claims), "allocated", r.ips.Allocated())
	if len(disputed) > 0 {
		// Members carry these for two names alike: whoever edited their
		// copies, no name takes them on their word.
		r.logger.Error(nil, "Clusterset IPs that members carry for two names alike are held back, handed to neither", "ips", disputed)
	}
}

// foreignClaims counts m's imports that this controller did not write and
// that carry an IP it allocated.
func (r *reservations) foreignClaims(m *member) int {
	n := 0
	for _, o := range m.inf.imports.GetStore().List() {
		si, ok := o.(*mcsv1beta1.ServiceImport)
		if !ok || wroteBy(r.manager, si) {
			continue
		}
		for _, ip := range si.Spec.IPs {
			if owner, ok := r.ips.Owner(ip); ok && owner != si.Namespace+"/"+si.Name {
				n++
				break
			}
		}
	}
	return n
}
