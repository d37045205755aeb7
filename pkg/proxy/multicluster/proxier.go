package multicluster

import (
	"cmp"
	"errors"
	"fmt"
	"iter"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/proxy"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

const eventAction = "ProgramServiceImport"

// Proxier is a proxy.Provider that adds ServiceImports to the Services and
// EndpointSlices the wrapped Provider receives from kube-proxy's informers.
// All methods are safe for concurrent use.
type Proxier struct {
	proxy.Provider

	opts     *mcsproxy.Options
	recorder events.EventRecorder
	// node is the related object of every event (report.go).
	node   *v1.ObjectReference
	logger klog.Logger
	// optsGen counts the changes of opts that change translations (the
	// local cluster ID): a slice programmed with an older generation is
	// translated again.
	optsGen int

	mu sync.Mutex
	// imports holds, per import name, every ServiceImport and MCS
	// EndpointSlice seen, programmed or not, so that a conflict that goes
	// away or an import that arrives after its slices is picked up at once.
	imports map[types.NamespacedName]*importState
	// native holds, per Service name, what native names need (native.go).
	native map[types.NamespacedName]*nativeState
	// claims says who owns each clusterset IP (claims.go).
	claims *claimIndex
	// translated is the translation of the import or slice whose event
	// is being handled, so that it is derived once per event, not kept.
	translated struct {
		importState *importState
		service     *v1.Service
		st          *sliceState
		slice       *discoveryv1.EndpointSlice
	}
	// derivedOf maps an import to the local Service its annotation names
	// as its derived Service (derived mode), derivedBy the reverse; only
	// such imports are in them.
	derivedOf map[types.NamespacedName]types.NamespacedName
	derivedBy map[types.NamespacedName]sets.Set[types.NamespacedName]
	// reservedReported is, per local Service, the externalIPs and
	// load-balancer IPs inside the clusterset ranges last reported, and
	// droppedSlices the plain EndpointSlices that name an import's
	// synthetic Service, so that each is reported once.
	reservedReported map[types.NamespacedName]string
	droppedSlices    sets.Set[types.NamespacedName]

	// The proxier must not sync before imports are known, or clusterset
	// IPs would disappear from the rules at every restart. Synced calls
	// from the core informers are held until the MCS side has synced.
	servicesSynced, endpointSlicesSynced, mcsSynced bool
	forwardedServicesSynced, forwardedSlicesSynced  bool
}

type importState struct {
	obj *mcsv1beta1.ServiceImport
	// invalid is why obj cannot be translated, if it cannot. The IPs a
	// valid import claims are in claim.
	invalid *mcsproxy.RejectionError
	// programmedFrom is the ServiceImport whose translation the wrapped
	// Provider holds, if any. The translation itself is not kept: the
	// Provider keeps what it needs of it, and ServiceForImport, a pure
	// function, gives it again when it is to be updated or deleted.
	programmedFrom *mcsv1beta1.ServiceImport
	// reported is the last rejection reported, so that each is logged,
	// evented and counted once rather than on every event.
	reported mcsproxy.Reason
	// nativeReported is the last native-names error reported.
	nativeReported string
	// claim is the import's claim on its clusterset IPs (claims.go).
	claim claimOf
	// slices are the import's MCS EndpointSlices (in the import's
	// namespace, labelled with its name), sorted by name, and labels the
	// map their translations share; nativeLabels are the labels of those
	// handed over as the local Service's (native names). An entry lives
	// while the import or any of its slices does (forgetImport). Slices are
	// found through their import, not by a map of their own: a proxier
	// holds one per slice as long as the slice exists.
	slices               []*sliceState
	labels, nativeLabels map[string]string
}

// findSlice returns where the slice called name is, or would be, in
// st.slices.
func (st *importState) findSlice(name string) (int, bool) {
	return slices.BinarySearchFunc(st.slices, name, func(s *sliceState, name string) int {
		return strings.Compare(s.name(), name)
	})
}

// sliceState is what the Proxier keeps of one MCS EndpointSlice. Kept
// small: a proxier holds one per slice, as long as the slice exists. The
// import it belongs to is read from obj (importKeyOf).
type sliceState struct {
	obj *discoveryv1.EndpointSlice
	// invalid is why obj cannot be translated, if it cannot.
	invalid *mcsproxy.RejectionError
	// programmedFrom is the EndpointSlice whose translation the wrapped
	// Provider holds, translated with the options of generation
	// programmedGen, if any. As for imports, the translation itself is not
	// kept (a proxier holds every slice as long as it exists): the
	// Provider keeps what it needs of it, and EndpointSliceForImport, a
	// pure function, gives it again when it is to be updated or deleted.
	programmedFrom *discoveryv1.EndpointSlice
	programmedGen  int
	reported       mcsproxy.Reason
	// native is obj translated as a slice of the local Service of the
	// import's name (native names); only slices of imports that ask for
	// native names have one.
	native *nativeCopy
}

// name is the slice's name; a state in an import's list always has obj or
// programmedFrom.
func (st *sliceState) name() string {
	if st.obj != nil {
		return st.obj.Name
	}
	return st.programmedFrom.Name
}

// nativeCopy is a slice translated for native names, derived from from
// with the options of generation gen.
type nativeCopy struct {
	slice, from *discoveryv1.EndpointSlice
	gen         int
}

// importKeyOf names the import an MCS EndpointSlice belongs to.
func importKeyOf(slice *discoveryv1.EndpointSlice) types.NamespacedName {
	return types.NamespacedName{Namespace: slice.Namespace, Name: mcsproxy.ImportNameOf(slice)}
}

// NewProxier wraps provider. recorder may be nil.
func NewProxier(logger klog.Logger, provider proxy.Provider, opts *mcsproxy.Options, recorder events.EventRecorder) *Proxier {
	p := &Proxier{
		Provider: provider,
		recorder: recorder,
		logger:   logger.WithName("multicluster"),
		imports:  map[types.NamespacedName]*importState{},
		native:   map[types.NamespacedName]*nativeState{},
		claims:   newClaimIndex(),

		derivedOf: map[types.NamespacedName]types.NamespacedName{},
		derivedBy: map[types.NamespacedName]sets.Set[types.NamespacedName]{},

		reservedReported: map[types.NamespacedName]string{},
		droppedSlices:    sets.New[types.NamespacedName](),
	}
	o := *opts
	o.Labels = p.labelsOf
	p.opts = &o
	return p
}

// labelsOf returns the one labels map every translated slice of import
// namespace/name shares (the proxier holds each translated slice as long
// as it exists). Called with p.mu held.
func (p *Proxier) labelsOf(namespace, name string) map[string]string {
	st := p.importEntry(types.NamespacedName{Namespace: namespace, Name: name})
	if st.labels == nil {
		st.labels = mcsproxy.SliceLabels(name)
	}
	return st.labels
}

// importEntry returns the entry of import key, made if there is none.
func (p *Proxier) importEntry(key types.NamespacedName) *importState {
	st := p.imports[key]
	if st == nil {
		st = &importState{}
		p.imports[key] = st
	}
	return st
}

// forgetImport drops the entry of import key once it holds nothing: no
// import, nothing programmed, no slice.
func (p *Proxier) forgetImport(key types.NamespacedName) {
	if st := p.imports[key]; st != nil && st.obj == nil && st.programmedFrom == nil && len(st.slices) == 0 {
		delete(p.imports, key)
	}
}

// nativeLabelsOf returns the labels map of import key's slices handed
// over as the local Service's, made when native names first need it.
func (p *Proxier) nativeLabelsOf(key types.NamespacedName) map[string]string {
	st := p.importEntry(key)
	if st.nativeLabels == nil {
		st.nativeLabels = map[string]string{discoveryv1.LabelServiceName: key.Name}
	}
	return st.nativeLabels
}

// slicesOf returns import key's slices, sorted by name. Reconciling them
// leaves the list as it is.
func (p *Proxier) slicesOf(key types.NamespacedName) []*sliceState {
	if st := p.imports[key]; st != nil {
		return st.slices
	}
	return nil
}

// allSlices yields every MCS EndpointSlice held. Reconciling them leaves
// the lists as they are.
func (p *Proxier) allSlices() iter.Seq[*sliceState] {
	return func(yield func(*sliceState) bool) {
		for _, imp := range p.imports {
			for _, st := range imp.slices {
				if !yield(st) {
					return
				}
			}
		}
	}
}

// reconcileAllSlices reconciles every MCS EndpointSlice.
func (p *Proxier) reconcileAllSlices() {
	for st := range p.allSlices() {
		p.reconcileSlice(st)
	}
}

var _ proxy.Provider = &Proxier{}

// OnServiceAdd is called by kube-proxy's Service informer.
func (p *Proxier) OnServiceAdd(service *v1.Service) {
	p.mu.Lock()
	defer p.mu.Unlock()
	service = p.admitService(service)
	p.setServiceClaims(service, localServiceIPs(service))
	p.Provider.OnServiceAdd(service)
}

// OnServiceUpdate is called by kube-proxy's Service informer.
func (p *Proxier) OnServiceUpdate(oldService, service *v1.Service) {
	p.mu.Lock()
	defer p.mu.Unlock()
	oldService, service = mcsproxy.WithoutReservedIPs(oldService, p.opts), p.admitService(service)
	// Claim old and new IPs while the proxier switches, so an import never
	// shares an IP with the Service in one ruleset in either direction.
	key := types.NamespacedName{Namespace: service.Namespace, Name: service.Name}
	newIPs := localServiceIPs(service)
	p.setServiceClaims(service, slices.Concat(p.claims.ipsOfService(key), newIPs))
	p.Provider.OnServiceUpdate(oldService, service)
	p.setServiceClaims(service, newIPs)
}

// OnServiceDelete is called by kube-proxy's Service informer.
func (p *Proxier) OnServiceDelete(service *v1.Service) {
	p.mu.Lock()
	defer p.mu.Unlock()
	// The local Service's rules go first, so that an import waiting for
	// its IP never shares it with the Service in one ruleset.
	p.Provider.OnServiceDelete(mcsproxy.WithoutReservedIPs(service, p.opts))
	p.setServiceClaims(service, nil)
	delete(p.reservedReported, types.NamespacedName{Namespace: service.Namespace, Name: service.Name})
}

// admitService returns service as the proxier may program it: without the
// externalIPs and load-balancer IPs inside the clusterset ranges, which
// are reserved for imports. Any user who may set spec.externalIPs (all of
// them, unless DenyServiceExternalIPs is on) could otherwise take a
// clusterset IP from its import on every node. Each change of what is
// left out is reported once.
func (p *Proxier) admitService(service *v1.Service) *v1.Service {
	admitted := mcsproxy.WithoutReservedIPs(service, p.opts)
	key := types.NamespacedName{Namespace: service.Namespace, Name: service.Name}
	reserved := strings.Join(mcsproxy.ReservedIPs(service, p.opts), ", ")
	if reserved == p.reservedReported[key] {
		return admitted
	}
	if reserved == "" {
		delete(p.reservedReported, key)
		return admitted
	}
	p.reservedReported[key] = reserved
	p.report(rejection{kind: kindService, obj: service, RejectionError: &mcsproxy.RejectionError{
		Reason:  mcsproxy.ReasonReservedIP,
		Message: fmt.Sprintf("external or load-balancer IPs %s lie in the clusterset IP ranges, which are reserved for ServiceImports; they are not programmed", reserved),
	}})
	return admitted
}

// OnServiceSynced is called by kube-proxy's Service informer.
func (p *Proxier) OnServiceSynced() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.servicesSynced = true
	p.forwardSynced()
}

