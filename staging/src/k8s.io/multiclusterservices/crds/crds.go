// Package crds provides the CustomResourceDefinitions of the MCS API, as
// published by sigs.k8s.io/mcs-api, and installs them.
package crds

import (
	"context"
	_ "embed" // the ClusterProperty CRD manifest
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	mcscrd "sigs.k8s.io/mcs-api/config/crd"
	"sigs.k8s.io/yaml"
)

//go:embed clusterproperty.yaml
var clusterPropertyCRD []byte

// ClusterProperty returns the ClusterProperty CRD (KEP-2149).
func ClusterProperty() (*apiextensionsv1.CustomResourceDefinition, error) {
	return decode(clusterPropertyCRD)
}

//go:embed catalog/catalog.multiclusterservices.k8s.io_globalservices.yaml
var globalServiceCRD []byte

//go:embed catalog/catalog.multiclusterservices.k8s.io_servicebindings.yaml
var serviceBindingCRD []byte

//go:embed catalog/catalog.multiclusterservices.k8s.io_globalserviceimports.yaml
var globalServiceImportCRD []byte

// Catalog returns the CRDs of the service catalog, which only the hub
// needs: GlobalService, ServiceBinding and GlobalServiceImport
// (generated from apis/catalog/v1alpha1 by hack/update-codegen.sh).
func Catalog() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, data := range [][]byte{globalServiceCRD, serviceBindingCRD, globalServiceImportCRD} {
		crd, err := decode(data)
		if err != nil {
			return nil, err
		}
		out = append(out, crd)
	}
	return out, nil
}

//go:embed hub/hub.multiclusterservices.k8s.io_memberexports.yaml
var memberExportCRD []byte

//go:embed hub/hub.multiclusterservices.k8s.io_memberclusters.yaml
var memberClusterCRD []byte

//go:embed hub/hub.multiclusterservices.k8s.io_serviceplans.yaml
var servicePlanCRD []byte

// Hub returns the CRDs of pull mode's hub, which only the hub needs:
// MemberExport and MemberCluster, which members publish, and ServicePlan,
// which the planner writes (generated from apis/hub/v1alpha1 by
// hack/update-codegen.sh).
func Hub() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, raw := range [][]byte{memberExportCRD, memberClusterCRD, servicePlanCRD} {
		crd, err := decode(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, crd)
	}
	return out, nil
}

//go:embed inventory/multicluster.x-k8s.io_clusterprofiles.yaml
var clusterProfileCRD []byte

// ClusterProfile returns the ClusterProfile CRD of the Cluster Inventory
// API (KEP-4322), which only a hub holding an inventory needs; generated
// from apis/inventory/v1alpha1 by hack/update-codegen.sh, for tests and
// for hubs whose cluster manager does not install it.
func ClusterProfile() (*apiextensionsv1.CustomResourceDefinition, error) {
	return decode(clusterProfileCRD)
}

// All returns the CRDs a clusterset member needs: ServiceExport,
// ServiceImport and ClusterProperty.
func All() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, get := range []func() (*apiextensionsv1.CustomResourceDefinition, error){ServiceExport, ServiceImport, ClusterProperty} {
		crd, err := get()
		if err != nil {
			return nil, err
		}
		out = append(out, crd)
	}
	return out, nil
}

// ServiceImport returns the ServiceImport CRD this project installs:
// mcs-api's, plus the fields of cluster selection (KEP-5939, alpha) in
// every served version (WithClusterSelection).
func ServiceImport() (*apiextensionsv1.CustomResourceDefinition, error) {
	return withClusterSelection(mcscrd.ServiceImportCRD, clusterSelectionImportCRD)
}

// ServiceExport returns the ServiceExport CRD this project installs:
// mcs-api's, plus the fields of cluster selection (KEP-5939, alpha) in
// every served version (WithClusterSelection).
func ServiceExport() (*apiextensionsv1.CustomResourceDefinition, error) {
	return withClusterSelection(mcscrd.ServiceExportCRD, clusterSelectionExportCRD)
}

// MCSAPIServiceImport and MCSAPIServiceExport return the CRDs exactly as
// sigs.k8s.io/mcs-api publishes them, without cluster selection.
func MCSAPIServiceImport() (*apiextensionsv1.CustomResourceDefinition, error) {
	return decode(mcscrd.ServiceImportCRD)
}

// MCSAPIServiceExport: see MCSAPIServiceImport.
func MCSAPIServiceExport() (*apiextensionsv1.CustomResourceDefinition, error) {
	return decode(mcscrd.ServiceExportCRD)
}

func decode(data []byte) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		return nil, fmt.Errorf("decoding CRD: %w", err)
	}
	return crd, nil
}

// Install creates or updates each CRD and waits until all are established.
func Install(ctx context.Context, client apiextensionsclient.Interface, crds ...*apiextensionsv1.CustomResourceDefinition) error {
	api := client.ApiextensionsV1().CustomResourceDefinitions()
	for _, crd := range crds {
		_, err := api.Create(ctx, crd, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			existing, getErr := api.Get(ctx, crd.Name, metav1.GetOptions{})
			if getErr != nil {
				return getErr
			}
			update := crd.DeepCopy()
			update.ResourceVersion = existing.ResourceVersion
			_, err = api.Update(ctx, update, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("installing CRD %s: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			got, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not established: %w", crd.Name, err)
		}
	}
	return nil
}
