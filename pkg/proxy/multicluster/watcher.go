package multicluster

import (
	"context"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
	"k8s.io/multiclusterservices/crdgate"
	"k8s.io/multiclusterservices/mcsapi"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1alpha1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclientset "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"
	mcsinformers "sigs.k8s.io/mcs-api/pkg/client/informers/externalversions"
)

// ServiceImportCRDName is the CRD whose presence turns the watcher on.
const ServiceImportCRDName = mcsv1beta1.ServiceImportPluralName + "." + mcsv1beta1.GroupName

// servedVersions are the ServiceImport versions kube-proxy consumes,
// preferred first: v1beta1 is the storage version of mcs-api v0.5.2.
var servedVersions = []string{mcsv1beta1.GroupVersion.Version, "v1alpha1"}

// Watcher feeds a Proxier from a ServiceImport informer that runs only
// while the ServiceImport CRD is served. MCS EndpointSlices reach the
// Proxier through kube-proxy's own EndpointSlice informer, which already
// lists them: a second informer would cache every one of them twice.
type Watcher struct {
	Proxier   *Proxier
	MCSClient mcsclientset.Interface
	CRDClient apiextensionsclient.Interface
	// DynamicClient reads the ClusterProperty naming the cluster; without
	// it every cluster's endpoints are treated as remote.
	DynamicClient dynamic.Interface
	// ResyncPeriod is kube-proxy's --config-sync-period.
	ResyncPeriod time.Duration
	// SyncTimeout bounds how long the proxier's first sync waits for the
	// multi-cluster informers. If the API cannot be read (RBAC, an
	// unreachable aggregated API), local Services must not wait forever.
	SyncTimeout time.Duration
	// ClusterSelection (the MultiClusterServiceClusterSelection gate)
	// reads v1beta1 imports whole, through DynamicClient, so that their
	// cluster selector results reach the Proxier (selection.go).
	ClusterSelection bool

	clusterID *clusterID
}

// Start runs the watcher until ctx is done.
func (w *Watcher) Start(ctx context.Context) {
	logger := klog.FromContext(ctx).WithName("multicluster")
	w.clusterID = &clusterID{w: w, settled: make(chan struct{})}
	w.clusterID.start(ctx)
	gate := &crdgate.Gate{
		Name:     ServiceImportCRDName,
		Versions: servedVersions,
		Run:      w.run,
		Absent: func() {
			serviceImportAPIServed.Set(0)
			w.Proxier.Reset()
			w.Proxier.MultiClusterSynced()
		},
	}
	gate.Start(ctx, w.CRDClient)
	if w.SyncTimeout > 0 {
		go func() {
			select {
			case <-ctx.Done():
			case <-time.After(w.SyncTimeout):
				if !w.Proxier.isMultiClusterSynced() {
					logger.Error(nil, "ServiceImports could not be read in time; programming local Services without them", "timeout", w.SyncTimeout, "crd", ServiceImportCRDName)
					w.Proxier.MultiClusterSynced()
				}
			}
		}()
	}
}

