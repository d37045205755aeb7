package mcs

import (
	"slices"

	networkingv1 "k8s.io/api/networking/v1"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/multiclusterservices/export"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Informer event handlers route changes to the queues: to the clusterset
// queue when the change may alter what a name should be (exports, their
// Services and slices, namespaces, nodes), to a member's queue when only
// what that member holds must be put right. They decide nothing else.

func (c *Controller) addHandlers(m *member) {
	merge := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	write := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			m.queue.Add(key)
		}
	}
	on := func(f func(any)) cache.ResourceEventHandlerFuncs {
		return cache.ResourceEventHandlerFuncs{AddFunc: f, UpdateFunc: func(_, o any) { f(o) }, DeleteFunc: f}
	}
	handle := func(i cache.SharedIndexInformer, h cache.ResourceEventHandler) {
		_, _ = i.AddEventHandler(h)
	}
	f := m.inf
	// Exports and their Services change what the clusterset imports. Our
	// own status writes on exports change nothing the merge reads.
	handle(f.exports, cache.ResourceEventHandlerFuncs{
		AddFunc:    merge,
		DeleteFunc: merge,
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*mcsv1beta1.ServiceExport)
			n, ok2 := cur.(*mcsv1beta1.ServiceExport)
			if ok1 && ok2 && (o.DeletionTimestamp == nil) == (n.DeletionTimestamp == nil) && apiequality.Semantic.DeepEqual(o.Spec, n.Spec) {
				return
			}
			merge(cur)
		},
	})
	handle(f.services, on(func(obj any) {
		// A derived or native-names Service is put right if anyone else
		// changes it.
		if key, ok := ownServiceKey(c.cfg.ManagedBy, obj, mcsv1beta1.LabelServiceName); ok {
			m.queue.Add(key)
		}
		// An ingress Service's node ports, load-balancer addresses and
		// spec are the entry points other members get: merged again.
		if key, ok := ownServiceKey(c.cfg.ManagedBy, obj, export.LabelIngressFor); ok {
			c.queue.Add(key)
		}
		// Only Services the source of the desired state reads matter.
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil && c.source.readsService(m, key) {
			c.queue.Add(key)
		}
	}))
	handle(f.localSlices, on(func(obj any) {
		if s := eventObject[*discoveryv1.EndpointSlice](obj); s != nil {
			if key := s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName]; c.source.readsSlicesOf(m, key) {
				c.queue.Add(key)
			}
		}
	}))
	// What this controller wrote is put right if anyone else changes it;
	// an import someone else wrote reserves its IPs (its member's worker
	// records it: foreign.go).
	placed := func(obj any) {
		if si := eventObject[*mcsv1beta1.ServiceImport](obj); si != nil {
			c.source.importChanged(si)
		}
	}
	handle(f.imports, cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { write(obj); placed(obj) },
		UpdateFunc: func(_, cur any) { write(cur); placed(cur) },
		DeleteFunc: func(obj any) { write(obj); placed(obj) },
	})
	wrote := func(obj any) {
		if s := eventObject[*writtenSlice](obj); s != nil {
			m.state.cacheBehind(s.Namespace()+"/"+s.name, s)
			m.queue.Add(s.Namespace() + "/" + s.importName())
		}
	}
	handle(f.importedSlices, cache.ResourceEventHandlerFuncs{
		AddFunc:    wrote,
		UpdateFunc: func(_, cur any) { wrote(cur) },
		DeleteFunc: func(obj any) {
			if s := eventObject[*writtenSlice](obj); s != nil {
				m.state.forgetSlice(s.Namespace() + "/" + s.name)
				m.queue.Add(s.Namespace() + "/" + s.importName())
			}
		},
	})
	// A namespace appearing or going changes where a name is imported.
	handle(f.namespaces, on(func(obj any) {
		ns := namespaceName(obj)
		for _, k := range c.keysInNamespace(ns) {
			c.queue.Add(k)
		}
	}))
	// Where a member's pods can be bounds the addresses it may publish.
	handle(f.nodes, cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(_ any, initialList bool) {
			if !initialList {
				c.enqueueAll()
			}
		},
		DeleteFunc: func(any) { c.enqueueAll() },
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*v1.Node)
			n, ok2 := cur.(*v1.Node)
			if ok1 && ok2 && slices.Equal(o.Spec.PodCIDRs, n.Spec.PodCIDRs) && apiequality.Semantic.DeepEqual(o.Status.Addresses, n.Status.Addresses) {
				// A node's readiness makes it an entry point of its
				// cluster's ingresses, or not.
				ids := memberIDs(c.members.all())
				if nodeReadyChanged(o, n) && needsIngress(ingressMembers(&c.cfg, ids), m.id, ids) {
					for _, k := range m.exportKeys() {
						c.queue.Add(k)
					}
				}
				return
			}
			c.enqueueAll()
		},
	})
	// A member's Service ranges decide the IP families its imports can
	// serve, and whether their clusterset IPs are safe there.
	handle(f.serviceCIDRs, on(func(obj any) {
		c.reservations.serviceCIDRChanged(m, eventObject[*networkingv1.ServiceCIDR](obj))
		for _, k := range c.desiredKeys() {
			m.queue.Add(k)
		}
	}))
}

func (c *Controller) isExportedSomewhere(key string) bool {
	c.mu.RLock()
	_, ok := c.desired[key]
	c.mu.RUnlock()
	if ok {
		return true
	}
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	for _, m := range c.members.all() {
		if _, err := m.exports.ServiceExports(ns).Get(name); err == nil {
			return true
		}
	}
	return false
}

func (c *Controller) keysInNamespace(ns string) []string {
	var out []string
	for _, k := range c.desiredKeys() {
		if n, _, _ := cache.SplitMetaNamespaceKey(k); n == ns {
			out = append(out, k)
		}
	}
	for _, m := range c.members.all() {
		exports, _ := m.exports.ServiceExports(ns).List(labels.Everything())
		for _, se := range exports {
			out = append(out, se.Namespace+"/"+se.Name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func namespaceName(obj any) string {
	if ns := eventObject[*v1.Namespace](obj); ns != nil {
		return ns.Name
	}
	return ""
}
