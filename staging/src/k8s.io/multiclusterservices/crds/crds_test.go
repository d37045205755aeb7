package crds

import (
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	catalogv1alpha1 "k8s.io/multiclusterservices/apis/catalog/v1alpha1"
	hubv1alpha1 "k8s.io/multiclusterservices/apis/hub/v1alpha1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func TestEmbeddedCRDs(t *testing.T) {
	si, err := ServiceImport()
	if err != nil {
		t.Fatal(err)
	}
	se, err := ServiceExport()
	if err != nil {
		t.Fatal(err)
	}
	if si.Name != "serviceimports.multicluster.x-k8s.io" || se.Name != "serviceexports.multicluster.x-k8s.io" {
		t.Errorf("unexpected CRD names %q, %q", si.Name, se.Name)
	}
	storage := ""
	for _, v := range si.Spec.Versions {
		if v.Storage {
			storage = v.Name
		}
	}
	if storage != "v1beta1" {
		t.Errorf("ServiceImport storage version is %q; kube-proxy prefers v1beta1", storage)
	}
}

func TestAll(t *testing.T) {
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || all[2].Name != "clusterproperties.about.k8s.io" || all[2].Spec.Scope != "Cluster" {
		t.Errorf("unexpected CRDs: %d, last %q", len(all), all[len(all)-1].Name)
	}
}

// The catalog's CRDs are generated from its Go types (hack/update-codegen.sh):
// a field added to a type and not to its CRD would be pruned by every
// apiserver, so every JSON field of spec and status must be in the schema.
func TestCatalogCRDsMatchTheirTypes(t *testing.T) {
	all, err := Catalog()
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]any{
		"GlobalService": catalogv1alpha1.GlobalService{}, "ServiceBinding": catalogv1alpha1.ServiceBinding{}, "GlobalServiceImport": catalogv1alpha1.GlobalServiceImport{},
	}
	for _, crd := range all {
		obj, ok := types[crd.Spec.Names.Kind]
		if !ok || crd.Spec.Group != catalogv1alpha1.GroupName || crd.Spec.Scope != apiextensionsv1.NamespaceScoped || len(crd.Spec.Versions) != 1 {
			t.Errorf("CRD %s: kind %s group %s scope %s", crd.Name, crd.Spec.Names.Kind, crd.Spec.Group, crd.Spec.Scope)
			continue
		}
		delete(types, crd.Spec.Names.Kind)
		v := crd.Spec.Versions[0]
		if v.Name != catalogv1alpha1.SchemeGroupVersion.Version || v.Subresources == nil || v.Subresources.Status == nil || len(v.AdditionalPrinterColumns) < 3 {
			t.Errorf("CRD %s: version %s, status subresource %v, %d printer columns", crd.Name, v.Name, v.Subresources, len(v.AdditionalPrinterColumns))
		}
		root := v.Schema.OpenAPIV3Schema.Properties
		for _, part := range []string{"Spec", "Status"} {
			field, _ := reflect.TypeOf(obj).FieldByName(part)
			schema := root[strings.ToLower(part)]
			for i := 0; i < field.Type.NumField(); i++ {
				name, _, _ := strings.Cut(field.Type.Field(i).Tag.Get("json"), ",")
				if _, ok := schema.Properties[name]; !ok {
					t.Errorf("CRD %s has no %s.%s: run hack/update-codegen.sh", crd.Name, strings.ToLower(part), name)
				}
			}
		}
	}
	if len(types) > 0 {
		t.Errorf("no CRD for %v", types)
	}
}

