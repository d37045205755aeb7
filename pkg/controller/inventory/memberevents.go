package inventory

import (
	"context"
	"fmt"
	"os"
	"time"

	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
)

// A member's own view of its membership: the inventory records each
// change of a member's state (joined, refused, left) as an event on the
// member's ClusterProperty cluster.clusterset.k8s.io, in the member
// itself. A member listed by a context has no object in the hub to carry
// it, and a member's administrator (who may not read the hub) learns
// there why it is not served, for example that it was refused for
// claiming another cluster ID. `kubectl mcs status` shows it.

// ReportingController is the reporting controller of those events.
const ReportingController = "mcs-controller"

// memberEventTimeout bounds writing one such event.
const memberEventTimeout = 10 * time.Second

var reportingInstance = func() string {
	host, _ := os.Hostname()
	if host == "" {
		return ReportingController
	}
	return ReportingController + "-" + host
}()

// memberEvent records an event on the ClusterProperty of the member cfg
// reaches, at time now: the time of the change it tells, taken by the
// caller, so that of two changes told in the background (left, then
// refused) the later one is the one readers take as the last word. It is
// best effort: the hub's event and condition, the log and the metric say
// the same.
func memberEvent(ctx context.Context, cfg *rest.Config, now time.Time, kind, reason, action, note string) error {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, memberEventTimeout)
	defer cancel()
	if len(note) > 1024 {
		note = note[:1021] + "..."
	}
	_, err = client.EventsV1().Events(metav1.NamespaceDefault).Create(ctx, &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s.%x", aboutv1alpha1.ClusterIDProperty, now.UnixNano()),
			Namespace: metav1.NamespaceDefault,
		},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: ReportingController,
		ReportingInstance:   reportingInstance,
		Action:              action,
		Reason:              reason,
		Type:                kind,
		Note:                note,
		Regarding: v1.ObjectReference{
			APIVersion: aboutv1alpha1.GroupName + "/v1alpha1",
			Kind:       "ClusterProperty",
			Name:       aboutv1alpha1.ClusterIDProperty,
		},
	}, metav1.CreateOptions{})
	return err
}
