package multicluster

import (
	"context"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
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

// reporter tells users what the proxier did not program and what it
// changed: a log line, the rejections metric and an event on the object,
// each event naming the node as its related object, as one kube-proxy per
// node reports on the same ServiceImports. Used with the Proxier's lock
// held.
type reporter struct {
	logger klog.Logger
	// recorder may be nil: no events.
	recorder events.EventRecorder
	// node is the related object of every event (SetNode).
	node *v1.ObjectReference
}

// report logs r, counts it in kubeproxy_multicluster_rejections_total and
// records it as a warning event. Callers report each rejection once, not
// at every event that sees it again.
func (rep *reporter) report(r rejection) {
	key := strings.ToLower(r.kind.kind[:1]) + r.kind.kind[1:] // "serviceImport", as klog keys go
	rep.logger.Error(nil, r.kind.kind+" not programmed", key, klog.KObj(r.obj), "reason", r.Reason, "message", r.Message)
	rejectionsTotal.WithLabelValues(r.kind.kind, string(r.Reason)).Inc()
	if rep.recorder == nil {
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
	rep.recorder.Eventf(regarding, rep.related(), v1.EventTypeWarning, string(r.Reason), eventAction, "%s", note)
}

// ReasonProgrammed is the reason of the Normal event kube-proxy records on
// a ServiceImport it programs on its node after having reported it not
// programmed, so that the import's events from that node end on what
// holds now (kubectl mcs diagnose reads the latest, per node).
const ReasonProgrammed = "Programmed"

// programmed records that si, refused on this node before, is now
// programmed. An import programmed without a refusal is not reported:
// one event per node and import would grow with a tenant's imports times
// the node count, and name every node in the tenant's namespace, to say
// what the absence of a warning says; the node's gate is announced once
// per node instead (Announce).
func (rep *reporter) programmed(si *mcsv1beta1.ServiceImport, afterRejection bool) {
	if rep.recorder == nil || !afterRejection {
		return
	}
	rep.recorder.Eventf(kindServiceImport.ref(si.Namespace, si.Name, si.UID), rep.related(), v1.EventTypeNormal,
		ReasonProgrammed, eventAction, "clusterset IPs %s programmed", strings.Join(si.Spec.IPs, ","))
}

// ReasonServingImports is the reason of the Normal event kube-proxy
// records on its Node when it programs ServiceImports, that is when the
// MultiClusterServices gate is on: once its first full sync with the
// imports is done, and again every AnnouncePeriod while it runs, so that
// one is always younger than the apiserver's event TTL (one hour by
// default). kubectl mcs status reads it, after upstream's "Starting"
// event of the same kube-proxy, to tell the gate of a node whose metrics
// it cannot read. Node events live in the default namespace, which
// tenants do not read.
const ReasonServingImports = "ServingServiceImports"

// AnnouncePeriod is how often the node's announcement is repeated.
const AnnouncePeriod = 30 * time.Minute

// Announce records ReasonServingImports on the node once the wrapped
// Provider has been told the first full state, then every period, until
// ctx ends.
func (p *Proxier) Announce(ctx context.Context, period time.Duration) {
	p.mu.Lock()
	// The importer's opts are replaced under the lock when the cluster ID
	// changes; the ranges they carry do not.
	synced, node, recorder := p.synced, p.events.node, p.events.recorder
	ranges := make([]string, 0, len(p.im.opts.ClusterSetIPCIDRs))
	for _, r := range p.im.opts.ClusterSetIPCIDRs {
		ranges = append(ranges, r.String())
	}
	p.mu.Unlock()
	if recorder == nil || node == nil {
		return
	}
	if synced != nil {
		select {
		case <-ctx.Done():
			return
		case <-synced:
		}
	}
	for {
		recorder.Eventf(node, nil, v1.EventTypeNormal, ReasonServingImports, "StartMultiClusterServices",
			"MultiClusterServices gate on: ServiceImports in clusterset IP ranges %s are programmed on this node", strings.Join(ranges, ","))
		select {
		case <-ctx.Done():
			return
		case <-time.After(period):
		}
	}
}

// ReasonClusterSelectionChanged is the reason of the Normal event
// kube-proxy records on a ServiceImport when the cluster selector result
// its node sends the clusterset IPs to changes (KEP-5939): a failover to a
// later result, a failback, or every source cluster when no result has a
// usable endpoint.
const ReasonClusterSelectionChanged = "ClusterSelectionChanged"

// selectionChanged logs a change of si's chosen result, explained by
// why, and records it as an event, once per change, if record: only after
// the first sync, as at start-up an import's slices arrive after it, and
// every node would report every import's first choice as a change. The event's
// action names the change ("Result0ToResult1", "Result1ToAllClusters"):
// the events library folds events of one action, reason and object into
// a series that keeps the first note, so that a failover and the
// failback after it must differ there to both be read.
func (rep *reporter) selectionChanged(si *mcsv1beta1.ServiceImport, from, to int, why string, record bool) {
	rep.logger.V(2).Info("Cluster selection changed", "serviceImport", klog.KObj(si), "change", why)
	if rep.recorder == nil || !record || why == "" {
		return
	}
	rep.recorder.Eventf(kindServiceImport.ref(si.Namespace, si.Name, si.UID), rep.related(), v1.EventTypeNormal,
		ReasonClusterSelectionChanged, resultName(from)+"To"+resultName(to), "%s", why)
}

func resultName(i int) string {
	if i < 0 {
		return "AllClusters"
	}
	return "Result" + strconv.Itoa(i)
}

// SetNode names the node this proxy runs on: every event it records
// names the node as its related object, as one kube-proxy per node
// reports on the same ServiceImports.
func (p *Proxier) SetNode(ref *v1.ObjectReference) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events.node = ref
}

// related returns the related object of events: nil (no related object)
// when the node is not known.
func (rep *reporter) related() runtime.Object {
	if rep.node == nil {
		return nil
	}
	return rep.node
}
