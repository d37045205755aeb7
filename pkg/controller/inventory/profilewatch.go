package inventory

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	inventoryv1alpha1 "k8s.io/multiclusterservices/apis/inventory/v1alpha1"
	"k8s.io/multiclusterservices/crdgate"
)

// watchProfiles starts the ClusterProfile caches once the hub has said
// which version it serves (asked again until it answers: a hub down at
// start-up delays only its profiles' members).
func (inv *Inventory) watchProfiles(ctx context.Context, enqueueSynced func(string, cache.SharedIndexInformer)) {
	err := wait.PollUntilContextCancel(ctx, 5*time.Second, true, func(context.Context) (bool, error) {
		if _, err := inv.discoverProfiles(); err != nil {
			inv.logger.Error(err, "Cannot tell which ClusterProfile version the hub serves; asking again")
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return
	}
	informer, _ := inv.profileCaches()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			inv.queue.Add(profilePrefix + key)
		}
	}
	_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(old, cur any) {
			// The controller's own condition write comes back as an
			// update: only a change of what the cluster manager
			// owns (spec, labels, its conditions, properties,
			// access providers) is work.
			if !onlyOurCondition(old, cur) {
				enqueue(cur)
			}
		},
		DeleteFunc: enqueue,
	})
	enqueueSynced(profilePrefix, informer)
}

// discoverProfiles returns the ClusterProfile resource the inventory
// reads, asking the hub which version it serves the first time: the
// newest of inventoryv1alpha1.Versions, v1alpha1 when it serves none
// (its informer then waits for the CRD, and says so in the log).
func (inv *Inventory) discoverProfiles() (schema.GroupVersionResource, error) {
	inv.mu.Lock()
	r := inv.profileResource
	inv.mu.Unlock()
	if !r.Empty() {
		return r, nil
	}
	v, err := crdgate.Discover(inv.cfg.ProfileDiscovery, inventoryv1alpha1.Resource.GroupResource(), inventoryv1alpha1.Versions)
	if err != nil {
		return r, err
	}
	inv.readNamespaceClusterSet()
	r = inventoryv1alpha1.Resource
	if v != "" {
		r = inventoryv1alpha1.ResourceOf(v)
	} else {
		inv.logger.Error(nil, "The hub serves no ClusterProfile version this controller reads; waiting for v1alpha1", "versions", inventoryv1alpha1.Versions)
	}
	inv.logger.Info("Reading the hub's ClusterProfiles", "version", r.Version)
	return inv.setProfileResource(r), nil
}

// readNamespaceClusterSet reads which clusterset the inventory namespace
// says its profiles form (KEP-4322's label on the namespace). A hub that
// does not let the controller read its namespace is logged: the profiles'
// own clusterset.k8s.io properties are still checked against --clusterset.
func (inv *Inventory) readNamespaceClusterSet() {
	if inv.cfg.Hub == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), inv.cfg.ClusterIDTimeout)
	defer cancel()
	ns, err := inv.cfg.Hub.CoreV1().Namespaces().Get(ctx, inv.cfg.ProfileNamespace, metav1.GetOptions{})
	if err != nil {
		inv.logger.Info("Cannot read the inventory namespace's clusterset label", "namespace", inv.cfg.ProfileNamespace, "label", inventoryv1alpha1.LabelClusterSet, "err", err)
		return
	}
	inv.mu.Lock()
	inv.nsClusterSet = ns.Labels[inventoryv1alpha1.LabelClusterSet]
	inv.mu.Unlock()
}

// setProfileResource builds the ClusterProfile caches for r, unless they
// exist (another caller built them first); it returns the resource read.
func (inv *Inventory) setProfileResource(r schema.GroupVersionResource) schema.GroupVersionResource {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if !inv.profileResource.Empty() {
		return inv.profileResource
	}
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(inv.cfg.Profiles, 0, inv.cfg.ProfileNamespace,
		func(o *metav1.ListOptions) { o.LabelSelector = inv.cfg.ProfileSelector.String() })
	gi := f.ForResource(r)
	inv.profileResource, inv.profileInformer, inv.profiles = r, gi.Informer(), gi.Lister()
	return r
}

// profileCaches returns the ClusterProfile informer and lister, nil until
// the hub has said which version it serves.
func (inv *Inventory) profileCaches() (cache.SharedIndexInformer, cache.GenericLister) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	return inv.profileInformer, inv.profiles
}
