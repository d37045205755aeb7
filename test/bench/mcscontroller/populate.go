package main

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	"k8s.io/multiclusterservices/crds"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// prepare installs the CRDs, the cluster ID and the namespace.
func prepare(ctx context.Context, m *member) error {
	all, err := crds.All()
	if err != nil {
		return err
	}
	if err := crds.Install(ctx, apiextensionsclient.NewForConfigOrDie(m.cfg), all...); err != nil {
		return err
	}
	prop := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": aboutv1alpha1.SchemeGroupVersion.String(), "kind": "ClusterProperty",
		"metadata": map[string]any{"name": aboutv1alpha1.ClusterIDProperty},
		"spec":     map[string]any{"value": m.id},
	}}
	dyn := dynamic.NewForConfigOrDie(m.cfg)
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := dyn.Resource(aboutv1alpha1.Resource).Create(ctx, prop, metav1.CreateOptions{})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(500 * time.Millisecond)
	}
	_, err = m.kube.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	return err
}

func serviceName(i int) string { return fmt.Sprintf("svc-%04d", i) }

// clusterID names the i-th member as spreadsheets name columns: cluster-a
// to cluster-z, then cluster-aa, cluster-ab, ...
func clusterID(i int) string {
	name := ""
	for i++; i > 0; i = (i - 1) / 26 {
		name = string(rune('a'+(i-1)%26)) + name
	}
	return "cluster-" + name
}

func localSlice(m *member, i int, generation int) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: serviceName(i) + "-local", Namespace: namespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: serviceName(i), discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	for e := 0; e < *perService; e++ {
		// 10.<cluster>.<service/256>.<...>: unique per cluster and service;
		// the generation moves the first endpoint, which is the change
		// whose propagation is measured.
		host := (i%16)*16 + e + 1
		if e == 0 {
			host = 200 + generation%50
		}
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", m.index, i/16, host)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			// As the EndpointSlice controller writes it: the controller
			// mirrors only endpoints of Pods from a member whose nodes
			// say nothing of its pod ranges.
			TargetRef: &v1.ObjectReference{Kind: "Pod", Namespace: namespace, Name: fmt.Sprintf("%s-%d", serviceName(i), e)},
		})
	}
	return s
}

// populate creates the Services, their slices and their exports.
func populate(ctx context.Context, m *member) error {
	var g errgroup.Group
	g.SetLimit(32)
	for i := 0; i < *exports; i++ {
		g.Go(func() error {
			svc, err := m.kube.CoreV1().Services(namespace).Create(ctx, &v1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: serviceName(i)},
				Spec:       v1.ServiceSpec{Selector: map[string]string{"app": serviceName(i)}, Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}},
			}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			// Owned by its Service, as the EndpointSlice controller's are.
			s := localSlice(m, i, 0)
			s.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(svc, v1.SchemeGroupVersion.WithKind("Service"))}
			if _, err := m.kube.DiscoveryV1().EndpointSlices(namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
				return err
			}
			_, err = m.mcs.MulticlusterV1beta1().ServiceExports(namespace).Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: serviceName(i)}}, metav1.CreateOptions{})
			return err
		})
	}
	return g.Wait()
}
