package crds

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcscrd "sigs.k8s.io/mcs-api/config/crd"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
)

// The installed CRDs are mcs-api's plus exactly the KEP-5939 fields and
// ServiceExport's status.clusters (proposed for KEP-1645), in every
// served version, and nothing of mcs-api's own schema changes.
func TestInstalledCRDsAreMCSAPIsPlusClusterSelection(t *testing.T) {
	for _, tc := range []struct {
		installed, published func() (*apiextensionsv1.CustomResourceDefinition, error)
		added                []string
	}{
		{ServiceExport, MCSAPIServiceExport, []string{"spec.clusterSelectors", "status.clusters"}},
		{ServiceImport, MCSAPIServiceImport, []string{"spec.clusterSelectors", "status.clusterSelectorResults", "status.observedGeneration"}},
	} {
		got, err := tc.installed()
		if err != nil {
			t.Fatal(err)
		}
		want, err := tc.published()
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Spec.Versions) != 2 {
			t.Errorf("%s serves %d versions, want mcs-api's v1alpha1 and v1beta1", got.Name, len(got.Spec.Versions))
		}
		for i, v := range got.Spec.Versions {
			root := v.Schema.OpenAPIV3Schema
			var added []string
			for _, part := range []string{"spec", "status"} {
				p := root.Properties[part]
				for name := range p.Properties {
					if _, ok := want.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties[part].Properties[name]; !ok {
						added = append(added, part+"."+name)
						delete(p.Properties, name)
					}
				}
			}
			slices.Sort(added)
			if !slices.Equal(added, tc.added) {
				t.Errorf("%s %s adds %v, want %v", got.Name, v.Name, added, tc.added)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s without the added fields is not mcs-api's (-want +got):\n%s", got.Name, diff)
		}
	}
}

// The overlay schema is generated from apis/clusterselection/v1beta1: a
// field added to the types and not regenerated would be pruned.
func TestClusterSelectionCRDsMatchTheirTypes(t *testing.T) {
	for data, obj := range map[*[]byte]any{&clusterSelectionExportCRD: csv1beta1.ServiceExport{}, &clusterSelectionImportCRD: csv1beta1.ServiceImport{}} {
		crd, err := decode(*data)
		if err != nil {
			t.Fatal(err)
		}
		root := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties
		for _, part := range []string{"Spec", "Status"} {
			field, ok := reflect.TypeOf(obj).FieldByName(part)
			if !ok {
				continue
			}
			schema := root[strings.ToLower(part)]
			for i := 0; i < field.Type.NumField(); i++ {
				name, _, _ := strings.Cut(field.Type.Field(i).Tag.Get("json"), ",")
				if _, ok := schema.Properties[name]; !ok {
					t.Errorf("CRD %s has no %s.%s: run hack/update-codegen.sh", crd.Name, strings.ToLower(part), name)
				}
			}
			if len(schema.Properties) != field.Type.NumField() {
				t.Errorf("CRD %s %s has %d fields, the type %d: run hack/update-codegen.sh", crd.Name, part, len(schema.Properties), field.Type.NumField())
			}
		}
		if got := root["spec"].Properties["clusterSelectors"].MaxItems; got == nil || *got != csv1beta1.MaxClusterSelectors {
			t.Errorf("CRD %s: clusterSelectors maxItems %v, want %d", crd.Name, got, csv1beta1.MaxClusterSelectors)
		}
	}
}

func structural(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, version string) *structuralschema.Structural {
	t.Helper()
	for _, v := range crd.Spec.Versions {
		if v.Name != version {
			continue
		}
		internal := &apiextensions.JSONSchemaProps{}
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, internal, nil); err != nil {
			t.Fatal(err)
		}
		s, err := structuralschema.NewStructural(internal)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	t.Fatalf("%s has no version %s", crd.Name, version)
	return nil
}

// admit does to a written object what the apiserver's pruning does: drop
// what the schema does not know. (Validation is checked against a real
// apiserver in test/integration.)
func admit(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, version string, obj any) (map[string]any, error) {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := map[string]any{}
	if err := json.Unmarshal(data, &u); err != nil {
		t.Fatal(err)
	}
	pruning.Prune(u, structural(t, crd, version), true)
	return u, nil
}

func fullImport() *mcsv1beta1.ServiceImport {
	return &mcsv1beta1.ServiceImport{
		TypeMeta:   metav1.TypeMeta{APIVersion: "multicluster.x-k8s.io/v1beta1", Kind: "ServiceImport"},
		ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "ns", Labels: map[string]string{"a": "b"}},
		Spec: mcsv1beta1.ServiceImportSpec{
			Ports:                 []mcsv1beta1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, AppProtocol: ptr.To("http")}},
			IPs:                   []string{"242.0.0.1", "fd00::1"},
			Type:                  mcsv1beta1.ClusterSetIP,
			SessionAffinity:       v1.ServiceAffinityClientIP,
			SessionAffinityConfig: &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](30)}},
			IPFamilies:            []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol},
			InternalTrafficPolicy: ptr.To(v1.ServiceInternalTrafficPolicyLocal),
			TrafficDistribution:   ptr.To("PreferSameZone"),
		},
		Status: mcsv1beta1.ServiceImportStatus{
			Clusters:   []mcsv1beta1.ClusterStatus{{Cluster: "cluster-a"}},
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", Message: "m", LastTransitionTime: metav1.Unix(1, 0).Rfc3339Copy()}},
		},
	}
}

