package multicluster

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// This file decides what the wrapped Provider holds for each import and
// MCS slice, and hands it over: an import is programmed when it is valid
// and owns its clusterset IPs (claims.go); a slice when its import is.

// importTranslation is an import's Service as the event being handled
// translated it (st nil: none), handed down with the import's name and
// entry so that an import is translated, and its entry found, once per
// event.
type importTranslation struct {
	key types.NamespacedName
	st  *importState
	svc *v1.Service
}

// reconcileImports decides each of keys once, then applies the decisions,
// withdrawals first, so that an IP handed from one import to another is
// never programmed twice.
//
// keys are each distinct; several are decided in namespace/name order. It
// returns, appended to nativeDecided, the imports whose native names it
// decided again (those that were programmed or withdrawn), so that a
// caller about to decide one does not do it twice (a caller's buffer: an
// import handed over is programmed, so the list is made for nearly every
// import).
func (im *importer) reconcileImports(keys []types.NamespacedName, fresh importTranslation, nativeDecided []types.NamespacedName) []types.NamespacedName {
	type decision struct {
		key       types.NamespacedName
		st        *importState
		want      *v1.Service
		rejection *mcsproxy.RejectionError
	}
	if len(keys) > 1 {
		keys = slices.Clone(keys)
		slices.SortFunc(keys, compareKeys)
	}
	var one [1]decision // the usual case, without an allocation
	decisions := one[:0]
	if len(keys) > 1 {
		decisions = make([]decision, 0, len(keys))
	}
	for _, key := range keys {
		// Looked up once: deciding and applying neither make nor drop
		// entries.
		st := fresh.st
		if st == nil || key != fresh.key {
			st = im.imports[key]
		}
		want, rejection := im.desired(key, st, fresh)
		decisions = append(decisions, decision{key, st, want, rejection})
	}
	slices.SortStableFunc(decisions, func(a, b decision) int {
		return cmp.Compare(boolInt(a.want != nil), boolInt(b.want != nil))
	})
	for _, d := range decisions {
		if d.st == nil {
			continue
		}
		programmed := d.st.programmedFrom != nil
		im.reconcileImport(d.key, d.st, d.want, d.rejection)
		if now := d.st.programmedFrom != nil; now != programmed {
			// An import that wins or loses its IPs gains or loses its
			// native names too (nativePolicy).
			im.reconcileNativeOf(d.key, d.st)
			nativeDecided = append(nativeDecided, d.key)
		}
	}
	return nativeDecided
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// desired returns the Service that should be programmed for import key,
// whose entry is st, or nil and the reason it must not be.
func (im *importer) desired(key types.NamespacedName, st *importState, fresh importTranslation) (*v1.Service, *mcsproxy.RejectionError) {
	if st == nil || st.obj == nil {
		return nil, nil
	}
	if st.invalid != nil {
		if im.servedByDerivedService(key, st) {
			// Derived mode: the import's IPs are its derived Service's
			// cluster IPs (outside the clusterset ranges), which the
			// Service path programs. Nothing to do, nothing to report.
			return nil, nil
		}
		return nil, st.invalid
	}
	if rejection := im.claims.decide(&st.claim); rejection != nil {
		return nil, rejection
	}
	svc := fresh.svc
	if fresh.st != st || svc == nil {
		svc = im.translate(st.obj)
	}
	return svc, nil // nil: headless, DNS serves it
}

// servedByDerivedService tells whether import key is, in derived mode,
// served by the local Service its annotation names: a trusted import whose
// only fault is IPs outside the clusterset ranges, all of them that
// Service's cluster IPs.
func (im *importer) servedByDerivedService(key types.NamespacedName, st *importState) bool {
	service, ok := im.derivedOf[key]
	if !ok || st.invalid.Reason != mcsproxy.ReasonIPOutsideClusterSetCIDR || len(st.obj.Spec.IPs) == 0 {
		return false
	}
	used := im.claims.ipsOfService(service)
	for _, s := range st.obj.Spec.IPs {
		ip, err := netip.ParseAddr(s)
		if err != nil || !slices.Contains(used, ip.Unmap()) {
			return false
		}
	}
	return true
}

// trackDerivedService records which local Service import key names as its
// derived Service, if any, so that a change of that Service decides the
// import again.
func (im *importer) trackDerivedService(key types.NamespacedName, si *mcsv1beta1.ServiceImport) {
	if old, ok := im.derivedOf[key]; ok {
		if im.derivedBy[old].Delete(key).Len() == 0 {
			delete(im.derivedBy, old)
		}
		delete(im.derivedOf, key)
	}
	if si == nil {
		return
	}
	if name := si.Annotations[mcsproxy.AnnotationDerivedService]; name != "" {
		service := types.NamespacedName{Namespace: key.Namespace, Name: name}
		im.derivedOf[key] = service
		if im.derivedBy[service] == nil {
			im.derivedBy[service] = sets.New[types.NamespacedName]()
		}
		im.derivedBy[service].Insert(key)
	}
}

// translate is the Service the Provider gets for si, nil when it gets none.
func (im *importer) translate(si *mcsv1beta1.ServiceImport) *v1.Service {
	if si == nil {
		return nil
	}
	svc, _ := mcsproxy.ServiceForImport(si, im.opts)
	return svc
}

// reconcileImport hands the Provider what it is to hold for import key,
// whose entry is st.
func (im *importer) reconcileImport(key types.NamespacedName, st *importState, want *v1.Service, rejection *mcsproxy.RejectionError) {
	newlyProgrammed := want != nil && st.programmedFrom == nil
	switch {
	case want == nil && st.programmedFrom != nil:
		im.provider.OnServiceDelete(im.translate(st.programmedFrom))
		st.programmedFrom = nil
		programmedImports.Dec()
		for _, slice := range st.slices {
			im.reconcileListedSlice(slice, st, nil)
		}
	case want != nil && st.programmedFrom == nil:
		// Endpoints first, so the first sync that sees the VIP already
		// has somewhere to send it.
		st.programmedFrom = st.obj
		for _, slice := range st.slices {
			im.reconcileListedSlice(slice, st, nil)
		}
		im.provider.OnServiceAdd(want)
		programmedImports.Inc()
		im.handedOver(want, nil)
	case want != nil && st.programmedFrom != st.obj:
		// The same object translates the same: only a new one (an update
		// of the import) can change what the Provider holds.
		if programmed := im.translate(st.programmedFrom); !apiequality.Semantic.DeepEqual(want, programmed) {
			im.provider.OnServiceUpdate(programmed, want)
			im.handedOver(want, programmed)
		}
		st.programmedFrom = st.obj
	}
	if st.obj == nil && im.clusterSelection {
		st.showSelection(key, nil) // the import went: its gauge too
	}
	if st.obj != nil {
		if newlyProgrammed {
			im.events.programmed(st.obj, st.reported != "")
		}
		im.reportImport(st, rejection)
	}
}

// handedOver tells the conntrack sweeper, if there is one, the clusterset
// IPs of want that programmed (what the Provider held before, nil if
// nothing) did not have.
func (im *importer) handedOver(want, programmed *v1.Service) {
	if im.sweeper == nil {
		return
	}
	had := claimIPs(programmed)
	var fresh []netip.Addr
	for _, ip := range claimIPs(want) {
		if !slices.Contains(had, ip) {
			fresh = append(fresh, ip)
		}
	}
	im.sweeper.handedOver(fresh)
}

func (im *importer) reconcileSlice(st *sliceState, fresh *discoveryv1.EndpointSlice) {
	var imp *importState
	if st.obj != nil {
		imp = im.imports[importKeyOf(st.obj)]
	}
	im.reconcileListedSlice(st, imp, fresh)
}

// reconcileListedSlice is reconcileSlice for a caller that holds imp, the
// entry of the import whose list holds st (a slice is listed under the
// import it names), and so spares a lookup per slice.
func (im *importer) reconcileListedSlice(st *sliceState, imp *importState, fresh *discoveryv1.EndpointSlice) {
	var held choice
	if st.obj != nil && imp != nil {
		held = imp.chosen
	}
	im.handOverSlice(st, imp, fresh, held)
}

// handOverSlice hands the Provider what it is to hold for slice st
// (fresh: st.obj's translation, if the caller has made it), having been
// handed st.programmedFrom under the choice held (cluster selection hands
// a slice with only the ports its cluster serves). imp is the entry of the
// import whose list holds st.
func (im *importer) handOverSlice(st *sliceState, imp *importState, fresh *discoveryv1.EndpointSlice, held choice) {
	if st.obj == nil {
		// A slice gone has no import to be handed over for.
		imp = nil
	}
	var next choice
	if imp != nil {
		next = imp.chosen
	}
	want := st.obj != nil && st.invalid == nil && imp != nil && imp.programmedFrom != nil && next.allows(st.obj)
	current := st.programmedFrom != nil && st.programmedFrom == st.obj && st.programmedGen == im.optsGen && held.samePorts(st.obj, next)
	switch {
	case !want && st.programmedFrom != nil:
		im.provider.OnEndpointSliceDelete(held.handedOrStub(st.programmedFrom, im.programmedTranslation(st)))
		st.programmedFrom = nil
	case want && st.programmedFrom == nil:
		im.provider.OnEndpointSliceAdd(next.handed(st.obj, im.translationOf(st, fresh)))
		st.programmedFrom, st.programmedGen = st.obj, im.optsGen
	case want && !current:
		im.provider.OnEndpointSliceUpdate(held.handedOrStub(st.programmedFrom, im.programmedTranslation(st)), next.handed(st.obj, im.translationOf(st, fresh)))
		st.programmedFrom, st.programmedGen = st.obj, im.optsGen
	}
	if st.obj != nil {
		im.reportSlice(st, imp)
	}
}

func (im *importer) reportImport(st *importState, rejected *mcsproxy.RejectionError) {
	if rejected == nil {
		if st.reported != "" {
			im.logger.Info("ServiceImport is programmed again", "serviceImport", klog.KObj(st.obj))
		}
		st.reported = ""
		return
	}
	if st.reported == rejected.Reason {
		return
	}
	st.reported = rejected.Reason
	im.events.report(rejection{kind: kindServiceImport, obj: st.obj, RejectionError: rejected})
}

func (im *importer) reportSlice(st *sliceState, imp *importState) {
	rejected := st.invalid
	if rejected == nil && (imp == nil || imp.obj == nil) && im.mcsSynced && !ownedByServiceImport(st.obj) {
		// A slice owned by a deleted import is about to be collected:
		// only a slice nobody will clean up is worth a report.
		rejected = &mcsproxy.RejectionError{
			Reason:  mcsproxy.ReasonNoServiceImport,
			Message: fmt.Sprintf("no ServiceImport %s exists for this EndpointSlice", importKeyOf(st.obj)),
		}
	}
	if rejected == nil {
		st.reported = nil
		return
	}
	if st.reported != nil && st.reported.Reason == rejected.Reason {
		return
	}
	st.reported = rejected
	r := rejection{kind: kindEndpointSlice, obj: st.obj, RejectionError: rejected}
	if imp != nil && imp.obj != nil {
		// Users look at the import; the slice is named in the note.
		r.regarding = kindServiceImport.ref(imp.obj.Namespace, imp.obj.Name, imp.obj.UID)
		r.note = fmt.Sprintf("EndpointSlice %s: %s", st.obj.Name, rejected.Message)
	}
	im.events.report(r)
}

func claimIPs(svc *v1.Service) []netip.Addr {
	if svc == nil {
		return nil
	}
	var out []netip.Addr
	for _, s := range svc.Spec.ClusterIPs {
		if ip, err := netip.ParseAddr(s); err == nil {
			out = append(out, ip)
		}
	}
	return out
}

// Redecide decides every import, MCS slice and native name again from
// what the Proxier holds. Handlers decide only what an event can change,
// and an unchanged import's resync is skipped; so a decision made wrong
// (a bug, a lost event) would otherwise be kept until its import changes.
// Deciding again what is right hands the Provider nothing.
func (p *Proxier) Redecide() {
	p.mu.Lock()
	defer p.mu.Unlock()
	keys := sets.New[types.NamespacedName]()
	for key, st := range p.im.imports {
		if st.obj != nil || st.programmedFrom != nil {
			keys.Insert(key)
		}
	}
	p.im.reconcileImports(sortedKeys(keys), importTranslation{}, nil)
	if p.im.clusterSelection && p.im.listed {
		for key := range keys {
			p.im.reselect(key)
		}
	}
	p.im.reconcileAllSlices()
	for key := range p.im.imports {
		p.im.reconcileNative(key)
	}
}

// setServiceClaims records the IPs a local Service uses and decides again
// every import that owned one of its old or new IPs.
func (im *importer) setServiceClaims(service *v1.Service, ips []netip.Addr) {
	key := types.NamespacedName{Namespace: service.Namespace, Name: service.Name}
	var buf [2]types.NamespacedName
	affected := im.claims.setService(key, ips, buf[:0])
	// The imports that name this Service as their derived Service.
	for k := range im.derivedBy[key] {
		if !slices.Contains(affected, k) {
			affected = append(affected, k)
		}
	}
	im.reconcileImports(affected, importTranslation{}, nil)
}