// sliceRoute says where kube-proxy's EndpointSlice informer's slices go.
type sliceRoute int

const (
	// routeNone: no slice (the old side of an add, the new of a delete).
	routeNone sliceRoute = iota
	// routeLocal: a local Service's slice, for the wrapped Provider as is.
	routeLocal
	// routeMultiCluster: an MCS EndpointSlice, checked and translated
	// here before its import's rules get it.
	routeMultiCluster
	// routeDropped: a plain slice that names an import's synthetic
	// Service. It would reach the import's rules without any check.
	routeDropped
)

func routeOf(slice *discoveryv1.EndpointSlice) sliceRoute {
	switch {
	case slice == nil:
		return routeNone
	case mcsproxy.ClaimsImportService(slice):
		return routeDropped
	case mcsproxy.IsMultiClusterEndpointSlice(slice):
		return routeMultiCluster
	default:
		return routeLocal
	}
}

// OnEndpointSliceAdd is called by kube-proxy's EndpointSlice informer,
// which delivers the MCS EndpointSlices too: they are held here until their
// import is programmed, so that kube-proxy caches each slice once.
func (p *Proxier) OnEndpointSliceAdd(slice *discoveryv1.EndpointSlice) {
	p.routeSlice(nil, slice)
}

// OnEndpointSliceUpdate is called by kube-proxy's EndpointSlice informer.
func (p *Proxier) OnEndpointSliceUpdate(oldSlice, slice *discoveryv1.EndpointSlice) {
	p.routeSlice(oldSlice, slice)
}