// The hub's CRDs are generated from their Go types: every field the
// agent publishes and the planner plans must be in the schema (the
// apiserver prunes the rest): the Service's spec whole, as the planner
// reads it, and the import's spec whole, as every agent writes it.
func TestHubCRDsMatchTheirTypes(t *testing.T) {
	hub, err := Hub()
	if err != nil {
		t.Fatal(err)
	}
	type field struct {
		path []string
		typ  reflect.Type
	}
	want := map[string][]field{
		"memberexports.hub.multiclusterservices.k8s.io": {
			{nil, reflect.TypeFor[hubv1alpha1.MemberExportSpec]()},
			{[]string{"serviceSpec"}, reflect.TypeFor[v1.ServiceSpec]()},
		},
		"memberclusters.hub.multiclusterservices.k8s.io": {
			{nil, reflect.TypeFor[hubv1alpha1.MemberClusterSpec]()},
			{[]string{"namespaces", "items"}, reflect.TypeFor[hubv1alpha1.MemberNamespace]()},
		},
		"serviceplans.hub.multiclusterservices.k8s.io": {
			{nil, reflect.TypeFor[hubv1alpha1.ServicePlanSpec]()},
			{[]string{"import"}, reflect.TypeFor[hubv1alpha1.PlannedImport]()},
			{[]string{"import", "spec"}, reflect.TypeFor[mcsv1beta1.ServiceImportSpec]()},
		},
	}
	if len(hub) != len(want) {
		t.Fatalf("Hub() gives %d CRDs, want %d", len(hub), len(want))
	}
	for _, crd := range hub {
		fields, ok := want[crd.Name]
		if !ok || crd.Spec.Group != hubv1alpha1.GroupName ||
			crd.Spec.Scope != apiextensionsv1.NamespaceScoped || len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != hubv1alpha1.SchemeGroupVersion.Version {
			t.Fatalf("CRD %s: group %s, scope %s, versions %+v", crd.Name, crd.Spec.Group, crd.Spec.Scope, crd.Spec.Versions)
		}
		for _, f := range fields {
			schema := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
			for _, p := range f.path {
				if p == "items" {
					schema = *schema.Items.Schema
					continue
				}
				schema = schema.Properties[p]
			}
			for i := 0; i < f.typ.NumField(); i++ {
				name, _, _ := strings.Cut(f.typ.Field(i).Tag.Get("json"), ",")
				if _, ok := schema.Properties[name]; !ok {
					t.Errorf("CRD %s has no %s field %s: run hack/update-codegen.sh", crd.Name, f.typ.Name(), name)
				}
			}
		}
	}
}

// The ClusterProfile CRD is generated from apis/inventory/v1alpha1; it
// must hold every field of the published CRD (cluster-inventory-api
// v1alpha1), or the apiserver would prune what a cluster manager writes
// and tests would pass against a narrower API than the real one.
func TestClusterProfileCRDHasThePublishedFields(t *testing.T) {
	crd, err := ClusterProfile()
	if err != nil {
		t.Fatal(err)
	}
	if crd.Name != "clusterprofiles.multicluster.x-k8s.io" || crd.Spec.Scope != apiextensionsv1.NamespaceScoped || len(crd.Spec.Versions) != 1 ||
		crd.Spec.Versions[0].Name != "v1alpha1" || crd.Spec.Versions[0].Subresources == nil || crd.Spec.Versions[0].Subresources.Status == nil {
		t.Fatalf("CRD %s: scope %s, versions %+v", crd.Name, crd.Spec.Scope, crd.Spec.Versions)
	}
	root := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	cluster := []string{"server", "tls-server-name", "insecure-skip-tls-verify", "certificate-authority", "certificate-authority-data", "proxy-url", "disable-compression", "extensions"}
	paths := map[string][]string{
		"spec":                                 {"displayName", "clusterManager"},
		"spec.clusterManager":                  {"name"},
		"status":                               {"conditions", "version", "properties", "accessProviders", "credentialProviders"},
		"status.version":                       {"kubernetes"},
		"status.properties[]":                  {"name", "value", "lastObservedTime"},
		"status.accessProviders[]":             {"name", "cluster"},
		"status.accessProviders[].cluster":     cluster,
		"status.credentialProviders[].cluster": cluster,
		"status.accessProviders[].cluster.extensions[]": {"name", "extension"},
	}
	for path, fields := range paths {
		s := root
		for _, step := range strings.Split(path, ".") {
			name, isList := strings.CutSuffix(step, "[]")
			p, ok := s.Properties[name]
			if !ok {
				t.Fatalf("no %s in the schema (at %s)", path, name)
			}
			s = &p
			if isList {
				s = s.Items.Schema
			}
		}
		for _, f := range fields {
			if _, ok := s.Properties[f]; !ok {
				t.Errorf("%s has no field %s", path, f)
			}
		}
	}
	ext := root.Properties["status"].Properties["accessProviders"].Items.Schema.Properties["cluster"].Properties["extensions"].Items.Schema.Properties["extension"]
	if ext.XPreserveUnknownFields == nil || !*ext.XPreserveUnknownFields || ext.XEmbeddedResource {
		t.Errorf("an extension must keep any fields, as published: %+v", ext)
	}
}
