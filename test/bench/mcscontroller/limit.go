package main

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/multiclusterservices/export"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclientset "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	mcscontroller "github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/mcs"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/bench/measure"
)

// measureLimit makes, straight into every member at once, the writes the
// controller makes to converge, with the same objects (per name: the
// import, its status, one slice per source cluster owned by the import,
// the export's status; the same fields, conditions and labels), with the
// controller's client rate limits and as many writers as it has workers,
// and returns the time the slowest member took and the CPU the apiservers
// and etcd (serverPids) used meanwhile. The objects go into their own
// namespace under another manager, and are deleted before the controller
// starts.
func measureLimit(ctx context.Context, members []*member, serverPids []int) (time.Duration, float64, error) {
	const ns = "limit"
	// The limit's writes are watched as the controller's are, so that
	// both phases carry the same cost of being observed.
	stop := make(chan struct{})
	defer close(stop)
	observers := make([]observer, len(members))
	for i, m := range members {
		if _, err := m.kube.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return 0, 0, err
		}
		observers[i] = observe(m, ns, "limit", stop)
	}
	// The exports whose status is written exist before, as populate's do
	// before the controller starts.
	var pre errgroup.Group
	pre.SetLimit(32)
	exportsOf := make([][]*mcsv1beta1.ServiceExport, len(members))
	for j, m := range members {
		exportsOf[j] = make([]*mcsv1beta1.ServiceExport, *exports)
		for i := 0; i < *exports; i++ {
			pre.Go(func() (err error) {
				exportsOf[j][i], err = m.mcs.MulticlusterV1beta1().ServiceExports(ns).Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: serviceName(i)}}, metav1.CreateOptions{})
				return err
			})
		}
	}
	if err := pre.Wait(); err != nil {
		return 0, 0, err
	}
	cpuBefore := cpuSeconds(serverPids...)
	start := time.Now()
	// Done when every member's watchers have seen every write, as
	// convergence is.
	seen := make(chan milestones, 1)
	go func() {
		var progress milestones
		defer func() { seen <- progress }()
		want := len(members) * (*exports + *exports**clusters)
		for {
			got := 0
			for _, o := range observers {
				ni, n := o.counts()
				got += ni + n
			}
			progress.record(got, want, time.Since(start))
			if got == want || ctx.Err() != nil {
				return
			}
			time.Sleep(250 * time.Millisecond)
		}
	}()
	var g errgroup.Group
	for j, m := range members {
		cfg := rest.CopyConfig(m.cfg)
		cfg.QPS, cfg.Burst = float32(*apiQPS), 2**apiQPS
		mcsc := mcsclientset.NewForConfigOrDie(cfg)
		// As the controller's clients: built-in types as protobuf.
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		kube := kubernetes.NewForConfigOrDie(cfg)
		g.Go(func() error {
			var w errgroup.Group
			w.SetLimit(*workers)
			for i := 0; i < *exports; i++ {
				w.Go(func() error {
					// The fields the controller's import carries.
					si := &mcsv1beta1.ServiceImport{
						ObjectMeta: metav1.ObjectMeta{Name: serviceName(i), Namespace: ns, Labels: map[string]string{mcsproxy.LabelImportManagedBy: "limit"}},
						Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{fmt.Sprintf("10.251.%d.%d", i/256, i%256)},
							IPFamilies: []v1.IPFamily{v1.IPv4Protocol}, SessionAffinity: v1.ServiceAffinityNone, InternalTrafficPolicy: ptr.To(v1.ServiceInternalTrafficPolicyCluster),
							Ports: []mcsv1beta1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}},
					}
					si, err := mcsc.MulticlusterV1beta1().ServiceImports(ns).Create(ctx, si, metav1.CreateOptions{})
					if err != nil {
						return err
					}
					owner := []metav1.OwnerReference{{APIVersion: mcsv1beta1.GroupVersion.String(), Kind: mcsv1beta1.ServiceImportKindName, Name: si.Name, UID: si.UID}}
					for _, source := range members {
						s := localSlice(source, i, 0)
						s.Name, s.Namespace, s.OwnerReferences = serviceName(i)+"-"+source.id, ns, owner
						s.Labels = map[string]string{mcsv1beta1.LabelServiceName: serviceName(i), mcsv1beta1.LabelSourceCluster: source.id, discoveryv1.LabelManagedBy: "limit"}
						for e := range s.Endpoints {
							// The controller's slices name no Pod.
							s.Endpoints[e].TargetRef = nil
						}
						if _, err := kube.DiscoveryV1().EndpointSlices(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
							return err
						}
					}
					for _, c := range members {
						si.Status.Clusters = append(si.Status.Clusters, mcsv1beta1.ClusterStatus{Cluster: c.id})
					}
					si.Status.EndpointSliceObjects = mcsv1beta1.EndpointSliceObjectsPresent
					si.Status.Conditions = conditions(mcscontroller.HealthyImportConditions(), si.Generation)
					if _, err = mcsc.MulticlusterV1beta1().ServiceImports(ns).UpdateStatus(ctx, si, metav1.UpdateOptions{}); err != nil {
						return err
					}
					// The controller reads the export from its cache.
					se := exportsOf[j][i].DeepCopy()
					se.Status.Conditions = conditions(export.ExportConditions(export.Validate(&v1.Service{}), nil, ""), se.Generation)
					_, err = mcsc.MulticlusterV1beta1().ServiceExports(ns).UpdateStatus(ctx, se, metav1.UpdateOptions{})
					return err
				})
			}
			return w.Wait()
		})
	}
	if err := g.Wait(); err != nil {
		return 0, 0, err
	}
	progress := <-seen
	limit := time.Since(start)
	fmt.Printf("limit progress: %s\n", progress)
	cpu := cpuSeconds(serverPids...) - cpuBefore
	// The limit's objects go, every member at once: an apiserver deletes
	// a collection one object at a time (at 30 members one after the other,
	// longer than the limit itself).
	var del errgroup.Group
	for _, m := range members {
		del.Go(func() error {
			if err := m.kube.DiscoveryV1().EndpointSlices(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
				return err
			}
			if err := m.mcs.MulticlusterV1beta1().ServiceImports(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
				return err
			}
			return m.mcs.MulticlusterV1beta1().ServiceExports(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		})
	}
	if err := del.Wait(); err != nil {
		return 0, 0, err
	}
	return limit, cpu, nil
}

// conditions stamps conds as written now for generation.
func conditions(conds []metav1.Condition, generation int64) []metav1.Condition {
	now := metav1.Now()
	for i := range conds {
		conds[i].ObservedGeneration, conds[i].LastTransitionTime = generation, now
	}
	return conds
}

// settle waits until the apiservers and etcd are idle (measure.Settle).
func settle(pids []int) { measure.Settle(pids) }

// cpuSeconds returns the user and system CPU time the processes used.
func cpuSeconds(pids ...int) float64 { return measure.CPUSeconds(pids...) }