// OnEndpointSliceDelete is called by kube-proxy's EndpointSlice informer.
func (p *Proxier) OnEndpointSliceDelete(slice *discoveryv1.EndpointSlice) {
	p.routeSlice(slice, nil)
}

// routeSlice delivers a change from old to slice (either nil for an add or
// a delete) to where each belongs; a slice relabelled from one route to
// another leaves the old one first. Native names follow every change of a
// local Service's slices.
func (p *Proxier) routeSlice(old, slice *discoveryv1.EndpointSlice) {
	from, to := routeOf(old), routeOf(slice)
	if from == routeMultiCluster && to == routeMultiCluster && importKeyOf(old) != importKeyOf(slice) {
		// Moved to another import: it leaves the old one first.
		p.OnMultiClusterEndpointSliceDelete(old)
	}
	if from != to {
		switch from {
		case routeMultiCluster:
			p.OnMultiClusterEndpointSliceDelete(old)
		case routeDropped:
			p.forgetDroppedSlice(old)
		}
	}
	switch to {
	case routeMultiCluster:
		p.OnMultiClusterEndpointSliceUpsert(slice)
	case routeDropped:
		p.dropSlice(slice)
	}
	if from == routeLocal || to == routeLocal {
		var localOld, localNew *discoveryv1.EndpointSlice
		if from == routeLocal {
			localOld = old
		}
		if to == routeLocal {
			localNew = slice
		}
		// The local Service's own change goes to the Provider in the
		// middle of its native name's, as the slice itself or carrying
		// remote endpoints (localSliceChanged).
		p.localSliceChanged(localOld, localNew)
	}
}

