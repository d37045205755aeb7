package multicluster

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Kinds of object a rejection is about: the metric's kind label, and what
// an event's regarding reference names.
var (
	kindServiceImport = objectKind{mcsv1beta1.GroupVersion.String(), mcsv1beta1.ServiceImportKindName}
	kindEndpointSlice = objectKind{"discovery.k8s.io/v1", "EndpointSlice"}
	kindService       = objectKind{"v1", "Service"}
)

type objectKind struct{ apiVersion, kind string }

func (k objectKind) ref(ns, name string, uid types.UID) *v1.ObjectReference {
	return &v1.ObjectReference{APIVersion: k.apiVersion, Kind: k.kind, Namespace: ns, Name: name, UID: uid}
}

// rejection is one report of something not programmed.
type rejection struct {
	// kind and obj are what was not programmed.
	kind objectKind
	obj  klog.KMetadata
	*mcsproxy.RejectionError
	// regarding is what the event is recorded on: obj when nil. Users
	// look at an import, so a slice's rejection is recorded there.
	regarding *v1.ObjectReference
	// note is the event's note: the message when empty.
	note string
}

// report logs r, counts it in kubeproxy_multicluster_rejections_total and
// records it as a warning event. Callers report each rejection once, not
// at every event that sees it again.
func (p *Proxier) report(r rejection) {
	key := strings.ToLower(r.kind.kind[:1]) + r.kind.kind[1:] // "serviceImport", as klog keys go
	p.logger.Error(nil, r.kind.kind+" not programmed", key, klog.KObj(r.obj), "reason", r.Reason, "message", r.Message)
	rejectionsTotal.WithLabelValues(r.kind.kind, string(r.Reason)).Inc()
	if p.recorder == nil {
		return
	}
	regarding := r.regarding
	if regarding == nil {
		regarding = r.kind.ref(r.obj.GetNamespace(), r.obj.GetName(), "")
		if o, ok := r.obj.(interface{ GetUID() types.UID }); ok {
			regarding.UID = o.GetUID()
		}
	}
	note := r.note
	if note == "" {
		note = r.Message
	}
	p.recorder.Eventf(regarding, nil, v1.EventTypeWarning, string(r.Reason), eventAction, "%s", note)
}
