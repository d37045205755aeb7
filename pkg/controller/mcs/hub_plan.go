package mcs

import (
	"fmt"
	"maps"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	hubv1alpha1 "k8s.io/multiclusterservices/apis/hub/v1alpha1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/pull"
)

// Pull mode writes each name's plan once into the hub, for every member's
// agent to read: a ServicePlan and the slices to import (pull.PlanSlice).
// hubPlanOf and desiredOfHubPlan are the two ways of that, as pure
// functions; what the agents do with what they read is today's writers'.
// They carry the part of a desired state every member shares: the import,
// its slices, where it is imported, and the cluster selector results of
// every importer (one entry per outcome), and where pod networks do not
// reach each other, the sources' entry points and which members import
// them (PlannedIngress), and every member's export's conditions, one
// entry per outcome. What else differs per member (the ingress Service a
// source makes from its own Service) is not in the plan.

// hubPlanOf is the plan of ns/name that d decides.
func hubPlanOf(ns, name string, d *desiredState) (*hubv1alpha1.ServicePlan, []*discoveryv1.EndpointSlice) {
	sp := &hubv1alpha1.ServicePlan{
		TypeMeta:   metav1.TypeMeta{APIVersion: hubv1alpha1.SchemeGroupVersion.String(), Kind: "ServicePlan"},
		ObjectMeta: metav1.ObjectMeta{Name: pull.PlanName(ns, name), Namespace: pull.PlanNamespace},
		Spec: hubv1alpha1.ServicePlanSpec{
			Service:    hubv1alpha1.ServiceName{Namespace: ns, Name: name},
			ImportedIn: d.ImportedIn,
			Retain:     d.Retain,
			Stale:      d.Stale,
			// Every member's export's, in one write per name.
			ExportConditions: plannedConditions(d.ExportConditions),
		},
	}
	if len(d.IngressMembers) > 0 || len(d.IngressServices) > 0 {
		in := &hubv1alpha1.PlannedIngress{Members: d.IngressMembers, ServiceIn: slices.Sorted(maps.Keys(d.IngressServices))}
		for _, id := range in.ServiceIn {
			in.ServiceType = d.IngressServices[id].Spec.Type
		}
		sp.Spec.Ingress = in
	}
	if d.Import != nil {
		sp.Spec.Import = &hubv1alpha1.PlannedImport{
			Labels:           d.Import.Labels,
			Annotations:      d.Import.Annotations,
			Spec:             d.Import.Spec,
			Clusters:         d.Clusters,
			IPError:          d.IPError,
			ClusterSelectors: d.ClusterSelectors,
			SelectorResults:  plannedOutcomes(d.SelectorResults),
		}
	}
	var planned []*discoveryv1.EndpointSlice
	for _, k := range slices.Sorted(maps.Keys(d.Slices)) {
		planned = append(planned, pull.PlanSlice(d.Slices[k], d.Triggers[k], false))
	}
	for _, k := range slices.Sorted(maps.Keys(d.Ingress)) {
		planned = append(planned, pull.PlanSlice(d.Ingress[k], time.Time{}, true))
	}
	return sp, planned
}

// ingressServiceOf is the ingress Service cluster makes for its export of
// a name, of type typ (export.IngressService of its own Service and
// ServiceExport), nil when it cannot: a member's agent makes its own.
type ingressServiceOf func(cluster string, typ v1.ServiceType) *v1.Service

