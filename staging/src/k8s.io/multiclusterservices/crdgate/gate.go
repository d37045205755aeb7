// Package crdgate runs work only while a CustomResourceDefinition is served.
//
// A component that consumes an optional API (such as the MCS ServiceImport)
// must neither fail nor spin on a missing resource: it watches the CRD
// itself, starts its informers once the CRD is established, and stops them,
// removing whatever it derived, when the CRD is deleted. Nothing restarts.
package crdgate

import (
	"context"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Gate runs Run while the CRD named Name is established and serves one of
// Versions.
type Gate struct {
	// Name is the CRD's name, <plural>.<group>.
	Name string
	// Versions are the versions the caller can consume, preferred first.
	Versions []string
	// Run runs while the CRD serves version. Its context is cancelled when
	// the CRD is deleted or stops serving that version (then Run is called
	// again with the new version, if any); Run must return once it is.
	Run func(ctx context.Context, version string)
	// Absent is called once the CRD's informer has synced and the CRD is
	// not served, and again each time it stops being served, after Run
	// has returned. It may be nil.
	Absent func()
}

// ServedVersion returns the first of the wanted versions that an
// established CRD serves, or "" if it serves none of them.
func ServedVersion(crd *apiextensionsv1.CustomResourceDefinition, wanted []string) string {
	if crd == nil || crd.DeletionTimestamp != nil || !established(crd) {
		return ""
	}
	for _, w := range wanted {
		for _, v := range crd.Spec.Versions {
			if v.Name == w && v.Served {
				return w
			}
		}
	}
	return ""
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

// Start watches the CRD (only that one object: RBAC may restrict the
// caller to its name) and drives Run and Absent until ctx is done.
func (g *Gate) Start(ctx context.Context, client apiextensionsclient.Interface) {
	informer := apiextensionsinformers.NewFilteredCustomResourceDefinitionInformer(client, 0, cache.Indexers{},
		func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", g.Name).String()
		})
	changed := make(chan struct{}, 1)
	notify := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, o any) { notify(o) },
		DeleteFunc: notify,
	})
	go informer.Run(ctx.Done())
	go g.loop(ctx, informer, changed)
}

func (g *Gate) loop(ctx context.Context, informer cache.SharedIndexInformer, changed <-chan struct{}) {
	logger := klog.FromContext(ctx).WithValues("crd", g.Name)
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return
	}
	const unknown = "\x00"
	current := unknown
	var r runner
	defer r.halt()
	for {
		var crd *apiextensionsv1.CustomResourceDefinition
		if obj, ok, _ := informer.GetStore().GetByKey(g.Name); ok {
			crd, _ = obj.(*apiextensionsv1.CustomResourceDefinition)
		}
		if want := ServedVersion(crd, g.Versions); want != current {
			r.halt()
			if want != "" {
				logger.Info("CustomResourceDefinition is served, starting", "version", want)
				r.start(ctx, func(ctx context.Context) { g.Run(ctx, want) })
			} else {
				if current != unknown {
					logger.Info("CustomResourceDefinition is no longer served, stopped")
				} else {
					logger.Info("CustomResourceDefinition is not served; waiting for it")
				}
				if g.Absent != nil {
					g.Absent()
				}
			}
			current = want
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-time.After(time.Minute):
			// Events are coalesced; a periodic look costs nothing and
			// guards against a missed notification.
		}
	}
}

// runner runs one function at a time and stops it synchronously.
type runner struct {
	cancel context.CancelFunc
	done   sync.WaitGroup
}

func (r *runner) start(ctx context.Context, f func(context.Context)) {
	ctx, r.cancel = context.WithCancel(ctx)
	r.done.Add(1)
	go func() {
		defer r.done.Done()
		f(ctx)
	}()
}

func (r *runner) halt() {
	if r.cancel != nil {
		r.cancel()
		r.done.Wait()
		r.cancel = nil
	}
}
