package inventory

import (
	"context"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	inventoryv1alpha1 "k8s.io/multiclusterservices/apis/inventory/v1alpha1"
	"k8s.io/multiclusterservices/export"
)

// ConditionMember is the controller's condition on each ClusterProfile of
// its inventory (export.ConditionClusterSetMember); nothing else of the
// profile is written.
const ConditionMember = export.ConditionClusterSetMember

// Reasons of ConditionMember, one per State.
var memberReasons = map[State]string{Joined: "Joined", Pending: "Pending", Refused: "Refused"}

// writeCondition puts the member's state on its profile's status. A
// conflict (the cluster manager wrote meanwhile) is left to the next
// sync of the profile, which its write triggers.
func (inv *Inventory) writeCondition(ctx context.Context, key string) {
	if !strings.HasPrefix(key, profilePrefix) {
		return
	}
	inv.mu.Lock()
	e := inv.entries[key]
	var state State
	var message string
	var u *unstructured.Unstructured
	if e != nil {
		state, message = e.state, e.message
		u, _ = e.obj.(*unstructured.Unstructured)
	}
	inv.mu.Unlock()
	if u == nil || state == "" {
		return
	}
	cp := &inventoryv1alpha1.ClusterProfile{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, cp); err != nil {
		return
	}
	status := metav1.ConditionFalse
	if state == Joined {
		status = metav1.ConditionTrue
	}
	if message == "" {
		message = string(state)
	}
	if !meta.SetStatusCondition(&cp.Status.Conditions, metav1.Condition{
		Type: ConditionMember, Status: status, Reason: memberReasons[state], Message: truncate(message, 1024), ObservedGeneration: cp.Generation,
	}) {
		return
	}
	conditions, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&cp.Status)
	if err != nil {
		return
	}
	out := u.DeepCopy()
	// Only the conditions are replaced, from the object as read: every
	// other field of the status is written back as the cluster manager
	// wrote it, known to these types or not.
	if err := unstructured.SetNestedField(out.Object, conditions["conditions"], "status", "conditions"); err != nil {
		return
	}
	inv.mu.Lock()
	resource := inv.profileResource
	inv.mu.Unlock()
	if _, err := inv.cfg.Profiles.Resource(resource).Namespace(u.GetNamespace()).UpdateStatus(ctx, out, metav1.UpdateOptions{FieldManager: "mcs-controller"}); err != nil {
		inv.logger.V(2).Info("Cannot write the member condition on a ClusterProfile", "profile", key, "err", err)
	}
}

// onlyOurCondition says whether a profile update changed nothing but the
// controller's own condition (its own write, coming back).
func onlyOurCondition(old, cur any) bool {
	o, ok1 := old.(*unstructured.Unstructured)
	c, ok2 := cur.(*unstructured.Unstructured)
	if !ok1 || !ok2 {
		return false
	}
	strip := func(u *unstructured.Unstructured) map[string]any {
		x := u.DeepCopy().Object
		delete(x, "metadata")
		conds, _, _ := unstructured.NestedSlice(x, "status", "conditions")
		var kept []any
		for _, cond := range conds {
			if m, ok := cond.(map[string]any); !ok || m["type"] != ConditionMember {
				kept = append(kept, cond)
			}
		}
		if st, ok := x["status"].(map[string]any); ok {
			st["conditions"] = kept
		}
		return x
	}
	return apiequality.Semantic.DeepEqual(strip(o), strip(c)) &&
		apiequality.Semantic.DeepEqual(o.GetLabels(), c.GetLabels()) && o.GetDeletionTimestamp().Equal(c.GetDeletionTimestamp())
}
