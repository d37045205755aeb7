// Package standin is a deliberately naive stand-in for the mcs-controller,
// for the demo and tests when _output/bin/mcs-controller is not built (or
// when a test wants imports without the controller in the loop). Each Sync
// lists the ServiceExports of every member cluster and writes, into every
// member, a ServiceImport per exported name and a copy of each exporting
// cluster's EndpointSlices of the Service, labelled as KEP-1645 says, so
// that kube-proxy and CoreDNS see what the real controller would write.
//
// What it does not do, unlike cmd/mcs-controller: validate exports, detect
// conflicts, set conditions, watch (it polls), keep endpoints through a
// source cluster's outage (leases), or allocate clusterset IPs with a real
// allocator (it hashes the name into 10.250.0.0/16 and keeps an IP once
// given).
package standin

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsclientset "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"
)

const (
	// labelStandIn marks the ServiceImports the stand-in wrote, so that it
	// deletes only its own when an export goes.
	labelStandIn = "clusterset.harness/stand-in"
	// labelSourceCluster and labelServiceName are KEP-1645's labels.
	labelSourceCluster = "multicluster.kubernetes.io/source-cluster"
	labelServiceName   = "multicluster.kubernetes.io/service-name"
)

// Member is a member cluster, reached through one kubeconfig context.
type Member struct {
	Context string
	Kube    kubernetes.Interface
	MCS     mcsclientset.Interface
	Dynamic dynamic.Interface
	// id is the cluster ID, read from its ClusterProperty.
	id string
}

// MembersFromKubeconfig returns one member per context of the kubeconfig
// at path, the shape the mcs-controller takes.
func MembersFromKubeconfig(path string) ([]*Member, error) {
	raw, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, err
	}
	var names []string
	for name := range raw.Contexts {
		names = append(names, name)
	}
	sort.Strings(names)
	var members []*Member
	for _, name := range names {
		cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, name, nil, nil).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("context %s: %w", name, err)
		}
		m := &Member{Context: name}
		if m.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
			return nil, err
		}
		if m.MCS, err = mcsclientset.NewForConfig(cfg); err != nil {
			return nil, err
		}
		if m.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
			return nil, err
		}
		members = append(members, m)
	}
	return members, nil
}

// Run syncs every interval until ctx is done, logging failures to logf.
func Run(ctx context.Context, members []*Member, interval time.Duration, logf func(string, ...any)) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := Sync(ctx, members); err != nil && ctx.Err() == nil {
			logf("stand-in exporter: %v", err)
		}
	}, interval)
}

// export is one exported name and the clusters it is exported from.
type export struct {
	namespace, name string
	sources         []source
}

type source struct {
	member  *Member
	service *v1.Service
	slices  []discoveryv1.EndpointSlice
}

// Sync makes one pass: imports and slices for every current export, and
// removal of those whose export went away.
func Sync(ctx context.Context, members []*Member) error {
	for _, m := range members {
		if m.id == "" {
			id, err := clusterID(ctx, m)
			if err != nil {
				return fmt.Errorf("context %s: cluster ID: %w", m.Context, err)
			}
			m.id = id
		}
	}
	exports, err := collect(ctx, members)
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range members {
		errs = append(errs, writeMember(ctx, m, exports))
	}
	return errors.Join(errs...)
}

// clusterID reads the member's cluster.clusterset.k8s.io ClusterProperty.
func clusterID(ctx context.Context, m *Member) (string, error) {
	obj, err := m.Dynamic.Resource(aboutv1alpha1.Resource).Get(ctx, aboutv1alpha1.ClusterIDProperty, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	spec, _ := obj.Object["spec"].(map[string]any)
	id, _ := spec["value"].(string)
	if id == "" {
		return "", errors.New("empty ClusterProperty " + aboutv1alpha1.ClusterIDProperty)
	}
	return id, nil
}

// collect gathers every ServiceExport whose Service exists, with the
// Service's EndpointSlices, keyed by namespace/name.
func collect(ctx context.Context, members []*Member) (map[string]*export, error) {
	exports := map[string]*export{}
	for _, m := range members {
		list, err := m.MCS.MulticlusterV1beta1().ServiceExports(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("%s: listing ServiceExports: %w", m.id, err)
		}
		for _, se := range list.Items {
			svc, err := m.Kube.CoreV1().Services(se.Namespace).Get(ctx, se.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, err
			}
			if svc.Spec.Type == v1.ServiceTypeExternalName {
				continue
			}
			slices, err := m.Kube.DiscoveryV1().EndpointSlices(se.Namespace).List(ctx, metav1.ListOptions{
				LabelSelector: discoveryv1.LabelServiceName + "=" + se.Name,
			})
			if err != nil {
				return nil, err
			}
			key := se.Namespace + "/" + se.Name
			if exports[key] == nil {
				exports[key] = &export{namespace: se.Namespace, name: se.Name}
			}
			exports[key].sources = append(exports[key].sources, source{member: m, service: svc, slices: slices.Items})
		}
	}
	return exports, nil
}

// vipFor derives a clusterset IP from the name: stable across runs and
// clusters without any shared state.
func vipFor(namespace, name string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	n := binary.BigEndian.Uint16(sum[:2])
	if byte(n) == 0 || byte(n) == 255 {
		n ^= 1
	}
	return fmt.Sprintf("10.250.%d.%d", byte(n>>8), byte(n))
}

func sliceName(name, clusterID, sourceSlice string) string {
	sum := sha256.Sum256([]byte(sourceSlice))
	return fmt.Sprintf("%s-%s-%s", name, clusterID, hex.EncodeToString(sum[:])[:6])
}

var managedBy = mcsproxy.DefaultManagedBy

// labelsFor are the labels of an MCS EndpointSlice.
func labelsFor(name, clusterID string) map[string]string {
	return map[string]string{
		labelServiceName:           name,
		labelSourceCluster:         clusterID,
		discoveryv1.LabelManagedBy: managedBy,
	}
}
