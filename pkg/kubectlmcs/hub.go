package kubectlmcs

import (
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	inventoryv1alpha1 "k8s.io/multiclusterservices/apis/inventory/v1alpha1"
	"k8s.io/multiclusterservices/crdgate"
	"k8s.io/multiclusterservices/export"
)

// HubView is the clusterset as the mcs-controller sees it in its hub:
// every member Secret and ClusterProfile it lists, and what it said of
// each. The kubeconfig's contexts are what the user can reach; this is
// who the controller serves.
type HubView struct {
	Context     string      `json:"context"`
	Unreachable string      `json:"unreachable,omitempty"`
	Members     []HubMember `json:"members"`
	// Notes say what could not be read (no ClusterProfile API in the
	// hub, a namespace that does not exist).
	Notes []string `json:"notes,omitempty"`
}

// HubMember is one listing of the hub.
type HubMember struct {
	// Source is "secret" or "profile"; Name its namespace/name.
	Source string `json:"source"`
	Name   string `json:"name"`
	// Cluster is the cluster ID the listing states: the Secret's
	// annotation, the profile's cluster.clusterset.k8s.io property.
	Cluster string `json:"cluster,omitempty"`
	// State is what the controller last said: joined, pending, refused,
	// left, or unknown (nothing yet: a controller that has not seen it).
	State   string `json:"state"`
	Message string `json:"message,omitempty"`
}

// hubOptions are where the hub keeps its listings: the mcs-controller's
// --member-secrets-namespace, --member-secrets-selector and
// --inventory-namespace.
type hubOptions struct {
	context          string
	secretsNamespace string
	secretsSelector  string
	profileNamespace string
}

// memberEventStates are the states the controller's events on a member
// Secret say, by reason.
var memberEventStates = map[string]string{"MemberJoined": "joined", "MemberPending": "pending", "MemberRefused": "refused", "MemberLeft": "left"}

// gatherHub reads the hub's listings and the controller's word on each.
func gatherHub(ctx context.Context, hub *member, o hubOptions) HubView {
	view := HubView{Context: hub.Context}
	if hub.Err != nil {
		view.Unreachable = hub.Err.Error()
		return view
	}
	if o.secretsNamespace != "" {
		members, note := hubSecrets(ctx, hub, o.secretsNamespace, o.secretsSelector)
		view.Members = append(view.Members, members...)
		if note != "" {
			view.Notes = append(view.Notes, note)
		}
	}
	if o.profileNamespace != "" {
		members, note := hubProfiles(ctx, hub, o.profileNamespace)
		view.Members = append(view.Members, members...)
		if note != "" {
			view.Notes = append(view.Notes, note)
		}
	}
	return view
}

func hubSecrets(ctx context.Context, hub *member, ns, selector string) ([]HubMember, string) {
	secrets, err := hub.Kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Sprintf("member Secrets in %s: %v", ns, err)
	}
	events, _ := hub.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Secret"})
	latest := map[string]*v1.Event{}
	if events != nil {
		for i := range events.Items {
			e := &events.Items[i]
			if _, ok := memberEventStates[e.Reason]; !ok {
				continue
			}
			if prev := latest[e.InvolvedObject.Name]; prev == nil || eventTime(e).After(eventTime(prev)) {
				latest[e.InvolvedObject.Name] = e
			}
		}
	}
	var out []HubMember
	for _, s := range secrets.Items {
		m := HubMember{Source: "secret", Name: s.Namespace + "/" + s.Name, Cluster: s.Annotations[export.AnnotationMemberClusterID], State: "unknown"}
		if e := latest[s.Name]; e != nil {
			m.State, m.Message = memberEventStates[e.Reason], e.Message
			if m.State == "joined" {
				m.Message = ""
			}
		}
		out = append(out, m)
	}
	return out, ""
}

func hubProfiles(ctx context.Context, hub *member, ns string) ([]HubMember, string) {
	resource, err := crdgate.Resource(hub.Kube.Discovery(), inventoryv1alpha1.Resource, inventoryv1alpha1.Versions)
	if err != nil {
		return nil, fmt.Sprintf("ClusterProfiles: %v", err)
	}
	list, err := hub.Dynamic.Resource(resource).Namespace(ns).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, "the hub serves no ClusterProfile API"
	case err != nil:
		return nil, fmt.Sprintf("ClusterProfiles in %s: %v", ns, err)
	}
	var out []HubMember
	for _, u := range list.Items {
		out = append(out, profileMember(u))
	}
	return out, ""
}

// profileMember reads a profile as served (v1alpha1 or v1alpha2): its
// cluster.clusterset.k8s.io property and the controller's condition.
func profileMember(u unstructured.Unstructured) HubMember {
	m := HubMember{Source: "profile", Name: u.GetNamespace() + "/" + u.GetName(), State: "unknown"}
	properties, _, _ := unstructured.NestedSlice(u.Object, "status", "properties")
	for _, p := range properties {
		if p, ok := p.(map[string]any); ok && p["name"] == aboutv1alpha1.ClusterIDProperty {
			m.Cluster, _ = p["value"].(string)
		}
	}
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var conditions []metav1.Condition
	for _, c := range raw {
		c, ok := c.(map[string]any)
		if !ok {
			continue
		}
		t, _ := c["type"].(string)
		status, _ := c["status"].(string)
		reason, _ := c["reason"].(string)
		message, _ := c["message"].(string)
		conditions = append(conditions, metav1.Condition{Type: t, Status: metav1.ConditionStatus(status), Reason: reason, Message: message})
	}
	if c := meta.FindStatusCondition(conditions, export.ConditionClusterSetMember); c != nil {
		m.State = strings.ToLower(c.Reason)
		if c.Status != metav1.ConditionTrue {
			m.Message = c.Message
		}
	}
	return m
}

// HubLines renders the hub's view: which view it is, a table of its
// listings, and why each one not joined is not.
func HubLines(view HubView) []string {
	out := []string{fmt.Sprintf("members as the mcs-controller sees them in the hub %s:", view.Context)}
	rows := [][]string{{"SOURCE", "NAME", "CLUSTER", "STATE"}}
	var notes []string
	for _, m := range view.Members {
		rows = append(rows, []string{m.Source, m.Name, orDash(m.Cluster), m.State})
		if m.Message != "" {
			notes = append(notes, fmt.Sprintf("%s %s: %s: %s", m.Source, m.Name, m.State, m.Message))
		}
	}
	switch {
	case view.Unreachable != "":
		notes = append(notes, "unreachable: "+view.Unreachable)
	case len(view.Members) == 0:
		notes = append(notes, "no member Secret or ClusterProfile listed")
	}
	if len(view.Members) > 0 {
		out = append(out, table(rows)...)
	}
	for _, n := range slices.Concat(notes, view.Notes) {
		out = append(out, wrap(n, width, "  ")...)
	}
	return out
}

// HubWaiting says which listings of the hub have not joined (status
// --wait with --hub-context), and a hub that does not answer; what the
// hub does not serve (Notes) is no reason to wait.
func HubWaiting(view HubView) []string {
	var out []string
	for _, m := range view.Members {
		if m.State != "joined" {
			out = append(out, fmt.Sprintf("hub %s: %s %s: %s", view.Context, m.Source, m.Name, m.State))
		}
	}
	if view.Unreachable != "" {
		out = append(out, fmt.Sprintf("hub %s: unreachable", view.Context))
	}
	return out
}
