// Package topology finds the member clusters of a clusterset: one
// kubeconfig context per member, each named by the cluster ID in its
// ClusterProperty "cluster.clusterset.k8s.io" (KEP-2149).
package topology

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	"k8s.io/multiclusterservices/crdgate"
)

// Member is one member cluster.
type Member struct {
	// Context is the kubeconfig context the member was given as, or
	// secret/<namespace>/<name> for a member listed by a Secret.
	Context string
	// ClusterID is the member's cluster ID.
	ClusterID string
	// Config reaches the member's apiserver.
	Config *rest.Config
}

// Contexts returns the REST configuration of each named context of the
// kubeconfig, or of every context (sorted by name) when names is empty.
func Contexts(kubeconfig string, names []string) (map[string]*rest.Config, []string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	raw, err := rules.Load()
	if err != nil {
		return nil, nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	if len(names) == 0 {
		for name := range raw.Contexts {
			names = append(names, name)
		}
		slices.Sort(names)
	}
	if len(names) == 0 {
		return nil, nil, errors.New("the kubeconfig has no contexts; give one context per member cluster")
	}
	out := map[string]*rest.Config{}
	for _, name := range names {
		if _, ok := raw.Contexts[name]; !ok {
			return nil, nil, fmt.Errorf("context %q is not in the kubeconfig", name)
		}
		if _, dup := out[name]; dup {
			return nil, nil, fmt.Errorf("context %q is listed twice", name)
		}
		cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, name, &clientcmd.ConfigOverrides{}, rules).ClientConfig()
		if err != nil {
			return nil, nil, fmt.Errorf("context %q: %w", name, err)
		}
		out[name] = cfg
	}
	return out, names, nil
}

// Context returns the REST configuration of the named context of the
// kubeconfig, or of its current context when name is empty.
func Context(kubeconfig, name string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: name}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("context %q: %w", name, err)
	}
	return cfg, nil
}

// UnreachableError is why a member's cluster ID could not be read: its
// API did not answer (as opposed to answering without a usable ID).
type UnreachableError struct {
	Timeout time.Duration
	Err     error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot read the cluster ID within %s: %v", e.Timeout, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// Resolve reads the cluster ID of every context, retrying a member that
// cannot be reached until timeout. A member still unreachable then is
// returned in unreachable, by context name: the clusterset works without it
// until it answers. A member that answers without a usable cluster ID (none,
// one that cannot label an EndpointSlice, or a ClusterProperty the
// controller may not read) is returned in failed, by context name, with
// why. Nothing a member answers is an error of Resolve: what one member
// says of itself never decides whether the clusterset's control plane
// runs. Whether an ID is another member's too is the inventory's to
// settle (inventory.CheckContextIDs).
func Resolve(ctx context.Context, configs map[string]*rest.Config, order []string, timeout time.Duration) (members []Member, unreachable []string, failed map[string]error) {
	logger := klog.FromContext(ctx)
	failed = map[string]error{}
	for _, name := range order {
		id, err := ClusterID(ctx, configs[name], timeout)
		var down *UnreachableError
		switch {
		case errors.As(err, &down):
			logger.Error(err, "Member cluster unreachable", "context", name)
			unreachable = append(unreachable, name)
			continue
		case err != nil:
			logger.Error(err, "Member cluster has no cluster ID it may be served as", "context", name)
			failed[name] = err
			continue
		}
		members = append(members, Member{Context: name, ClusterID: id, Config: configs[name]})
		logger.Info("Member cluster", "context", name, "clusterID", id)
	}
	return members, unreachable, failed
}

// ErrNoClusterID is why a member that answers has no cluster ID: its
// ClusterProperty (or the CRD) is missing. Such a cluster cannot be a
// member (KEP-2149).
var ErrNoClusterID = errors.New("no cluster ID")

// invalidClusterID is a ClusterProperty that holds no valid cluster ID:
// ErrNoClusterID to callers, said in the words of the reader's own error
// ("invalid cluster ID: ...") rather than both prefixes.
type invalidClusterID struct{ error }

func (e invalidClusterID) Is(target error) bool { return target == ErrNoClusterID }
func (e invalidClusterID) Unwrap() error        { return e.error }

// ClusterID reads a member's cluster ID, retrying while its API does not
// answer, until timeout: then the error is an *UnreachableError.
func ClusterID(ctx context.Context, cfg *rest.Config, timeout time.Duration) (string, error) {
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return "", err
	}
	var id string
	var lastErr error
	err = wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		// The version is asked again at every reading: a member may
		// move its CRD to another between two.
		var obj *unstructured.Unstructured
		resource, err := crdgate.Resource(disco, aboutv1alpha1.Resource, aboutv1alpha1.Versions)
		if err == nil {
			obj, err = client.Resource(resource).Get(ctx, aboutv1alpha1.ClusterIDProperty, metav1.GetOptions{})
		}
		switch {
		case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
			// Either the CRD or the property is missing: nothing to wait for.
			return false, fmt.Errorf("%w: ClusterProperty %q (clusterproperties.about.k8s.io) not found; create it, e.g. kubectl apply -f - <<<'{\"apiVersion\":\"about.k8s.io/v1alpha1\",\"kind\":\"ClusterProperty\",\"metadata\":{\"name\":\"%s\"},\"spec\":{\"value\":\"<cluster-id>\"}}'", ErrNoClusterID, aboutv1alpha1.ClusterIDProperty, aboutv1alpha1.ClusterIDProperty)
		case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
			return false, fmt.Errorf("cannot read ClusterProperty %q: %w (see kind-config/mcs-controller-rbac.yaml)", aboutv1alpha1.ClusterIDProperty, err)
		case err != nil:
			lastErr = err
			return false, nil
		}
		id, err = aboutv1alpha1.ClusterIDOf(obj)
		if err != nil {
			return false, invalidClusterID{err}
		}
		return true, nil
	})
	if err != nil {
		if lastErr != nil && wait.Interrupted(err) {
			return "", &UnreachableError{Timeout: timeout, Err: lastErr}
		}
		return "", err
	}
	return id, nil
}

// PropertiesResource is the ClusterProperty resource in the newest
// version the member of cfg serves (aboutv1alpha1.Versions): about-api's
// v1beta1 where its CRD serves it, v1alpha1 otherwise, and v1alpha1 when
// it serves neither (reading it then says that the CRD is missing).
func PropertiesResource(cfg *rest.Config) (schema.GroupVersionResource, error) {
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return schema.GroupVersionResource{}, err
	}
	return crdgate.Resource(disco, aboutv1alpha1.Resource, aboutv1alpha1.Versions)
}