// forwardLocal hands the Provider a change of a local Service's slice.
func (p *Proxier) forwardLocal(old, cur *discoveryv1.EndpointSlice) {
	switch {
	case old == nil:
		p.Provider.OnEndpointSliceAdd(cur)
	case cur == nil:
		p.Provider.OnEndpointSliceDelete(old)
	default:
		p.Provider.OnEndpointSliceUpdate(old, cur)
	}
}

// dropSlice reports, once per slice, a plain EndpointSlice that names an
// import's synthetic Service.
func (p *Proxier) dropSlice(slice *discoveryv1.EndpointSlice) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := types.NamespacedName{Namespace: slice.Namespace, Name: slice.Name}
	if p.droppedSlices.Has(key) {
		return
	}
	p.droppedSlices.Insert(key)
	p.report(rejection{kind: kindEndpointSlice, obj: slice, RejectionError: &mcsproxy.RejectionError{
		Reason: mcsproxy.ReasonReservedServiceName,
		Message: fmt.Sprintf("label %s=%q names the synthetic Service of a ServiceImport; only MCS EndpointSlices (label %s) reach an import",
			discoveryv1.LabelServiceName, slice.Labels[discoveryv1.LabelServiceName], mcsv1beta1.LabelServiceName),
	}})
}

func (p *Proxier) forgetDroppedSlice(slice *discoveryv1.EndpointSlice) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.droppedSlices.Delete(types.NamespacedName{Namespace: slice.Namespace, Name: slice.Name})
}

// OnEndpointSlicesSynced is called by kube-proxy's EndpointSlice informer.
func (p *Proxier) OnEndpointSlicesSynced() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endpointSlicesSynced = true
	p.forwardSynced()
}

// MultiClusterSynced tells the Proxier that the ServiceImports that
// existed at start-up have all been delivered, or that there are none to
// wait for. (MCS EndpointSlices come with kube-proxy's own EndpointSlice
// informer, whose sync OnEndpointSlicesSynced reports.)
func (p *Proxier) MultiClusterSynced() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mcsSynced {
		return
	}
	p.mcsSynced = true
	p.reconcileAllSlices()
	p.forwardSynced()
}

