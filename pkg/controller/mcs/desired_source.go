package mcs

import (
	"context"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/multiclusterservices/catalog"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/catalogmodel"
)

// desiredSource is where the desired state of the clusterset's names comes
// from, chosen once at start: the members' ServiceExports, merged name by
// name (KEP-1645; exportModel), or the hub's service catalog, resolved as
// a whole (catalogModel). Everything downstream of the desired state (the
// member writers, source leases, clusterset IPs) is the same for both;
// what differs between them is behind this interface, and nowhere else.
type desiredSource interface {
	// start starts what the source reads beyond the members' caches,
	// with run starting each long-running part.
	start(ctx context.Context, run func(func(context.Context))) error
	// plan makes the desired state of the name key again, and enqueues
	// the members that must write it.
	plan(ctx context.Context, key string) error
	// readsService tells whether the source reads member m's Service key
	// (namespace/name): its changes plan the name again.
	readsService(m *member, key string) bool
	// readsSlicesOf tells whether the source reads the EndpointSlices of
	// member m's Service key.
	readsSlicesOf(m *member, key string) bool
	// importChanged hears of a change of an import in a member.
	importChanged(si *mcsv1beta1.ServiceImport)
	// ipKey is the key of the clusterset IP allocator under which si, an
	// import written before, holds its IPs.
	ipKey(si *mcsv1beta1.ServiceImport) string
}

// exportModel merges the members' ServiceExports name by name.
type exportModel struct{ c *Controller }

func (exportModel) start(context.Context, func(func(context.Context))) error { return nil }

func (s exportModel) plan(ctx context.Context, key string) error {
	start := time.Now()
	err := s.c.syncClusterset(ctx, key)
	s.c.metrics.observeExportSync(time.Since(start), err)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Merging exports failed; retrying", "key", key)
	}
	return err
}

// readsService: a Service exported anywhere, since a change of it can make
// an export valid or not.
func (s exportModel) readsService(_ *member, key string) bool {
	return s.c.isExportedSomewhere(key)
}

// readsSlicesOf: the slices of a Service the member itself exports.
func (exportModel) readsSlicesOf(m *member, key string) bool {
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	_, err := m.exports.ServiceExports(ns).Get(name)
	return err == nil
}

func (exportModel) importChanged(*mcsv1beta1.ServiceImport) {}

// ipKey: in the export model a name holds its IPs, whoever wrote them.
func (exportModel) ipKey(si *mcsv1beta1.ServiceImport) string {
	return si.Namespace + "/" + si.Name
}

// catalogModel resolves the hub's service catalog: any change resolves
// it all again (a catalog is small next to the endpoints it stands for).
// Its informers and worker are in catalog.go, its read-plan-apply step
// in catalog_sync.go, its decisions in package catalogmodel.
type catalogModel struct{ c *Controller }

func (s catalogModel) start(ctx context.Context, run func(func(context.Context))) error {
	return s.runCatalog(ctx, run)
}

func (s catalogModel) plan(context.Context, string) error {
	s.c.catalog.queue.Add(catalogQueueKey)
	return nil
}

func (s catalogModel) readsService(m *member, key string) bool { return s.catalogBinds(m, key) }

func (s catalogModel) readsSlicesOf(m *member, key string) bool { return s.catalogBinds(m, key) }

// importChanged: the catalog's imports say whether they are written.
func (s catalogModel) importChanged(si *mcsv1beta1.ServiceImport) {
	if si.Annotations[catalog.AnnotationGlobalService] != "" {
		s.c.catalog.queue.Add(catalogQueueKey)
	}
}

// ipKey: an import the catalog placed holds its global service's IPs.
func (catalogModel) ipKey(si *mcsv1beta1.ServiceImport) string {
	if g := si.Annotations[catalog.AnnotationGlobalService]; g != "" {
		return catalogmodel.KeyPrefix + g
	}
	return si.Namespace + "/" + si.Name
}
