package export

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Conflict is one field on which the exports of a name disagree. The
// oldest export's value is used; Losers are the clusters whose value was not.
type Conflict struct {
	Reason mcsv1beta1.ServiceExportConditionReason
	// Field names the field, e.g. "sessionAffinity" or `port "http"`.
	Field string
	// Winner is the cluster of the oldest export, whose value is used.
	Winner string
	// Value is the value used, as text.
	Value string
	// Losers are the clusters that disagree, sorted.
	Losers []string
	// Missing are the Losers that do not have the field at all (a port
	// their Service does not expose), sorted.
	Missing []string
	// Of is the number of exports that took part.
	Of int
}

// Message is the KEP-1645 wording: the field, which cluster won and why,
// and how many clusters disagree (and which of them lack the field).
func (c Conflict) Message() string {
	m := fmt.Sprintf("Conflicting %s. Using %s from oldest service export in %q. %d/%d clusters disagree: %s.",
		c.Field, c.Value, c.Winner, len(c.Losers), c.Of, strings.Join(c.Losers, ", "))
	if len(c.Missing) > 0 {
		m += fmt.Sprintf(" Not exposed by %s.", strings.Join(c.Missing, ", "))
	}
	return m
}

// ConflictCondition returns the Conflict condition for a set of conflicts:
// False with NoConflicts when empty, otherwise True with the distinct
// reasons joined by commas, as mcs-api v1beta1 allows.
func ConflictCondition(conflicts []Conflict) metav1.Condition {
	c := metav1.Condition{Type: string(mcsv1beta1.ServiceExportConditionConflict)}
	if len(conflicts) == 0 {
		c.Status = metav1.ConditionFalse
		c.Reason = string(mcsv1beta1.ServiceExportReasonNoConflicts)
		c.Message = "the exports of this name agree"
		return c
	}
	var reasons, messages []string
	for _, x := range conflicts {
		if !slices.Contains(reasons, string(x.Reason)) {
			reasons = append(reasons, string(x.Reason))
		}
		messages = append(messages, x.Message())
	}
	c.Status = metav1.ConditionTrue
	c.Reason = strings.Join(reasons, ",")
	c.Message = strings.Join(messages, " ")
	return c
}
