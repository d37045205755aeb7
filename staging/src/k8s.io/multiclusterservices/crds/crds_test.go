package crds

import "testing"

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