func (p *Proxier) forwardSynced() {
	if !p.mcsSynced {
		return
	}
	if p.servicesSynced && !p.forwardedServicesSynced {
		p.forwardedServicesSynced = true
		p.Provider.OnServiceSynced()
	}
	if p.endpointSlicesSynced && !p.forwardedSlicesSynced {
		p.forwardedSlicesSynced = true
		p.Provider.OnEndpointSlicesSynced()
	}
}

// OnServiceImportUpsert records a ServiceImport and programs it if it is
// valid and owns its clusterset IPs.
func (p *Proxier) OnServiceImportUpsert(si *mcsv1beta1.ServiceImport) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := types.NamespacedName{Namespace: si.Namespace, Name: si.Name}
	st := p.importEntry(key)
	if st.obj == si || st.obj != nil && si.ResourceVersion != "" && st.obj.ResourceVersion == si.ResourceVersion && st.obj.UID == si.UID {
		// A resync: nothing changed, so no decision can.
		return
	}
	st.obj = si
	st.invalid = nil
	p.trackDerivedService(key, si)
	svc, err := mcsproxy.ServiceForImport(si, p.opts)
	if err != nil && !errors.As(err, &st.invalid) {
		st.invalid = &mcsproxy.RejectionError{Reason: mcsproxy.ReasonInvalidType, Message: err.Error()}
	}
	affected := p.claims.setImport(&st.claim, claim{key: key, created: si.CreationTimestamp.Unix()}, claimIPs(svc))
	p.translated.importState, p.translated.service = st, svc
	p.reconcileImports(affected)
	p.translated.importState, p.translated.service = nil, nil
	p.reconcileNative(key)
}

// OnServiceImportDelete forgets a ServiceImport and removes its rules.
func (p *Proxier) OnServiceImportDelete(si *mcsv1beta1.ServiceImport) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := types.NamespacedName{Namespace: si.Namespace, Name: si.Name}
	st := p.imports[key]
	if st == nil || st.obj == nil {
		return
	}
	affected := p.claims.setImport(&st.claim, claim{key: key}, nil)
	st.obj, st.invalid = nil, nil
	p.trackDerivedService(key, nil)
	p.reconcileImports(affected)
	// The entry stays while its slices do: as a new one, had it gone.
	st.reported, st.nativeReported = "", ""
	for _, slice := range p.slicesOf(key) {
		p.reconcileSlice(slice)
	}
	p.reconcileNative(key)
	p.forgetImport(key)
}

// OnMultiClusterEndpointSliceUpsert records an MCS EndpointSlice (added,
// or changed within the same import: a slice moved to another import is
// first deleted from the old one, as routeSlice does) and programs it if
// its import is programmed.
func (p *Proxier) OnMultiClusterEndpointSliceUpsert(slice *discoveryv1.EndpointSlice) {
	if !mcsproxy.IsMultiClusterEndpointSlice(slice) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	importKey := importKeyOf(slice)
	imp := p.importEntry(importKey)
	i, found := imp.findSlice(slice.Name)
	var st *sliceState
	if found {
		st = imp.slices[i]
	} else {
		st = &sliceState{}
		imp.slices = slices.Insert(imp.slices, i, st)
	}
	st.obj = slice
	p.translateSlice(st)
	defer func() { p.translated.st, p.translated.slice = nil, nil }()
	p.reconcileSlice(st)
	p.reconcileNative(importKey)
}

// translateSlice checks and translates obj, keeping the translation for
// the rest of the event.
func (p *Proxier) translateSlice(st *sliceState) {
	p.translated.st = st
	p.translated.slice, st.invalid = p.translateEndpointSlice(st.obj)
}

func (p *Proxier) translateEndpointSlice(slice *discoveryv1.EndpointSlice) (*discoveryv1.EndpointSlice, *mcsproxy.RejectionError) {
	translated, err := mcsproxy.EndpointSliceForImport(slice, p.opts)
	if err == nil {
		return translated, nil
	}
	var invalid *mcsproxy.RejectionError
	if !errors.As(err, &invalid) {
		invalid = &mcsproxy.RejectionError{Reason: mcsproxy.ReasonInvalidEndpoint, Message: err.Error()}
	}
	return nil, invalid
}

// translationOf returns the translation of st.obj: the one of the event
// under way, or derived again.
func (p *Proxier) translationOf(st *sliceState) *discoveryv1.EndpointSlice {
	if p.translated.st == st && p.translated.slice != nil {
		return p.translated.slice
	}
	translated, _ := p.translateEndpointSlice(st.obj)
	return translated
}

