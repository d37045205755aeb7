package mcs

import (
	"slices"

	"k8s.io/klog/v2"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// An import someone else wrote into a member reserves its IPs: the
// allocator never hands them out (clustersetip.Allocator.SetForeign),
// and the import of ours that holds one of them says so in its status.
// The reservations follow the members' caches, level-triggered: every
// foreign import of a member once its caches have synced, before any
// clusterset IP is allocated with it counted (reserveForeignOf), then one
// name at a time as the member's worker takes it (reserveForeign, from
// syncMember); forgetForeign drops a member's when it goes.

// reserveForeignOf reserves the IPs of every import someone else wrote
// into m, as its cache holds them.
func (r *reservations) reserveForeignOf(m *member) {
	for _, o := range m.inf.imports.GetStore().List() {
		if si, ok := o.(*mcsv1beta1.ServiceImport); ok && !wroteBy(r.manager, si) {
			r.reserveForeign(m, si.Namespace, si.Name)
		}
	}
}

// reserveForeign brings the reservation of m's import ns/name in step
// with m's cache: the IPs of an import someone else wrote, none for one
// of ours or none at all. When it changes, the imports of ours that hold
// one of the IPs, before or after, are written again.
func (r *reservations) reserveForeign(m *member, ns, name string) {
	var ips []string
	si, err := m.imports.ServiceImports(ns).Get(name)
	if err == nil && !wroteBy(r.manager, si) {
		ips = si.Spec.IPs
	}
	ch := r.ips.SetForeign(m.id+"/"+ns+"/"+name, ips)
	if ch.Refused {
		r.logger.Info("Not reserving the clusterset IPs of an import someone else wrote: the member holds the most such imports allowed", "cluster", m.id, "serviceImport", klog.KObj(si), "ips", ips)
	}
	if !ch.Changed() {
		return
	}
	for _, ip := range slices.Concat(ch.Before, ch.After) {
		if owner, ok := r.ips.Owner(ip); ok {
			r.enqueue(owner)
		}
	}
}

// forgetForeign drops the reservations of the imports someone else wrote
// into m.
func (r *reservations) forgetForeign(m *member) {
	for _, o := range m.inf.imports.GetStore().List() {
		if si, ok := o.(*mcsv1beta1.ServiceImport); ok && !wroteBy(r.manager, si) {
			r.ips.SetForeign(m.id+"/"+si.Namespace+"/"+si.Name, nil)
		}
	}
}
