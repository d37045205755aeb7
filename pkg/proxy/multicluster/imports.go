package multicluster

import (
	"errors"
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// This file records ServiceImports and MCS EndpointSlices, the cluster ID
// that decides how they translate, and the watcher's resets.

// OnServiceImportUpsert records a ServiceImport and programs it if it is
// valid and owns its clusterset IPs.
func (p *Proxier) OnServiceImportUpsert(si *mcsv1beta1.ServiceImport) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.im.upsertImport(si, nil)
}

func (im *importer) upsertImport(si *mcsv1beta1.ServiceImport, results []csv1beta1.ClusterSelectorResult) {
	key := types.NamespacedName{Namespace: si.Namespace, Name: si.Name}
	st := im.imports.entry(key)
	if st.obj == si || st.obj != nil && si.ResourceVersion != "" && st.obj.ResourceVersion == si.ResourceVersion && st.obj.UID == si.UID {
		// A resync: nothing changed, so no decision can.
		return
	}
	st.obj = si
	// The choice is decided once for the event, from the import as it
	// is now: before the import is decided, a newly programmed import
	// takes it, so that it hands over only the chosen clusters' slices; a
	// programmed one changes to it after (selectChoice).
	var next choice
	if im.clusterSelection {
		st.results = results
		next = im.choose(st)
		if st.programmedFrom == nil {
			st.chosen = next
		}
	}
	st.invalid = nil
	im.trackDerivedService(key, si)
	svc, err := mcsproxy.ServiceForImport(si, im.opts)
	if err != nil && !errors.As(err, &st.invalid) {
		st.invalid = &mcsproxy.RejectionError{Reason: mcsproxy.ReasonInvalidType, Message: err.Error()}
	}
	var buf, nativeBuf [2]types.NamespacedName
	affected := im.claims.setImport(&st.claim, claim{key: key, created: si.CreationTimestamp.Unix()}, claimIPs(svc), buf[:0])
	nativeDecided := im.reconcileImports(affected, importTranslation{key: key, st: st, svc: svc}, nativeBuf[:0])
	if im.clusterSelection {
		im.selectChoice(key, st, next)
	}
	if !slices.Contains(nativeDecided, key) {
		im.reconcileNativeOf(key, st)
	}
}

// OnServiceImportDelete forgets a ServiceImport and removes its rules.
func (p *Proxier) OnServiceImportDelete(si *mcsv1beta1.ServiceImport) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := types.NamespacedName{Namespace: si.Namespace, Name: si.Name}
	st := p.im.imports[key]
	if st == nil || st.obj == nil {
		return
	}
	affected := p.im.claims.setImport(&st.claim, claim{key: key}, nil, nil)
	st.obj, st.invalid = nil, nil
	p.im.trackDerivedService(key, nil)
	p.im.reconcileImports(affected, importTranslation{}, nil)
	// The entry stays while its slices do: as a new one, had it gone.
	st.reported, st.nativeReported = "", ""
	for _, slice := range st.slices {
		p.im.reconcileListedSlice(slice, st, nil)
	}
	p.im.reconcileNativeOf(key, st)
	p.im.imports.forget(key)
}

// upsertMultiClusterSlice records an MCS EndpointSlice routed here by
// routeSlice (added, or changed within the same import: a slice moved to
// another import is first deleted from the old one) and programs it if its
// import is programmed.
func (im *importer) upsertMultiClusterSlice(slice *discoveryv1.EndpointSlice) {
	importKey := importKeyOf(slice)
	imp := im.imports.entry(importKey)
	i, found := imp.findSlice(slice.Name)
	var st *sliceState
	if found {
		st = imp.slices[i]
	} else {
		st = &sliceState{}
		if imp.slices == nil {
			// An import has a slice per source cluster: room for two,
			// in the entry itself.
			imp.slices = imp.slicesBuf[:0]
		}
		imp.slices = slices.Insert(imp.slices, i, st)
	}
	st.obj = slice
	var translated *discoveryv1.EndpointSlice
	translated, st.invalid = im.translateEndpointSlice(slice)
	if im.clusterSelection && im.listed {
		// A failover or failback is decided, and handed over whole,
		// before the slice's own change.
		im.reselect(importKey)
	}
	im.reconcileListedSlice(st, imp, translated)
	if im.listed {
		im.reconcileNativeOf(importKey, imp)
	}
}

func (im *importer) translateEndpointSlice(slice *discoveryv1.EndpointSlice) (*discoveryv1.EndpointSlice, *mcsproxy.RejectionError) {
	translated, err := mcsproxy.EndpointSliceForImport(slice, im.opts)
	if err == nil {
		return translated, nil
	}
	var invalid *mcsproxy.RejectionError
	if !errors.As(err, &invalid) {
		invalid = &mcsproxy.RejectionError{Reason: mcsproxy.ReasonInvalidEndpoint, Message: err.Error()}
	}
	return nil, invalid
}

