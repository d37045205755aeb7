package standin

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// writeMember brings one member's imports and MCS EndpointSlices in line
// with exports.
func writeMember(ctx context.Context, m *Member, exports map[string]*export) error {
	wantSlices := map[string]bool{}  // namespace/name
	wantImports := map[string]bool{} // namespace/name
	var errs []error
	for key, e := range exports {
		wantImports[key] = true
		imp, err := writeImport(ctx, m, e)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: ServiceImport %s: %w", m.id, key, err))
			continue
		}
		if imp == nil {
			continue
		}
		for _, s := range e.sources {
			for _, src := range s.slices {
				slice := importedSlice(e, s.member.id, &src, imp)
				wantSlices[slice.Namespace+"/"+slice.Name] = true
				if err := writeSlice(ctx, m, slice); err != nil {
					errs = append(errs, fmt.Errorf("%s: EndpointSlice %s/%s: %w", m.id, slice.Namespace, slice.Name, err))
				}
			}
		}
	}
	errs = append(errs, removeStale(ctx, m, wantImports, wantSlices))
	return errors.Join(errs...)
}

// writeImport creates or updates the member's ServiceImport for e. An IP
// already given is kept. It returns nil, nil where the namespace does not
// exist: as KEP-1645 says, a service is imported only there.
func writeImport(ctx context.Context, m *Member, e *export) (*mcsv1beta1.ServiceImport, error) {
	if _, err := m.Kube.CoreV1().Namespaces().Get(ctx, e.namespace, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	spec := mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPFamilies: []v1.IPFamily{v1.IPv4Protocol}}
	seen := map[string]bool{}
	var clusters []mcsv1beta1.ClusterStatus
	for _, s := range e.sources {
		if s.service.Spec.ClusterIP == v1.ClusterIPNone {
			spec.Type = mcsv1beta1.Headless
		}
		for _, p := range s.service.Spec.Ports {
			key := fmt.Sprintf("%s/%s/%d", p.Name, p.Protocol, p.Port)
			if !seen[key] {
				seen[key] = true
				spec.Ports = append(spec.Ports, mcsv1beta1.ServicePort{Name: p.Name, Protocol: p.Protocol, AppProtocol: p.AppProtocol, Port: p.Port})
			}
		}
		clusters = append(clusters, mcsv1beta1.ClusterStatus{Cluster: s.member.id})
	}
	api := m.MCS.MulticlusterV1beta1().ServiceImports(e.namespace)
	existing, err := api.Get(ctx, e.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if spec.Type == mcsv1beta1.ClusterSetIP {
			spec.IPs = []string{vipFor(e.namespace, e.name)}
		}
		imp := &mcsv1beta1.ServiceImport{
			ObjectMeta: metav1.ObjectMeta{Name: e.name, Namespace: e.namespace, Labels: map[string]string{labelStandIn: "true", mcsproxy.LabelImportManagedBy: managedBy}},
			Spec:       spec,
			Status:     mcsv1beta1.ServiceImportStatus{Clusters: clusters},
		}
		return api.Create(ctx, imp, metav1.CreateOptions{})
	}
	if err != nil {
		return nil, err
	}
	if spec.Type == mcsv1beta1.ClusterSetIP {
		spec.IPs = existing.Spec.IPs
		if len(spec.IPs) == 0 {
			spec.IPs = []string{vipFor(e.namespace, e.name)}
		}
	}
	if apiequality.Semantic.DeepEqual(existing.Spec, spec) && apiequality.Semantic.DeepEqual(existing.Status.Clusters, clusters) {
		return existing, nil
	}
	update := existing.DeepCopy()
	update.Spec, update.Status.Clusters = spec, clusters
	return api.Update(ctx, update, metav1.UpdateOptions{})
}

// importedSlice is the copy, for one member, of an EndpointSlice of the
// exporting cluster sourceID, owned by the member's ServiceImport.
func importedSlice(e *export, sourceID string, src *discoveryv1.EndpointSlice, imp *mcsv1beta1.ServiceImport) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:      sliceName(e.name, sourceID, src.Name),
			Namespace: e.namespace,
			Labels:    labelsFor(e.name, sourceID),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: mcsv1beta1.GroupVersion.String(),
				Kind:       "ServiceImport",
				Name:       imp.Name,
				UID:        imp.UID,
			}},
		},
		AddressType: src.AddressType,
		Endpoints:   src.Endpoints,
		Ports:       src.Ports,
	}
}

func writeSlice(ctx context.Context, m *Member, slice *discoveryv1.EndpointSlice) error {
	api := m.Kube.DiscoveryV1().EndpointSlices(slice.Namespace)
	existing, err := api.Get(ctx, slice.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = api.Create(ctx, slice, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	if apiequality.Semantic.DeepEqual(existing.Endpoints, slice.Endpoints) &&
		apiequality.Semantic.DeepEqual(existing.Ports, slice.Ports) &&
		apiequality.Semantic.DeepEqual(existing.Labels, slice.Labels) &&
		apiequality.Semantic.DeepEqual(existing.OwnerReferences, slice.OwnerReferences) {
		return nil
	}
	slice.ResourceVersion = existing.ResourceVersion
	_, err = api.Update(ctx, slice, metav1.UpdateOptions{})
	return err
}

// removeStale deletes the MCS EndpointSlices and the stand-in's
// ServiceImports that no export calls for any more.
func removeStale(ctx context.Context, m *Member, wantImports, wantSlices map[string]bool) error {
	var errs []error
	slices, err := m.Kube.DiscoveryV1().EndpointSlices(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelManagedBy + "=" + managedBy + "," + labelServiceName,
	})
	if err != nil {
		return err
	}
	for _, s := range slices.Items {
		if !wantSlices[s.Namespace+"/"+s.Name] {
			err := m.Kube.DiscoveryV1().EndpointSlices(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
	}
	imports, err := m.MCS.MulticlusterV1beta1().ServiceImports(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: labelStandIn})
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, imp := range imports.Items {
		if !wantImports[imp.Namespace+"/"+imp.Name] {
			err := m.MCS.MulticlusterV1beta1().ServiceImports(imp.Namespace).Delete(ctx, imp.Name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
