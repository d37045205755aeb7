package mcs

import (
	"context"
	"errors"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	hubv1alpha1 "k8s.io/multiclusterservices/apis/hub/v1alpha1"
	"k8s.io/multiclusterservices/export"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/pull"
)

// HubPlanSource makes a controller the writing half of a member's agent
// in pull mode: its one member is the agent's own cluster, and the
// desired state of each name is what the hub's planner wrote (a
// ServicePlan and its slices, read with the agent's plan-reader
// identity), not a merge of exports. Everything downstream (the member's
// writer, its import, slices, Services and status) is push mode's.
type HubPlanSource struct {
	// Hub and HubDynamic read the plan namespace of the hub.
	Hub        kubernetes.Interface
	HubDynamic dynamic.Interface
	// Resync is how often the plan's informers resync (0: never).
	Resync time.Duration
}

// hubPlanModel is the desiredSource of a member agent: the hub's plan. A
// hub that cannot be reached changes nothing: the informers keep the
// last plan they saw, and the member keeps what it holds.
type hubPlanModel struct {
	c          *Controller
	factories  []interface{ Start(<-chan struct{}) }
	plans      cache.SharedIndexInformer
	planSlices cache.SharedIndexInformer
	member     string
}

func newHubPlanModel(c *Controller, src HubPlanSource) (*hubPlanModel, error) {
	s := &hubPlanModel{c: c, member: c.members.all()[0].id}
	typed := informers.NewSharedInformerFactoryWithOptions(src.Hub, src.Resync, informers.WithNamespace(pull.PlanNamespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = labels.SelectorFromSet(labels.Set{discoveryv1.LabelManagedBy: pull.PlannerManager}).String()
		}))
	dyn := dynamicinformer.NewFilteredDynamicSharedInformerFactory(src.HubDynamic, src.Resync, pull.PlanNamespace, nil)
	s.factories = []interface{ Start(<-chan struct{}) }{typed, dyn}
	s.planSlices = typed.Discovery().V1().EndpointSlices().Informer()
	s.plans = dyn.ForResource(hubServicePlans).Informer()
	if err := s.plans.SetTransform(typedFrom(func() runtime.Object { return &hubv1alpha1.ServicePlan{} })); err != nil {
		return nil, err
	}
	if err := s.plans.AddIndexers(cache.Indexers{byPlannedService: func(obj any) ([]string, error) {
		if sp, ok := obj.(*hubv1alpha1.ServicePlan); ok {
			return []string{sp.Spec.Service.Namespace + "/" + sp.Spec.Service.Name}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, err
	}
	if err := s.planSlices.AddIndexers(cache.Indexers{byPlannedService: func(obj any) ([]string, error) {
		o, ok := obj.(metav1.Object)
		if !ok {
			return nil, nil
		}
		ns, name := o.GetLabels()[hubv1alpha1.LabelServiceNamespace], o.GetLabels()[hubv1alpha1.LabelServiceName]
		if ns == "" || name == "" {
			return nil, nil
		}
		return []string{ns + "/" + name}, nil
	}}); err != nil {
		return nil, err
	}
	enqueue := func(obj any) {
		switch o := pull.ObjectOf[metav1.Object](obj).(type) {
		case *hubv1alpha1.ServicePlan:
			c.queue.Add(o.Spec.Service.Namespace + "/" + o.Spec.Service.Name)
		case *discoveryv1.EndpointSlice:
			ns, name := o.Labels[hubv1alpha1.LabelServiceNamespace], o.Labels[hubv1alpha1.LabelServiceName]
			if ns != "" && name != "" {
				c.queue.Add(ns + "/" + name)
			}
		}
	}
	for _, inf := range []cache.SharedIndexInformer{s.plans, s.planSlices} {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue,
		}); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// start waits for the plan: until it is read, nothing is written (an
// empty cache would read as "nothing planned" and remove every import).
func (s *hubPlanModel) start(ctx context.Context, _ func(func(context.Context))) error {
	for _, f := range s.factories {
		f.Start(ctx.Done())
	}
	if !cache.WaitForNamedCacheSync("hub-plan", ctx.Done(), s.plans.HasSynced, s.planSlices.HasSynced) {
		return errors.New("the hub's plan was not read: stopping")
	}
	for _, obj := range s.plans.GetStore().List() {
		if sp, ok := obj.(*hubv1alpha1.ServicePlan); ok {
			s.c.queue.Add(sp.Spec.Service.Namespace + "/" + sp.Spec.Service.Name)
		}
	}
	return nil
}

// plan reads key's plan from the hub into the desired state, and has the
// member write it. A plan that cannot be read back changes nothing.
func (s *hubPlanModel) plan(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	members, membership := s.c.members.at()
	d := &desiredState{}
	if sp := s.planOf(ns, name); sp != nil {
		digest := ""
		if sp.Spec.GlobalService != "" {
			digest = pull.GlobalServiceDigest(sp.Spec.GlobalService)
		}
		var planned []*discoveryv1.EndpointSlice
		for _, ps := range indexed[*discoveryv1.EndpointSlice](s.planSlices.GetIndexer(), byPlannedService, key) {
			if ps.Labels[hubv1alpha1.LabelGlobalService] == digest {
				planned = append(planned, ps)
			}
		}
		if d, err = desiredOfHubPlan(sp, planned, s.c.cfg.ManagedBy, s.ingressService(members[0], ns, name)); err != nil {
			s.c.logger.Error(err, "The hub's plan cannot be read; what this cluster holds of it stays as it is", "key", key)
			return nil
		}
		if digest != "" {
			// The catalog's variant of this member, as push mode's
			// catalog model gives it.
			d = &desiredState{Variants: map[string]*desiredState{s.member: {Import: d.Import, Clusters: d.Clusters, IPError: d.IPError, Slices: d.Slices}}}
		}
	}
	// The conditions of this member's own export only.
	if conds, ok := d.ExportConditions[s.member]; ok {
		d.ExportConditions = map[string][]metav1.Condition{s.member: conds}
	} else {
		d.ExportConditions = nil
	}
	d.Membership = membership
	s.c.mu.Lock()
	s.c.desired[key] = d
	s.c.mu.Unlock()
	s.c.enqueueMembers(key)
	return nil
}

// planOf is the plan of ns/name the hub holds for this member, nil when
// none: the catalog's plan placing a global service here under the name,
// else the exports' plan of the name.
func (s *hubPlanModel) planOf(ns, name string) *hubv1alpha1.ServicePlan {
	for _, sp := range indexed[*hubv1alpha1.ServicePlan](s.plans.GetIndexer(), byPlannedService, ns+"/"+name) {
		if sp.Spec.GlobalService != "" && slices.Contains(sp.Spec.ImportedIn, s.member) {
			return sp
		}
	}
	obj, ok, _ := s.plans.GetStore().GetByKey(pull.PlanNamespace + "/" + pull.PlanName(ns, name))
	if !ok {
		return nil
	}
	sp, isPlan := obj.(*hubv1alpha1.ServicePlan)
	if !isPlan || sp.Spec.Service.Namespace != ns || sp.Spec.Service.Name != name {
		return nil
	}
	return sp
}

// ingressService makes, where the plan asks this member for an ingress
// Service of ns/name, the one its own Service and ServiceExport call for,
// as push mode's planIngress makes it (which decides, in the planner,
// whether there is to be one): none while the member has either not.
func (s *hubPlanModel) ingressService(m *member, ns, name string) ingressServiceOf {
	return func(cluster string, typ v1.ServiceType) *v1.Service {
		if cluster != s.member {
			return nil
		}
		svc, err := m.services.Services(ns).Get(name)
		if err != nil || svc.DeletionTimestamp != nil {
			return nil
		}
		se, err := m.exports.ServiceExports(ns).Get(name)
		if err != nil || se.DeletionTimestamp != nil {
			return nil
		}
		return export.IngressService(svc, se, typ, s.c.cfg.ManagedBy)
	}
}

// readsService: the plan decides, but where it asks this member for an
// ingress Service, that Service follows the member's own exported one.
func (s *hubPlanModel) readsService(m *member, key string) bool {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil || m.id != s.member {
		return false
	}
	sp := s.planOf(ns, name)
	return sp != nil && sp.Spec.Ingress != nil && slices.Contains(sp.Spec.Ingress.ServiceIn, s.member)
}

// The plan decides: no slice of the member plans anything again.
func (*hubPlanModel) readsSlicesOf(*member, string) bool        { return false }
func (*hubPlanModel) importChanged(*mcsv1beta1.ServiceImport)   {}
func (*hubPlanModel) ipKey(si *mcsv1beta1.ServiceImport) string { return si.Namespace + "/" + si.Name }
