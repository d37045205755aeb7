package mcs

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// TestPlanHoldsEachSelectorOutcomeOnce: a plan's cluster selector
// results grow with the members plus the distinct outcomes, not with
// members × sources: 250 importers in two regions, over 250 sources, are
// two outcomes (and one for the importer whose properties are unknown),
// and every importer reads its own back.
func TestPlanHoldsEachSelectorOutcomeOnce(t *testing.T) {
	eu, us := []string{}, []string{}
	d := &desiredState{
		Import:          &mcsv1beta1.ServiceImport{Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP}},
		SelectorResults: map[string]selectorOutcome{},
	}
	for i := range 250 {
		id := fmt.Sprintf("cluster-%03d", i)
		d.Clusters = append(d.Clusters, id)
		if i%2 == 0 {
			eu = append(eu, id)
		} else {
			us = append(us, id)
		}
	}
	for i, id := range d.Clusters {
		region := eu
		if i%2 == 1 {
			region = us
		}
		d.SelectorResults[id] = selectorOutcome{Results: []csv1beta1.ClusterSelectorResult{{Clusters: region}}}
	}
	d.SelectorResults["cluster-new"] = selectorOutcome{Failed: "the cluster properties of cluster-new are not known yet"}

	sp, _ := hubPlanOf("demo", "web", d)
	if got := len(sp.Spec.Import.SelectorResults); got != 3 {
		t.Fatalf("the plan holds %d selector outcomes for 251 importers, want 3 (eu, us, unknown)", got)
	}
	back, err := desiredOfHubPlan(sp, nil, "m", func(string, v1.ServiceType) *v1.Service { return nil })
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range d.SelectorResults {
		got, err := back.selectorResultsFor(id)
		switch {
		case want.Failed != "":
			if err == nil || err.Error() != want.Failed {
				t.Errorf("%s reads %v, %v; want the failure %q", id, got, err, want.Failed)
			}
		case err != nil || fmt.Sprint(got) != fmt.Sprint(want.Results):
			t.Errorf("%s reads %v, %v; want %v", id, got, err, want.Results)
		}
	}
	if _, err := back.selectorResultsFor("cluster-absent"); err == nil {
		t.Errorf("a member the plan has no outcome for reads results")
	}
}
