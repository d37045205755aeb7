package kubectlmcs

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	hubv1alpha1 "k8s.io/multiclusterservices/apis/hub/v1alpha1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/pull"
)

// PullMember is what pull mode's hub says of one member: whether its
// agent publishes, when it last renewed its Lease and whether that is
// within the planner's endpoint TTL, how many names it exports and in
// how many planned names it is an importer.
type PullMember struct {
	Cluster string `json:"cluster"`
	// Published says that its agent published its MemberCluster (the
	// planner knows nothing of it before).
	Published bool `json:"published"`
	// Renewed is when its agent last renewed its Lease, nil when never.
	Renewed *metav1.Time `json:"renewed,omitempty"`
	Alive   bool         `json:"alive"`
	Exports int          `json:"exports"`
	// Imports are the names planned whose importers include it.
	Imports int `json:"imports"`
}

// pullMembers is the members of pull mode's hub, by cluster ID, as the
// planner reads them: the namespaces labelled with their own name, their
// MemberCluster, Lease and MemberExports, and the plan.
func pullMembers(namespaces []v1.Namespace, published map[string]bool, leases map[string]*coordinationv1.Lease, exports map[string]int, plans []hubv1alpha1.ServicePlan, ttl time.Duration, now time.Time) []PullMember {
	var out []PullMember
	for _, ns := range namespaces {
		if !isMemberNamespace(ns) {
			continue
		}
		m := PullMember{Cluster: ns.Name, Published: published[ns.Name], Exports: exports[ns.Name]}
		if l := leases[ns.Name]; l != nil && l.Spec.RenewTime != nil {
			m.Renewed = &metav1.Time{Time: l.Spec.RenewTime.Time}
			m.Alive = pull.AgentLeaseAlive(l, ttl, now)
		}
		for _, p := range plans {
			if p.Spec.Import != nil && slices.Contains(p.Spec.ImportedIn, ns.Name) {
				m.Imports++
			}
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b PullMember) int {
		if a.Cluster < b.Cluster {
			return -1
		}
		if a.Cluster > b.Cluster {
			return 1
		}
		return 0
	})
	return out
}

// gatherPullMembers reads the hub.
func gatherPullMembers(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface, ttl time.Duration) ([]PullMember, error) {
	namespaces, leases, err := agentLeases(ctx, kube)
	if err != nil {
		return nil, err
	}
	published, exports := map[string]bool{}, map[string]int{}
	mcs, err := dyn.Resource(hubv1alpha1.SchemeGroupVersion.WithResource("memberclusters")).Namespace("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("MemberClusters (is this pull mode's hub? deploy/hub-pull): %w", err)
	}
	for _, u := range mcs.Items {
		published[u.GetNamespace()] = u.GetName() == hubv1alpha1.MemberClusterName
	}
	mes, err := dyn.Resource(hubv1alpha1.SchemeGroupVersion.WithResource("memberexports")).Namespace("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, u := range mes.Items {
		exports[u.GetNamespace()]++
	}
	planList, err := dyn.Resource(hubv1alpha1.SchemeGroupVersion.WithResource("serviceplans")).Namespace(pull.PlanNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var plans []hubv1alpha1.ServicePlan
	for _, u := range planList.Items {
		var sp hubv1alpha1.ServicePlan
		if err := fromUnstructured(u, &sp); err == nil {
			plans = append(plans, sp)
		}
	}
	return pullMembers(namespaces, published, leases, exports, plans, ttl, time.Now()), nil
}

func fromUnstructured(u unstructured.Unstructured, out any) error {
	raw, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, out)
}

// printPullMembers writes members as a table.
func printPullMembers(w io.Writer, members []PullMember, now time.Time, noHeaders bool) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	if !noHeaders {
		fmt.Fprintln(tw, "CLUSTER\tAGENT\tLEASE RENEWED\tEXPORTS\tIMPORTS")
	}
	for _, m := range members {
		agent := "publishing"
		if !m.Published {
			agent = "none"
		}
		renewed := "never"
		if m.Renewed != nil {
			renewed = duration.HumanDuration(now.Sub(m.Renewed.Time)) + " ago"
			if !m.Alive {
				renewed += " (expired)"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\n", m.Cluster, agent, renewed, m.Exports, m.Imports)
	}
	return tw.Flush()
}

// isMemberNamespace says whether ns is a member's namespace of the hub:
// labelled with its own name, as the planner reads them.
func isMemberNamespace(ns v1.Namespace) bool { return ns.Labels[pull.LabelMemberCluster] == ns.Name }

// agentLeases reads the hub's namespaces labelled as a member's and the
// agent's Lease in each, by namespace.
func agentLeases(ctx context.Context, kube kubernetes.Interface) ([]v1.Namespace, map[string]*coordinationv1.Lease, error) {
	nsList, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: pull.LabelMemberCluster})
	if err != nil {
		return nil, nil, err
	}
	leases := map[string]*coordinationv1.Lease{}
	for _, ns := range nsList.Items {
		if l, err := kube.CoordinationV1().Leases(ns.Name).Get(ctx, pull.AgentLeaseName, metav1.GetOptions{}); err == nil {
			leases[ns.Name] = l
		}
	}
	return nsList.Items, leases, nil
}

// gatherHubLiveness reads, in pull mode's hub (diagnose --hub-context),
// every member namespace's agent Lease.
func (o *options) gatherHubLiveness(ctx context.Context) *HubLiveness {
	h := &HubLiveness{Context: o.pullHub.context, TTL: o.pullHub.ttl, Leases: map[string]*coordinationv1.Lease{}}
	hub, err := connect(ctx, o.flags, []string{o.pullHub.context}, o.timeout)
	if err != nil {
		h.Unreachable = err.Error()
		return h
	}
	if hub[0].Err != nil {
		h.Unreachable = hub[0].Err.Error()
		return h
	}
	namespaces, leases, err := agentLeases(ctx, hub[0].Kube)
	if err != nil {
		h.Unreachable = fmt.Sprintf("listing member namespaces (is this pull mode's hub? deploy/hub-pull): %v", err)
		return h
	}
	for _, ns := range namespaces {
		if l := leases[ns.Name]; l != nil && isMemberNamespace(ns) {
			h.Leases[ns.Name] = l
		}
	}
	return h
}
