// Package pull lays out pull mode's hub (docs/architecture.md, "Pull
// mode"): every member has a namespace there named after its cluster ID,
// where its agent alone publishes what the planner reads of it, and the
// planner writes the plan into a namespace of its own that every agent
// reads. RBAC, not a flag, keeps a member to its part: its hub identity is
// a ServiceAccount in its namespace, bound there and to reading the plan,
// nothing else.
package pull

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
)

const (
	// PlanNamespace holds the plan, which only the planner writes
	// (deploy/hub-pull).
	PlanNamespace = "mcs-plan"
	// AgentServiceAccount is a member agent's hub identity, in the
	// member's namespace.
	AgentServiceAccount = "mcs-member-agent"
	// AgentClusterRole is what an agent may do in its own namespace
	// (deploy/hub-pull/hub.yaml).
	AgentClusterRole = "multicluster:member-agent"
	// PlanReaderClusterRole is what an agent may read of the plan.
	PlanReaderClusterRole = "multicluster:member-agent-plan-reader"
	// LabelMemberCluster marks a member's hub namespace with its cluster
	// ID (the namespace's name), so that the planner lists member
	// namespaces by label, never taking any other namespace for one.
	LabelMemberCluster = "multiclusterservices.k8s.io/member-cluster"
)

// reservedNamespaces are hub namespaces no member may be given: the
// system's, the plan's and the controller's.
var reservedNamespaces = []string{"default", PlanNamespace, "mcs-system"}

// CheckClusterID says why clusterID cannot name a member's hub namespace,
// or nil: a cluster ID that is a namespace name (an RFC 1123 label) and
// not one the hub keeps for itself.
func CheckClusterID(clusterID string) error {
	if errs := validation.IsDNS1123Label(clusterID); len(errs) > 0 {
		return fmt.Errorf("cluster ID %q cannot name a hub namespace: %s", clusterID, strings.Join(errs, "; "))
	}
	if slices.Contains(reservedNamespaces, clusterID) {
		return fmt.Errorf("cluster ID %q is a namespace the hub keeps for itself", clusterID)
	}
	if strings.HasPrefix(clusterID, "kube-") {
		return fmt.Errorf("cluster ID %q: namespaces kube-* are the hub's own", clusterID)
	}
	return nil
}

// MemberLimits bound what one member may publish in its hub namespace, so
// that a member flooding it costs the hub's apiserver and the planner a
// known amount and nothing of the others'. Its agent publishes one
// MemberExport per exported name and the slices of each.
type MemberLimits struct {
	Exports        int64
	EndpointSlices int64
}

// DefaultMemberLimits are kubectl mcs hub member's: ten thousand exported
// names and five slices each.
var DefaultMemberLimits = MemberLimits{Exports: 10000, EndpointSlices: 50000}

// memberLeases and memberEvents bound the rest an agent may write in its
// namespace: its Lease (one; room for a renamed one) and its events.
const (
	memberLeases = 10
	memberEvents = 1000
)

// MemberObjects are a member's part of the hub: its namespace (named after
// its cluster ID), its agent's ServiceAccount there, the two RoleBindings
// that give that identity its own namespace and a read of the plan, and a
// ResourceQuota that bounds what it may publish there (limits; the agent
// may not change it). The hub's operator applies them (kubectl mcs hub
// member).
func MemberObjects(clusterID string, limits MemberLimits) ([]runtime.Object, error) {
	if err := CheckClusterID(clusterID); err != nil {
		return nil, err
	}
	if limits.Exports <= 0 || limits.EndpointSlices <= 0 {
		return nil, fmt.Errorf("a member's limits must be positive: %d exports, %d EndpointSlices", limits.Exports, limits.EndpointSlices)
	}
	labels := map[string]string{"app.kubernetes.io/part-of": "multicluster-services"}
	nsLabels := maps.Clone(labels)
	nsLabels[LabelMemberCluster] = clusterID
	agent := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: AgentServiceAccount, Namespace: clusterID}
	return []runtime.Object{
		&corev1.Namespace{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: clusterID, Labels: nsLabels},
		},
		&corev1.ServiceAccount{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: metav1.ObjectMeta{Name: AgentServiceAccount, Namespace: clusterID, Labels: labels},
		},
		&rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: AgentServiceAccount, Namespace: clusterID, Labels: labels},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: AgentClusterRole},
			Subjects:   []rbacv1.Subject{agent},
		},
		&rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: AgentServiceAccount + "-" + clusterID, Namespace: PlanNamespace, Labels: labels},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: PlanReaderClusterRole},
			Subjects:   []rbacv1.Subject{agent},
		},
		&corev1.ResourceQuota{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ResourceQuota"},
			ObjectMeta: metav1.ObjectMeta{Name: AgentServiceAccount, Namespace: clusterID, Labels: labels},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
				"count/memberexports.hub.multiclusterservices.k8s.io":  *resource.NewQuantity(limits.Exports, resource.DecimalSI),
				"count/memberclusters.hub.multiclusterservices.k8s.io": *resource.NewQuantity(1, resource.DecimalSI),
				"count/endpointslices.discovery.k8s.io":                *resource.NewQuantity(limits.EndpointSlices, resource.DecimalSI),
				"count/leases.coordination.k8s.io":                     *resource.NewQuantity(memberLeases, resource.DecimalSI),
				"count/events":                                         *resource.NewQuantity(memberEvents, resource.DecimalSI),
				"count/events.events.k8s.io":                           *resource.NewQuantity(memberEvents, resource.DecimalSI),
			}},
		},
	}, nil
}

// CheckHubIdentity says why an agent that answers to username in the hub
// may not publish for clusterID, the ID its own ClusterProperty states,
// or nil: its hub identity must be the agent ServiceAccount of the hub
// namespace named after that ID. RBAC would refuse every write anyway;
// this says why at the start, naming both, instead of a Forbidden per
// write.
func CheckHubIdentity(username, clusterID string) error {
	if err := CheckClusterID(clusterID); err != nil {
		return err
	}
	ns, name, ok := serviceAccountOf(username)
	switch {
	case !ok || name != AgentServiceAccount:
		return fmt.Errorf("the hub knows this agent as %q, not as a member agent (ServiceAccount %s in the member's hub namespace: kubectl mcs hub member %s, then a token of it)", username, AgentServiceAccount, clusterID)
	case ns != clusterID:
		return fmt.Errorf("this cluster's ClusterProperty says it is %q, but its hub identity is cluster %q's agent (%s): a member publishes only under its own cluster ID", clusterID, ns, username)
	}
	return nil
}

// serviceAccountOf splits a ServiceAccount's username.
func serviceAccountOf(username string) (namespace, name string, ok bool) {
	rest, ok := strings.CutPrefix(username, "system:serviceaccount:")
	if !ok {
		return "", "", false
	}
	namespace, name, ok = strings.Cut(rest, ":")
	return namespace, name, ok && namespace != "" && name != "" && !strings.Contains(name, ":")
}