// programmedTranslation gives again what the Provider holds for st: the
// translation of programmedFrom with today's options, which names the same
// slice of the same Service (all the Provider keys it by). A slice that no
// longer translates is named by a stub.
func (p *Proxier) programmedTranslation(st *sliceState) *discoveryv1.EndpointSlice {
	from := st.programmedFrom
	if translated, _ := p.translateEndpointSlice(from); translated != nil {
		return translated
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: from.Namespace,
			Name:      from.Name,
			Labels:    p.labelsOf(from.Namespace, mcsproxy.ImportNameOf(from)),
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
	if p.opts.LocalClusterID == id {
		return
	}
	p.logger.Info("Local cluster ID changed", "clusterID", id, "previous", p.opts.LocalClusterID)
	before := p.opts
	opts := *p.opts
	opts.LocalClusterID = id
	p.opts = &opts
	p.optsGen++
	for st := range p.allSlices() {
		if st.programmedFrom == nil {
			continue
		}
		if st.programmedFrom == st.obj && st.programmedGen == p.optsGen-1 {
			old, _ := mcsproxy.EndpointSliceForImport(st.obj, before)
			if now, _ := mcsproxy.EndpointSliceForImport(st.obj, p.opts); old != nil && apiequality.Semantic.DeepEqual(old, now) {
				// Another cluster's slice: the same with either ID. The
				// programmed object stands, sparing the proxier a change.
				st.programmedGen = p.optsGen
				continue
			}
		}
		p.reconcileSlice(st)
	}
	for key := range p.native {
		p.reconcileNative(key)
	}
}

// trustedManagers are the managers whose imports and slices are trusted.
func (p *Proxier) trustedManagers() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.opts.TrustedManagers)
}

// LocalClusterID is the cluster ID the proxier last learnt.
func (p *Proxier) LocalClusterID() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.opts.LocalClusterID
}

// OnMultiClusterEndpointSliceDelete forgets an MCS EndpointSlice.
func (p *Proxier) OnMultiClusterEndpointSliceDelete(slice *discoveryv1.EndpointSlice) {
	p.mu.Lock()
	defer p.mu.Unlock()
	importKey := importKeyOf(slice)
	imp := p.imports[importKey]
	if imp == nil {
		return
	}
	i, found := imp.findSlice(slice.Name)
	if !found {
		return
	}
	st := imp.slices[i]
	st.obj, st.invalid = nil, nil
	p.reconcileSlice(st)
	imp.slices = slices.Delete(imp.slices, i, i+1)
	p.forgetImport(importKey)
	p.reconcileNative(importKey)
}