// translationOf returns the translation of st.obj: fresh, when the
// caller has just made it (one translation per event), else made again
// (EndpointSliceForImport is a pure function of the slice and the options).
func (im *importer) translationOf(st *sliceState, fresh *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	if fresh != nil {
		return fresh
	}
	translated, _ := im.translateEndpointSlice(st.obj)
	return translated
}

// programmedTranslation gives again what the Provider holds for st: the
// translation of programmedFrom with today's options, which names the same
// slice of the same Service (all the Provider keys it by). A slice that no
// longer translates is named by a stub.
func (im *importer) programmedTranslation(st *sliceState) *discoveryv1.EndpointSlice {
	from := st.programmedFrom
	if translated, _ := im.translateEndpointSlice(from); translated != nil {
		return translated
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: from.Namespace,
			Name:      from.Name,
			Labels:    im.imports.labelsOf(from.Namespace, mcsproxy.ImportNameOf(from)),
		},
		AddressType: from.AddressType,
	}
}

// SetLocalClusterID tells the proxier which cluster it runs in ("" when
// that is not known): the endpoints of that cluster's own exports keep
// their node names and node hints (internalTrafficPolicy Local,
// PreferSameNode), every other cluster's lose them. Every MCS EndpointSlice
// is translated again when the ID changes.
func (p *Proxier) SetLocalClusterID(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.im.opts.LocalClusterID == id {
		return
	}
	p.logger.Info("Local cluster ID changed", "clusterID", id, "previous", p.im.opts.LocalClusterID)
	before := p.im.opts
	opts := *p.im.opts
	opts.LocalClusterID = id
	p.im.opts = &opts
	p.im.optsGen++
	for st := range p.im.imports.allSlices() {
		if st.programmedFrom == nil {
			continue
		}
		if st.programmedFrom == st.obj && st.programmedGen == p.im.optsGen-1 {
			old, _ := mcsproxy.EndpointSliceForImport(st.obj, before)
			if now, _ := mcsproxy.EndpointSliceForImport(st.obj, p.im.opts); old != nil && apiequality.Semantic.DeepEqual(old, now) {
				// Another cluster's slice: the same with either ID. The
				// programmed object stands, sparing the proxier a change.
				st.programmedGen = p.im.optsGen
				continue
			}
		}
		p.im.reconcileSlice(st, nil)
	}
	for key := range p.im.native {
		p.im.reconcileNative(key)
	}
}

// trustedManagers are the managers whose imports and slices are trusted.
func (p *Proxier) trustedManagers() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.im.opts.TrustedManagers)
}

// LocalClusterID is the cluster ID the proxier last learnt.
func (p *Proxier) LocalClusterID() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.im.opts.LocalClusterID
}

// deleteMultiClusterSlice forgets an MCS EndpointSlice.
func (im *importer) deleteMultiClusterSlice(slice *discoveryv1.EndpointSlice) {
	importKey := importKeyOf(slice)
	imp := im.imports[importKey]
	if imp == nil {
		return
	}
	i, found := imp.findSlice(slice.Name)
	if !found {
		return
	}
	st := imp.slices[i]
	st.obj, st.invalid = nil, nil
	if im.clusterSelection && im.listed {
		im.reselect(importKey)
	}
	im.reconcileSlice(st, nil)
	imp.slices = slices.Delete(imp.slices, i, i+1)
	im.imports.forget(importKey)
	if im.listed {
		im.reconcileNative(importKey)
	}
}

// RetainImports forgets every ServiceImport not in keep, as if deleted:
// those deleted while no informer watched them (between the watches of
// two served versions).
func (p *Proxier) RetainImports(keep sets.Set[types.NamespacedName]) {
	p.mu.Lock()
	var gone []*mcsv1beta1.ServiceImport
	for key, st := range p.im.imports {
		if st.obj != nil && !keep.Has(key) {
			gone = append(gone, st.obj)
		}
	}
	p.mu.Unlock()
	for _, si := range gone {
		p.OnServiceImportDelete(si)
	}
}

// Reset forgets every ServiceImport and removes the rules of imports and
// their slices; it is called when the ServiceImport API stops being served.
// MCS EndpointSlices stay, unprogrammed: kube-proxy's EndpointSlice
// informer, which delivers them, goes on and will not deliver them again
// when imports come back.
func (p *Proxier) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, st := range p.im.imports {
		p.im.claims.setImport(&st.claim, claim{key: key}, nil, nil)
		st.obj, st.invalid = nil, nil
		p.im.reconcileImport(key, st, nil, nil)
		st.reported, st.nativeReported = "", ""
		p.im.imports.forget(key)
	}
	clear(p.im.derivedOf)
	clear(p.im.derivedBy)
	p.im.reconcileAllSlices()
	for key := range p.im.native {
		p.im.reconcileNative(key)
	}
}