// mcs-api's own objects read back unchanged through the installed CRDs.
func TestMCSAPIObjectsRoundTrip(t *testing.T) {
	si, err := ServiceImport()
	if err != nil {
		t.Fatal(err)
	}
	se, err := ServiceExport()
	if err != nil {
		t.Fatal(err)
	}
	export := &mcsv1beta1.ServiceExport{
		TypeMeta:   metav1.TypeMeta{APIVersion: "multicluster.x-k8s.io/v1beta1", Kind: "ServiceExport"},
		ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "ns"},
		Spec:       mcsv1beta1.ServiceExportSpec{ExportedLabels: map[string]string{"x": "y"}, ExportedAnnotations: map[string]string{"p": "q"}},
		Status:     mcsv1beta1.ServiceExportStatus{Conditions: []metav1.Condition{{Type: "Valid", Status: metav1.ConditionTrue, Reason: "Valid", Message: "m", LastTransitionTime: metav1.Unix(1, 0).Rfc3339Copy()}}},
	}
	for _, version := range []string{"v1alpha1", "v1beta1"} {
		for _, tc := range []struct {
			crd     *apiextensionsv1.CustomResourceDefinition
			in, out any
		}{
			{si, fullImport(), &mcsv1beta1.ServiceImport{}},
			{se, export, &mcsv1beta1.ServiceExport{}},
		} {
			u, err := admit(t, tc.crd, version, tc.in)
			if err != nil {
				t.Fatalf("%s %s: %v", tc.crd.Name, version, err)
			}
			data, _ := json.Marshal(u)
			if err := json.Unmarshal(data, tc.out); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.in, tc.out); diff != "" {
				t.Errorf("%s %s changed an mcs-api object (-in +out):\n%s", tc.crd.Name, version, diff)
			}
		}
	}
}

// The KEP's fields survive the installed CRDs (mcs-api's would prune
// them), with the KEP's validation: at most 16 selectors, each with a
// propertySelector, atomic lists.
func TestClusterSelectionFieldsAreServed(t *testing.T) {
	si, _ := ServiceImport()
	published, _ := MCSAPIServiceImport()
	sel := csv1beta1.ClusterSelector{PropertySelector: &csv1beta1.PropertySelector{
		MatchProperties:  map[string]string{"region.topology.k8s.io": csv1beta1.SameAsImporter},
		MatchExpressions: []csv1beta1.PropertySelectorRequirement{{Key: "cluster.clusterset.k8s.io", Operator: csv1beta1.PropertySelectorOpIn, Values: []string{csv1beta1.SameAsImporter}}},
	}}
	obj := func(n int) map[string]any {
		base := fullImport()
		data, _ := json.Marshal(base)
		u := map[string]any{}
		_ = json.Unmarshal(data, &u)
		overlay := csv1beta1.ServiceImport{
			Spec:   csv1beta1.ServiceImportSpec{ClusterSelectors: slices.Repeat([]csv1beta1.ClusterSelector{sel}, n)},
			Status: csv1beta1.ServiceImportStatus{ObservedGeneration: 3, ClusterSelectorResults: []csv1beta1.ClusterSelectorResult{{Clusters: []string{"cluster-a"}}, {}}},
		}
		data, _ = json.Marshal(overlay)
		o := map[string]any{}
		_ = json.Unmarshal(data, &o)
		for _, part := range []string{"spec", "status"} {
			for k, v := range o[part].(map[string]any) {
				u[part].(map[string]any)[k] = v
			}
		}
		return u
	}
	for _, version := range []string{"v1alpha1", "v1beta1"} {
		u, err := admit(t, si, version, obj(16))
		if err != nil {
			t.Fatalf("%s: 16 selectors refused: %v", version, err)
		}
		data, _ := json.Marshal(u)
		var back csv1beta1.ServiceImport
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatal(err)
		}
		if len(back.Spec.ClusterSelectors) != 16 || back.Status.ObservedGeneration != 3 || len(back.Status.ClusterSelectorResults) != 2 ||
			!cmp.Equal(back.Spec.ClusterSelectors[0], sel) {
			t.Errorf("%s: the KEP's fields did not survive: %+v", version, back)
		}
		for _, v := range si.Spec.Versions {
			sels := v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["clusterSelectors"]
			if sels.MaxItems == nil || *sels.MaxItems != 16 || !slices.Equal(sels.Items.Schema.Required, []string{"propertySelector"}) ||
				sels.XListType == nil || *sels.XListType != "atomic" {
				t.Errorf("%s: clusterSelectors is not the KEP's: maxItems %v, required %v", v.Name, sels.MaxItems, sels.Items.Schema.Required)
			}
		}
		u, _ = admit(t, published, version, obj(1))
		if _, kept := u["spec"].(map[string]any)["clusterSelectors"]; kept {
			t.Errorf("%s: mcs-api's own CRD kept clusterSelectors; this test no longer shows why ours is needed", version)
		}
	}
}

var update = flag.Bool("update", false, "rewrite the generated kustomize patches of clusterselection/")

// deploy/crds adds the fields to mcs-api's published files with these
// patches; they must say what withClusterSelection does.
func TestKustomizePatchesAreGenerated(t *testing.T) {
	for file, in := range map[string][2][]byte{
		"clusterselection/serviceexports-patch.yaml": {mcscrd.ServiceExportCRD, clusterSelectionExportCRD},
		"clusterselection/serviceimports-patch.yaml": {mcscrd.ServiceImportCRD, clusterSelectionImportCRD},
	} {
		want, err := kustomizePatch(in[0], in[1])
		if err != nil {
			t.Fatal(err)
		}
		if *update {
			if err := os.WriteFile(file, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(file)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is stale (%v): run hack/update-codegen.sh", file, err)
		}
	}
}
