// Package eventrecorder records the mcs-controller's events through the
// events API (events.k8s.io/v1), as kube-proxy does: one API in both
// binaries, and in every part of the controller (its reconcilers and its
// membership inventory). The apiserver keeps them in the same store as
// core/v1 Events, so `kubectl describe`, `kubectl get events` and
// `kubectl mcs` see them either way. The library folds events of one
// type, reason, action, regarding and related object into a series that
// keeps the first note; an object an event is about beside its regarding
// one (the slice of an export) goes in related, so that events about two
// such objects stay two events.
package eventrecorder

import (
	"fmt"
	"sync"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
)

// Component is the reporting controller of every event.
const Component = "mcs-controller"

// NoteLimit is the events API's limit on a note, in bytes: a longer one
// is refused, and its event lost.
const NoteLimit = 1024

// New returns a recorder of events in the cluster of kube, whose notes
// are cut to NoteLimit, and the function that shuts its broadcaster
// down. Each event goes to the namespace of the object it is about.
func New(kube kubernetes.Interface) (events.EventRecorder, func()) {
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: kube.EventsV1()})
	stop := make(chan struct{})
	b.StartRecordingToSink(stop)
	return limitedNotes{b.NewRecorder(scheme.Scheme, Component)}, sync.OnceFunc(func() {
		close(stop)
		b.Shutdown()
	})
}

// limitedNotes cuts notes to NoteLimit.
type limitedNotes struct{ events.EventRecorder }

func (r limitedNotes) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.EventRecorder.Eventf(regarding, related, eventtype, reason, action, "%s", CutNote(fmt.Sprintf(note, args...)))
}

// CutNote returns note cut to NoteLimit bytes, on a character boundary,
// saying that it was.
func CutNote(note string) string {
	if len(note) <= NoteLimit {
		return note
	}
	const more = "..."
	cut := NoteLimit - len(more)
	for cut > 0 && !utf8.RuneStart(note[cut]) {
		cut--
	}
	return note[:cut] + more
}
