package multicluster

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	"k8s.io/multiclusterservices/crdgate"
)

// ClusterPropertyCRDName is the CRD of KEP-2149's ClusterProperty, which
// holds the cluster's ID (cluster.clusterset.k8s.io).
const ClusterPropertyCRDName = "clusterproperties." + aboutv1alpha1.GroupName

// clusterIDWait bounds how long the first programming of imports waits for
// the cluster ID. It is one list away when the API is readable; a longer
// wait only happens when kube-proxy may not read it (RBAC), and then local
// Services must not wait for it.
const clusterIDWait = 5 * time.Second

// clusterID follows the cluster's ID into the Proxier: while it is known,
// the endpoints of this cluster's own exports keep their node names.
type clusterID struct {
	w *Watcher
	// settled is closed once the ID is known to be set or unset.
	settled     chan struct{}
	settledOnce sync.Once
}

func (c *clusterID) settle() { c.settledOnce.Do(func() { close(c.settled) }) }

// wait returns once the cluster ID is settled, clusterIDWait has passed
// (logged: node-local endpoints of this cluster's exports are then treated
// as remote until it is read), or ctx is done.
func (c *clusterID) wait(ctx context.Context) {
	select {
	case <-c.settled:
	case <-ctx.Done():
	case <-time.After(clusterIDWait):
		klog.FromContext(ctx).Error(nil, "The cluster ID could not be read in time; this cluster's own endpoints of imports are treated as remote (no node-local endpoints) until it is",
			"crd", ClusterPropertyCRDName, "clusterProperty", aboutv1alpha1.ClusterIDProperty)
	}
}

func (c *clusterID) start(ctx context.Context) {
	if c.w.DynamicClient == nil {
		c.settle()
		return
	}
	gate := &crdgate.Gate{
		Name:     ClusterPropertyCRDName,
		Versions: aboutv1alpha1.Versions,
		Run:      c.run,
		Absent: func() {
			c.set("")
			c.settle()
		},
	}
	gate.Start(ctx, c.w.CRDClient)
}

func (c *clusterID) set(id string) {
	c.w.Proxier.SetLocalClusterID(id)
	if id == "" {
		localClusterIDKnown.Set(0)
	} else {
		localClusterIDKnown.Set(1)
	}
}

// run watches the one ClusterProperty that names the cluster.
func (c *clusterID) run(ctx context.Context, version string) {
	logger := klog.FromContext(ctx).WithName("multicluster")
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(c.w.DynamicClient, c.w.ResyncPeriod, metav1.NamespaceAll,
		func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", aboutv1alpha1.ClusterIDProperty).String()
		})
	informer := factory.ForResource(aboutv1alpha1.ResourceOf(version)).Informer()
	// The ID as the mcs-controller reads it: one the controller refuses
	// names no cluster here either.
	value := func(obj any) string {
		u, _ := obj.(*unstructured.Unstructured)
		id, err := aboutv1alpha1.ClusterIDOf(u)
		if err != nil {
			logger.Error(err, "This cluster's ClusterProperty cannot name it; its own endpoints of imports are treated as remote")
			return ""
		}
		return id
	}
	registration, _ := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.set(value(obj)) },
		UpdateFunc: func(_, obj any) { c.set(value(obj)) },
		DeleteFunc: func(any) { c.set("") },
	})
	factory.Start(ctx.Done())
	if cache.WaitForCacheSync(ctx.Done(), registration.HasSynced) {
		if len(informer.GetStore().List()) == 0 {
			logger.Info("No ClusterProperty names this cluster; this cluster's own endpoints of imports are treated as remote", "clusterProperty", aboutv1alpha1.ClusterIDProperty)
		}
		c.settle()
	}
	<-ctx.Done()
	factory.Shutdown()
	c.set("")
}