// desiredOfHubPlan is the desired state a member's agent reads from sp and
// its slices, to be written by managedBy, with the ingress Services
// ingress makes where the plan asks for them.
func desiredOfHubPlan(sp *hubv1alpha1.ServicePlan, planned []*discoveryv1.EndpointSlice, managedBy string, ingress ingressServiceOf) (*desiredState, error) {
	ns, name := sp.Spec.Service.Namespace, sp.Spec.Service.Name
	d := &desiredState{ImportedIn: sp.Spec.ImportedIn, Retain: sp.Spec.Retain, Stale: sp.Spec.Stale, ExportConditions: exportConditionsOf(sp.Spec.ExportConditions)}
	if in := sp.Spec.Ingress; in != nil {
		d.IngressMembers = in.Members
		for _, id := range in.ServiceIn {
			if svc := ingress(id, in.ServiceType); svc != nil {
				if d.IngressServices == nil {
					d.IngressServices = map[string]*v1.Service{}
				}
				d.IngressServices[id] = svc
			}
		}
	}
	if in := sp.Spec.Import; in != nil {
		d.Import = &mcsv1beta1.ServiceImport{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: maps.Clone(in.Labels), Annotations: maps.Clone(in.Annotations)},
			Spec:       in.Spec,
		}
		d.Clusters, d.IPError, d.ClusterSelectors = in.Clusters, in.IPError, in.ClusterSelectors
		for _, o := range in.SelectorResults {
			if d.SelectorResults == nil {
				d.SelectorResults = map[string]selectorOutcome{}
			}
			for _, id := range o.Importers {
				d.SelectorResults[id] = selectorOutcome{Results: o.Results, Failed: o.Failed}
			}
		}
		d.Slices = map[string]*discoveryv1.EndpointSlice{}
	}
	for _, ps := range planned {
		if d.Slices == nil {
			return nil, fmt.Errorf("the plan of %s/%s has slices and no import", ns, name)
		}
		is, trigger, err := pull.SliceOfPlan(ps, managedBy)
		if err != nil {
			return nil, err
		}
		if is.Namespace != ns || is.Labels[mcsv1beta1.LabelServiceName] != name {
			return nil, fmt.Errorf("the plan's EndpointSlice %s is of %s/%s, not of %s/%s", ps.Name, is.Namespace, is.Labels[mcsv1beta1.LabelServiceName], ns, name)
		}
		if pull.IsEntryPoints(ps) {
			if d.Ingress == nil {
				d.Ingress = map[string]*discoveryv1.EndpointSlice{}
			}
			d.Ingress[is.Name] = is
			continue
		}
		d.Slices[is.Name] = is
		if !trigger.IsZero() {
			if d.Triggers == nil {
				d.Triggers = map[string]time.Time{}
			}
			d.Triggers[is.Name] = trigger
		}
	}
	return d, nil
}

// plannedOutcomes are the selector outcomes of the importers, one entry
// per outcome with the importers that get it, ordered by their first
// importer: most importers share an outcome (results differ only by the
// importer's properties the selectors name), so the plan holds each
// source list once per outcome rather than once per member.
func plannedOutcomes(byImporter map[string]selectorOutcome) []hubv1alpha1.PlannedSelectorOutcome {
	var out []hubv1alpha1.PlannedSelectorOutcome
	index := map[string]int{}
	for _, id := range slices.Sorted(maps.Keys(byImporter)) {
		o := byImporter[id]
		key := o.Failed + "\x00" + fmt.Sprint(o.Results)
		if i, ok := index[key]; ok {
			out[i].Importers = append(out[i].Importers, id)
			continue
		}
		index[key] = len(out)
		out = append(out, hubv1alpha1.PlannedSelectorOutcome{Importers: []string{id}, Results: o.Results, Failed: o.Failed})
	}
	return out
}

// plannedConditions are the export conditions of each member, by
// cluster ID, one entry per outcome with its members (sorted, the entries
// ordered by their first member): most exports of a name share theirs,
// so the plan holds them once rather than once per member. Transition
// times and generations are the members' own (writeExportStatus).
func plannedConditions(byCluster map[string][]metav1.Condition) []hubv1alpha1.PlannedExportConditions {
	var out []hubv1alpha1.PlannedExportConditions
	index := map[string]int{}
	for _, id := range slices.Sorted(maps.Keys(byCluster)) {
		var conds []hubv1alpha1.PlannedCondition
		for _, c := range byCluster[id] {
			conds = append(conds, hubv1alpha1.PlannedCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message})
		}
		key := fmt.Sprint(conds)
		if i, ok := index[key]; ok {
			out[i].Clusters = append(out[i].Clusters, id)
			continue
		}
		index[key] = len(out)
		out = append(out, hubv1alpha1.PlannedExportConditions{Clusters: []string{id}, Conditions: conds})
	}
	return out
}

// exportConditionsOf reads planned back: the conditions of each member's
// export, by cluster ID.
func exportConditionsOf(planned []hubv1alpha1.PlannedExportConditions) map[string][]metav1.Condition {
	if len(planned) == 0 {
		return nil
	}
	out := map[string][]metav1.Condition{}
	for _, o := range planned {
		var conds []metav1.Condition
		for _, c := range o.Conditions {
			conds = append(conds, metav1.Condition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message})
		}
		for _, id := range o.Clusters {
			out[id] = conds
		}
	}
	return out
}
