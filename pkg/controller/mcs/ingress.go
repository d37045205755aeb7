package mcs

import (
	"context"
	"fmt"
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/multiclusterservices/export"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Members reached through their ingress (Config.IngressMembers) have pod
// networks the others cannot route to: private, or overlapping another
// member's. Traffic between such a member and any other goes through the
// exporting cluster's ingress, a NodePort or LoadBalancer Service: the
// slices a member gets for a source cluster whose pods it cannot reach
// carry that cluster's entry points (export.IngressSlices) instead of its
// pods. The exporting cluster itself, and flat members among themselves,
// keep pod IPs.

// ConditionIngressReady is a ServiceExport condition of this controller's,
// present where some other member cannot reach the exporting cluster's
// pods: whether they reach the export through its ingress, and why not.
const ConditionIngressReady = "IngressReady"

// ingressMembers are those of members (cluster IDs) reached only through
// their ingress (Config.IngressMembers), sorted; nil when none is. A plan
// carries them (desiredState.IngressMembers), so that whoever writes it,
// push mode's controller or a member's agent, decides reach the same way.
func ingressMembers(cfg *Config, members []string) []string {
	var out []string
	for _, id := range members {
		if cfg.IngressMembers[id] {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// reaches tells whether the nodes of member consumer can reach the pods of
// source cluster source, ingress being the members reached only through
// their ingress.
func reaches(ingress []string, consumer, source string) bool {
	return consumer == source || !slices.Contains(ingress, consumer) && !slices.Contains(ingress, source)
}

// needsIngress tells whether any of members (cluster IDs) other than
// source cannot reach source's pods.
func needsIngress(ingress []string, source string, members []string) bool {
	return slices.ContainsFunc(members, func(id string) bool { return !reaches(ingress, id, source) })
}

// ingressType is the type of the ingress Services the controller creates.
func ingressType(cfg *Config) v1.ServiceType {
	if cfg.IngressServiceType == "" {
		return v1.ServiceTypeNodePort
	}
	return cfg.IngressServiceType
}

// planIngress works out, for the planner, how the members that cannot
// reach e's pods reach its export: the ingress Service to create in e's
// cluster m (d.IngressServices), the entry-point slices (d.Ingress) and
// the export's IngressReady condition. own are the slices of e's pods,
// whose readiness the entry points take.
func planIngress(cfg *Config, m *memberSnapshot, e export.Export, r export.Result, own []*discoveryv1.EndpointSlice, d *desiredState) {
	ns, name := e.Service.Namespace, e.Service.Name
	cond := metav1.Condition{Type: ConditionIngressReady, Status: metav1.ConditionFalse}
	defer func() {
		d.ExportConditions[e.Cluster] = append(d.ExportConditions[e.Cluster], cond)
	}()
	if r.Spec.Type == mcsv1beta1.Headless {
		cond.Reason = export.IngressReasonHeadless
		cond.Message = "a headless export is answered by DNS with pod IPs, which clusters that cannot reach this cluster's pods cannot use: they get none of its endpoints"
		return
	}
	ingress := e.Service
	if !export.IsIngress(e.Service) {
		if len(e.Service.Spec.Selector) == 0 {
			cond.Reason = export.IngressReasonNoSelector
			cond.Message = fmt.Sprintf("Service %s selects no pods, so no %s Service can stand in front of its endpoints; make it a NodePort or LoadBalancer Service to serve the clusters that cannot reach this one's pods", name, ingressType(cfg))
			return
		}
		if d.IngressServices == nil {
			d.IngressServices = map[string]*v1.Service{}
		}
		d.IngressServices[e.Cluster] = export.IngressService(e.Service, e.ServiceExport, ingressType(cfg), cfg.ManagedBy)
		have := m.IngressService
		switch {
		case have == nil:
			cond.Reason, cond.Message = export.IngressReasonPending, fmt.Sprintf("the %s Service %s is being created", ingressType(cfg), export.IngressName(ns, name))
			return
		case have.Labels[managedLabel] != cfg.ManagedBy:
			delete(d.IngressServices, e.Cluster)
			cond.Reason, cond.Message = "IngressNameTaken", fmt.Sprintf("a Service %s that %s did not create exists: it is not used as the ingress", have.Name, cfg.ManagedBy)
			return
		}
		ingress = have
	}
	out, st := export.IngressSlices(ingress, m.EntryPoints, name, e.Cluster, cfg.ManagedBy, r.ServedPorts[e.Cluster], export.ReadyEndpoints(own) > 0)
	cond.Reason, cond.Message = st.Reason, st.Message
	if st.Serving {
		cond.Status = metav1.ConditionTrue
	}
	if d.Ingress == nil {
		d.Ingress = map[string]*discoveryv1.EndpointSlice{}
	}
	for _, s := range out {
		d.Ingress[s.Name] = s
	}
}

// writeIngressService makes the ingress Service of m's export of ns/name
// what d says: created or updated where m's pods are out of other
// members' reach, deleted where they no longer are. Only a Service this
// controller created is ever changed; it is also owned by the export, so
// that it goes with it.
func (w writes) writeIngressService(ctx context.Context, ns, name string, d *desiredState) error {
	m := w.m
	want := d.IngressServices[m.id]
	have, err := m.services.Services(ns).Get(export.IngressName(ns, name))
	exists := err == nil
	api := m.kube.CoreV1().Services(ns)
	switch {
	case want == nil:
		if exists && w.wrote(have) && have.Labels[export.LabelIngressFor] == name {
			return deleteOwnService(ctx, m, have)
		}
	case !exists:
		if _, err := api.Create(ctx, want, metav1.CreateOptions{FieldManager: fieldManager}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating ingress Service %s/%s in %s: %w", ns, want.Name, m.id, err)
		}
	case w.wrote(have) && (export.IngressDiffers(have, want) || !slices.Equal(ownerUIDs(have), ownerUIDs(want))):
		if _, err := api.Update(ctx, export.UpdateIngress(have, want), metav1.UpdateOptions{FieldManager: fieldManager}); err != nil {
			return fmt.Errorf("updating ingress Service %s/%s in %s: %w", ns, want.Name, m.id, err)
		}
	}
	return nil
}

func ownerUIDs(o metav1.Object) []string {
	var out []string
	for _, r := range o.GetOwnerReferences() {
		out = append(out, string(r.UID))
	}
	return out
}

// nodeReadyChanged tells whether a node update changes whether the node
// is an entry point of its cluster's ingresses.
func nodeReadyChanged(o, n *v1.Node) bool {
	return export.IsEntryPoint(o) != export.IsEntryPoint(n)
}

// memberView returns the imported slices of d as member m gets them,
// sorted by name: the slices of the source clusters whose pods m reaches
// (remote node names cleared), and the entry points of the others.
func (w writes) memberView(d *desiredState) []*discoveryv1.EndpointSlice {
	m := w.m
	out := make([]*discoveryv1.EndpointSlice, 0, len(d.Slices))
	for _, name := range slices.Sorted(maps.Keys(d.Slices)) {
		if !reaches(d.IngressMembers, m.id, d.Slices[name].Labels[mcsv1beta1.LabelSourceCluster]) {
			continue
		}
		s := d.Slices[name].DeepCopy()
		export.ForMember(s, m.id)
		out = append(out, s)
	}
	for _, name := range slices.Sorted(maps.Keys(d.Ingress)) {
		if reaches(d.IngressMembers, m.id, d.Ingress[name].Labels[mcsv1beta1.LabelSourceCluster]) {
			continue
		}
		out = append(out, d.Ingress[name].DeepCopy())
	}
	return out
}
