package mcs

import (
	"fmt"
	"sync"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
)

// The controller records its events through the events API
// (events.k8s.io/v1), as kube-proxy does: one API in both binaries. The
// apiserver keeps them in the same store as core/v1 Events, so `kubectl
// describe`, `kubectl get events` and `kubectl mcs` see them either way.
// The library folds events of one type, reason, action, regarding and
// related object into a series that keeps the first note; the slice an
// event is about goes in related, so that events about two slices of
// one export stay two events.

// eventComponent is the reporting controller of every event.
const eventComponent = "mcs-controller"

// noteLimit is the events API's limit on a note, in bytes: a longer one
// is refused, and its event lost.
const noteLimit = 1024

// newEventRecorder returns a recorder of events in the cluster of kube
// and the function that shuts its broadcaster down.
func newEventRecorder(kube kubernetes.Interface) (events.EventRecorder, func()) {
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: kube.EventsV1()})
	stop := make(chan struct{})
	b.StartRecordingToSink(stop)
	return limitedNotes{b.NewRecorder(scheme.Scheme, eventComponent)}, sync.OnceFunc(func() {
		close(stop)
		b.Shutdown()
	})
}

// limitedNotes cuts notes to noteLimit.
type limitedNotes struct{ events.EventRecorder }

func (r limitedNotes) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.EventRecorder.Eventf(regarding, related, eventtype, reason, action, "%s", cutNote(fmt.Sprintf(note, args...)))
}

// cutNote returns note cut to noteLimit bytes, on a character boundary,
// saying that it was.
func cutNote(note string) string {
	if len(note) <= noteLimit {
		return note
	}
	const more = "..."
	cut := noteLimit - len(more)
	for cut > 0 && !utf8.RuneStart(note[cut]) {
		cut--
	}
	return note[:cut] + more
}