// RetainImports forgets every ServiceImport not in keep, as if deleted:
// those deleted while no informer watched them (between the watches of
// two served versions).
func (p *Proxier) RetainImports(keep sets.Set[types.NamespacedName]) {
	p.mu.Lock()
	var gone []*mcsv1beta1.ServiceImport
	for key, st := range p.imports {
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
	for key, st := range p.imports {
		p.claims.setImport(&st.claim, claim{key: key}, nil)
		st.obj, st.invalid = nil, nil
		p.reconcileImport(key, nil, nil)
		st.reported, st.nativeReported = "", ""
		p.forgetImport(key)
	}
	clear(p.derivedOf)
	clear(p.derivedBy)
	p.reconcileAllSlices()
	for key := range p.native {
		p.reconcileNative(key)
	}
}

// reconcileImports decides each of keys once, then applies the decisions,
// withdrawals first, so that an IP handed from one import to another is
// never programmed twice.
func (p *Proxier) reconcileImports(keys sets.Set[types.NamespacedName]) {
	type decision struct {
		key       types.NamespacedName
		want      *v1.Service
		rejection *mcsproxy.RejectionError
	}
	decisions := make([]decision, 0, keys.Len())
	for _, key := range sortedKeys(keys) {
		want, rejection := p.desired(key)
		decisions = append(decisions, decision{key, want, rejection})
	}
	slices.SortStableFunc(decisions, func(a, b decision) int {
		return cmp.Compare(boolInt(a.want != nil), boolInt(b.want != nil))
	})
	for _, d := range decisions {
		programmed := p.imports[d.key] != nil && p.imports[d.key].programmedFrom != nil
		p.reconcileImport(d.key, d.want, d.rejection)
		if now := p.imports[d.key] != nil && p.imports[d.key].programmedFrom != nil; now != programmed {
			// An import that wins or loses its IPs gains or loses its
			// native names too (nativePolicy).
			p.reconcileNative(d.key)
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// desired returns the Service that should be programmed for an import,
// or nil and the reason it must not be.
func (p *Proxier) desired(key types.NamespacedName) (*v1.Service, *mcsproxy.RejectionError) {
	st := p.imports[key]
	if st == nil || st.obj == nil {
		return nil, nil
	}
	if st.invalid != nil {
		if p.servedByDerivedService(key, st) {
			// Derived mode: the import's IPs are its derived Service's
			// cluster IPs (outside the clusterset ranges), which the
			// Service path programs. Nothing to do, nothing to report.
			return nil, nil
		}
		return nil, st.invalid
	}
	if rejection := p.claims.decide(&st.claim); rejection != nil {
		return nil, rejection
	}
	svc := p.translated.service
	if p.translated.importState != st || svc == nil {
		svc = p.translate(st.obj)
	}
	return svc, nil // nil: headless, DNS serves it
}

// servedByDerivedService tells whether import key is, in derived mode,
// served by the local Service its annotation names: a trusted import whose
// only fault is IPs outside the clusterset ranges, all of them that
// Service's cluster IPs.
func (p *Proxier) servedByDerivedService(key types.NamespacedName, st *importState) bool {
	service, ok := p.derivedOf[key]
	if !ok || st.invalid.Reason != mcsproxy.ReasonIPOutsideClusterSetCIDR || len(st.obj.Spec.IPs) == 0 {
		return false
	}
	used := p.claims.ipsOfService(service)
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
func (p *Proxier) trackDerivedService(key types.NamespacedName, si *mcsv1beta1.ServiceImport) {
	if old, ok := p.derivedOf[key]; ok {
		if p.derivedBy[old].Delete(key).Len() == 0 {
			delete(p.derivedBy, old)
		}
		delete(p.derivedOf, key)
	}
	if si == nil {
		return
	}
	if name := si.Annotations[mcsproxy.AnnotationDerivedService]; name != "" {
		service := types.NamespacedName{Namespace: key.Namespace, Name: name}
		p.derivedOf[key] = service
		if p.derivedBy[service] == nil {
			p.derivedBy[service] = sets.New[types.NamespacedName]()
		}
		p.derivedBy[service].Insert(key)
	}
}

// translate is the Service the Provider gets for si, nil when it gets none.
func (p *Proxier) translate(si *mcsv1beta1.ServiceImport) *v1.Service {
	if si == nil {
		return nil
	}
	svc, _ := mcsproxy.ServiceForImport(si, p.opts)
	return svc
}

func (p *Proxier) reconcileImport(key types.NamespacedName, want *v1.Service, rejection *mcsproxy.RejectionError) {
	st := p.imports[key]
	if st == nil {
		return
	}
	newlyProgrammed := want != nil && st.programmedFrom == nil
	switch {
	case want == nil && st.programmedFrom != nil:
		p.Provider.OnServiceDelete(p.translate(st.programmedFrom))
		st.programmedFrom = nil
		programmedImports.Dec()
		for _, slice := range st.slices {
			p.reconcileSlice(slice)
		}
	case want != nil && st.programmedFrom == nil:
		// Endpoints first, so the first sync that sees the VIP already
		// has somewhere to send it.
		st.programmedFrom = st.obj
		for _, slice := range st.slices {
			p.reconcileSlice(slice)
		}
		p.Provider.OnServiceAdd(want)
		programmedImports.Inc()
	case want != nil && st.programmedFrom != st.obj:
		// The same object translates the same: only a new one (an update
		// of the import) can change what the Provider holds.
		if programmed := p.translate(st.programmedFrom); !apiequality.Semantic.DeepEqual(want, programmed) {
			p.Provider.OnServiceUpdate(programmed, want)
		}
		st.programmedFrom = st.obj
	}
	if st.obj != nil {
		if newlyProgrammed {
			p.reportProgrammed(st.obj, st.reported != "")
		}
		p.reportImport(st, rejection)
	}
}

func (p *Proxier) reconcileSlice(st *sliceState) {
	var imp *importState
	if st.obj != nil {
		imp = p.imports[importKeyOf(st.obj)]
	}
	want := st.obj != nil && st.invalid == nil && imp != nil && imp.programmedFrom != nil
	current := st.programmedFrom != nil && st.programmedFrom == st.obj && st.programmedGen == p.optsGen
	switch {
	case !want && st.programmedFrom != nil:
		p.Provider.OnEndpointSliceDelete(p.programmedTranslation(st))
		st.programmedFrom = nil
	case want && st.programmedFrom == nil:
		p.Provider.OnEndpointSliceAdd(p.translationOf(st))
		st.programmedFrom, st.programmedGen = st.obj, p.optsGen
	case want && !current:
		p.Provider.OnEndpointSliceUpdate(p.programmedTranslation(st), p.translationOf(st))
		st.programmedFrom, st.programmedGen = st.obj, p.optsGen
	}
	if st.obj != nil {
		p.reportSlice(st, imp)
	}
}

func (p *Proxier) reportImport(st *importState, rejected *mcsproxy.RejectionError) {
	if rejected == nil {
		if st.reported != "" {
			p.logger.Info("ServiceImport is programmed again", "serviceImport", klog.KObj(st.obj))
		}
		st.reported = ""
		return
	}
	if st.reported == rejected.Reason {
		return
	}
	st.reported = rejected.Reason
	p.report(rejection{kind: kindServiceImport, obj: st.obj, RejectionError: rejected})
}

func (p *Proxier) reportSlice(st *sliceState, imp *importState) {
	rejected := st.invalid
	if rejected == nil && (imp == nil || imp.obj == nil) && p.mcsSynced && !ownedByServiceImport(st.obj) {
		// A slice owned by a deleted import is about to be collected:
		// only a slice nobody will clean up is worth a report.
		rejected = &mcsproxy.RejectionError{
			Reason:  mcsproxy.ReasonNoServiceImport,
			Message: fmt.Sprintf("no ServiceImport %s exists for this EndpointSlice", importKeyOf(st.obj)),
		}
	}
	if rejected == nil {
		st.reported = ""
		return
	}
	if st.reported == rejected.Reason {
		return
	}
	st.reported = rejected.Reason
	r := rejection{kind: kindEndpointSlice, obj: st.obj, RejectionError: rejected}
	if imp != nil && imp.obj != nil {
		// Users look at the import; the slice is named in the note.
		r.regarding = kindServiceImport.ref(imp.obj.Namespace, imp.obj.Name, imp.obj.UID)
		r.note = fmt.Sprintf("EndpointSlice %s: %s", st.obj.Name, rejected.Message)
	}
	p.report(r)
}

func ownedByServiceImport(slice *discoveryv1.EndpointSlice) bool {
	for _, ref := range slice.OwnerReferences {
		if ref.Kind == mcsv1beta1.ServiceImportKindName {
			return true
		}
	}
	return false
}

// setServiceClaims records the IPs a local Service uses and decides again
// every import that owned one of its old or new IPs.
func (p *Proxier) setServiceClaims(service *v1.Service, ips []netip.Addr) {
	key := types.NamespacedName{Namespace: service.Namespace, Name: service.Name}
	affected := p.claims.setService(key, ips)
	// The imports that name this Service as their derived Service.
	affected = affected.Union(p.derivedBy[key])
	p.reconcileImports(affected)
}

// localServiceIPs returns every IP on which the proxier programs rules for
// a local Service: an import on any of them would share its rules.
func localServiceIPs(service *v1.Service) []netip.Addr {
	var raw []string
	raw = append(raw, service.Spec.ClusterIPs...)
	if len(service.Spec.ClusterIPs) == 0 {
		raw = append(raw, service.Spec.ClusterIP)
	}
	raw = append(raw, service.Spec.ExternalIPs...)
	for _, ing := range service.Status.LoadBalancer.Ingress {
		raw = append(raw, ing.IP)
	}
	var out []netip.Addr
	for _, s := range raw {
		if ip, err := netip.ParseAddr(s); err == nil {
			out = append(out, ip.Unmap())
		}
	}
	return out
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

func (p *Proxier) isMultiClusterSynced() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mcsSynced
}

func sortedKeys(s sets.Set[types.NamespacedName]) []types.NamespacedName {
	out := s.UnsortedList()
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}