// proxyAnnotations returns the annotations of an import a proxy reads
// (native names, the derived Service and, while a member switches to
// native mode, the clusterset IPs), nil when it has none.
func proxyAnnotations(in map[string]string) map[string]string {
	var out map[string]string
	for _, k := range []string{mcsproxy.AnnotationNativeNames, mcsproxy.AnnotationLocalFirstMinimum, mcsproxy.AnnotationDerivedService, mcsproxy.AnnotationClusterSetIPs} {
		if v, ok := in[k]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// keepWhatProxiesRead returns the informer's transform: a proxy reads an
// import's spec, its manager label and its native-names and derived-Service
// annotations, never its status (the controller's
// conditions and cluster list), annotations, other labels or managed
// fields, so the cache keeps none of them; they are most of an import's
// weight in kube-proxy's heap. The labels of imports by a trusted manager
// are one shared map per manager.
func keepWhatProxiesRead(trusted []string) cache.TransformFunc {
	shared := map[string]map[string]string{}
	for _, m := range trusted {
		shared[m] = map[string]string{mcsproxy.LabelImportManagedBy: m}
	}
	return func(obj any) (any, error) {
		if accessor, err := meta.Accessor(obj); err == nil {
			accessor.SetManagedFields(nil)
			accessor.SetAnnotations(proxyAnnotations(accessor.GetAnnotations()))
			manager, ok := accessor.GetLabels()[mcsproxy.LabelImportManagedBy]
			switch labels := shared[manager]; {
			case labels != nil:
				accessor.SetLabels(labels)
			case ok:
				accessor.SetLabels(map[string]string{mcsproxy.LabelImportManagedBy: manager})
			default:
				accessor.SetLabels(nil)
			}
		}
		switch si := obj.(type) {
		case *mcsv1beta1.ServiceImport:
			si.Status = mcsv1beta1.ServiceImportStatus{}
		case *mcsv1alpha1.ServiceImport:
			si.Status = mcsv1alpha1.ServiceImportStatus{}
		}
		return obj, nil
	}
}

// run watches ServiceImports of one API version until ctx is done, then
// removes everything it programmed.
func (w *Watcher) run(ctx context.Context, version string) {
	logger := klog.FromContext(ctx).WithName("multicluster")
	mcsFactory := mcsinformers.NewSharedInformerFactoryWithOptions(w.MCSClient, w.ResyncPeriod, mcsinformers.WithTransform(keepWhatProxiesRead(w.Proxier.trustedManagers())))
	var factory interface {
		Start(<-chan struct{})
		Shutdown()
	} = mcsFactory
	var importInformer cache.SharedIndexInformer
	switch {
	case version == mcsv1beta1.GroupVersion.Version && w.ClusterSelection && w.DynamicClient != nil:
		factory, importInformer = selectedImportInformer(w.DynamicClient, w.ResyncPeriod, keepWhatProxiesRead(w.Proxier.trustedManagers()))
	case version == mcsv1beta1.GroupVersion.Version:
		importInformer = mcsFactory.Multicluster().V1beta1().ServiceImports().Informer()
	default:
		importInformer = mcsFactory.Multicluster().V1alpha1().ServiceImports().Informer()
	}
	toV1beta1 := func(obj any) *mcsv1beta1.ServiceImport {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		switch si := obj.(type) {
		case *mcsv1beta1.ServiceImport:
			return si
		case *selectedImport:
			return si.ServiceImport
		case *mcsv1alpha1.ServiceImport:
			out, err := mcsapi.ServiceImportFromV1Alpha1(si)
			if err != nil {
				logger.Error(err, "Ignoring ServiceImport")
				return nil
			}
			return out
		}
		return nil
	}
	registration, _ := importInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if si := toV1beta1(obj); si != nil {
				w.Proxier.OnServiceImportSelected(si, resultsOf(obj))
			}
		},
		UpdateFunc: func(_, obj any) {
			if si := toV1beta1(obj); si != nil {
				w.Proxier.OnServiceImportSelected(si, resultsOf(obj))
			}
		},
		DeleteFunc: func(obj any) {
			if si := toV1beta1(obj); si != nil {
				w.Proxier.OnServiceImportDelete(si)
			}
		},
	})

	factory.Start(ctx.Done())
	serviceImportAPIServed.Set(1)
	// The registration's HasSynced, not the informer's: the informer has
	// synced once its store is full, the handler once every import in it
	// has reached the Proxier, which is what the first sync must wait for.
	if cache.WaitForCacheSync(ctx.Done(), registration.HasSynced) {
		// A switch of served version (v1alpha1 to v1beta1) keeps what the
		// previous informer programmed while this one lists: only the
		// imports deleted in between go.
		present := sets.New[types.NamespacedName]()
		for _, key := range importInformer.GetStore().ListKeys() {
			if ns, name, err := cache.SplitMetaNamespaceKey(key); err == nil {
				present.Insert(types.NamespacedName{Namespace: ns, Name: name})
			}
		}
		w.Proxier.RetainImports(present)
		// Programmed before the cluster ID is known, this cluster's own
		// endpoints would lose their node names until it is: a blip in
		// internalTrafficPolicy Local imports at every restart.
		w.clusterID.wait(ctx)
		logger.Info("ServiceImports synced", "version", version)
		w.Proxier.MultiClusterSynced()
		// Every --config-sync-period, as kube-proxy's informers resync,
		// every decision is made again from scratch (Redecide).
		if w.ResyncPeriod > 0 {
			go wait.UntilWithContext(ctx, func(context.Context) { w.Proxier.Redecide() }, w.ResyncPeriod)
		}
	}
	<-ctx.Done()
	// Shutdown waits for the informers' goroutines, so no event handler
	// runs once the gate moves on. Nothing is withdrawn here: when the CRD
	// stops being served the gate's Absent resets the Proxier, and when
	// another version is served the next run reconciles (above).
	factory.Shutdown()
}

// selectedImportInformer returns an informer of v1beta1 ServiceImports
// read whole (dynamic client), each cached as a selectedImport: what keep
// keeps of mcs-api's object, and the results.
func selectedImportInformer(client dynamic.Interface, resync time.Duration, keep cache.TransformFunc) (dynamicinformer.DynamicSharedInformerFactory, cache.SharedIndexInformer) {
	f := dynamicinformer.NewDynamicSharedInformerFactory(client, resync)
	inf := f.ForResource(mcsv1beta1.SchemeGroupVersion.WithResource(mcsv1beta1.ServiceImportPluralName)).Informer()
	_ = inf.SetTransform(func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		si := &mcsv1beta1.ServiceImport{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, si); err != nil {
			return nil, err
		}
		overlay := &csv1beta1.ServiceImport{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, overlay); err != nil {
			return nil, err
		}
		if _, err := keep(si); err != nil {
			return nil, err
		}
		return &selectedImport{ServiceImport: si, results: overlay.Status.ClusterSelectorResults}, nil
	})
	return f, inf
}
