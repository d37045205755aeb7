package clusterset

import (
	"context"
	"log"
	"os"
	"path/filepath"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// startScheduler runs the cluster's stand-in for kube-scheduler: it binds
// every pending pod of the default scheduler to a node, round-robin, or
// to the node its kubernetes.io/hostname node selector names. Pods and the
// Deployments and ReplicaSets that make them work as in a real cluster;
// resources, affinity and taints are not considered.
func (cs *ClusterSet) startScheduler(c *Cluster) error {
	pending := informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", "").String()
	})
	pods := func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Core().V1().Pods().Informer()
	}
	return cs.runStandIn(c, "scheduler", pods, []informers.SharedInformerOption{pending}, func(ctx context.Context, client kubernetes.Interface, logger *log.Logger) func(any) {
		var next atomic.Uint64
		return func(obj any) { bind(ctx, client, logger, c, &next, obj) }
	})
}

// bind binds pod obj, if it is pending, to the next node of c or the one
// its node selector names.
func bind(ctx context.Context, client kubernetes.Interface, logger *log.Logger, c *Cluster, next *atomic.Uint64, obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok || pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil {
		return
	}
	if pod.Spec.SchedulerName != "" && pod.Spec.SchedulerName != v1.DefaultSchedulerName {
		return
	}
	node := c.Nodes[int(next.Add(1)-1)%len(c.Nodes)].Name
	if want := pod.Spec.NodeSelector[v1.LabelHostname]; want != "" {
		node = want
	}
	err := client.CoreV1().Pods(pod.Namespace).Bind(ctx, &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, UID: pod.UID},
		Target:     v1.ObjectReference{Kind: "Node", Name: node},
	}, metav1.CreateOptions{})
	switch {
	case err == nil:
		logger.Printf("bound %s/%s to %s", pod.Namespace, pod.Name, node)
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		// Bound or deleted meanwhile.
	default:
		logger.Printf("binding %s/%s to %s: %v", pod.Namespace, pod.Name, node, err)
	}
}

// runStandIn runs a component of a real cluster that the harness plays
// itself (the scheduler, a cloud's load balancer): the handler handle
// returns gets every object the informer of informerOf adds or updates,
// until Down. Its log is <name>.log in the cluster's directory.
func (cs *ClusterSet) runStandIn(c *Cluster, name string, informerOf func(informers.SharedInformerFactory) cache.SharedIndexInformer,
	opts []informers.SharedInformerOption, handle func(ctx context.Context, client kubernetes.Interface, logger *log.Logger) func(any)) error {
	logFile, err := os.Create(filepath.Join(c.dir, name+".log"))
	if err != nil {
		return err
	}
	logger := log.New(logFile, "", log.LstdFlags|log.Lmicroseconds)
	client, err := kubernetes.NewForConfig(c.API.RESTConfig())
	if err != nil {
		logFile.Close()
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, opts...)
	h := handle(ctx, client, logger)
	if _, err := informerOf(factory).AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    h,
		UpdateFunc: func(_, obj any) { h(obj) },
	}); err != nil {
		cancel()
		logFile.Close()
		return err
	}
	factory.Start(ctx.Done())
	cs.onDown(levelNode, func() {
		cancel()
		factory.Shutdown()
		logFile.Close()
	})
	return nil
}
