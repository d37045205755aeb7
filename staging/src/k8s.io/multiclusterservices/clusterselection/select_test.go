package clusterselection

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
)

const (
	idKey     = "cluster.clusterset.k8s.io"
	regionKey = "region.topology.k8s.io"
	same      = csv1beta1.SameAsImporter
)

func cluster(id string, kv ...string) Properties {
	p := map[string]string{idKey: id}
	for i := 0; i+1 < len(kv); i += 2 {
		p[kv[i]] = kv[i+1]
	}
	return Properties{ID: id, Properties: p}
}

// Story 1 of the KEP, on three clusters in two regions, plus one cluster
// with a GPU tier and one without a region.
var clusterset = []Properties{
	cluster("cluster-a", regionKey, "eu", "gpu-tier.example.com", "high"),
	cluster("cluster-b", regionKey, "eu"),
	cluster("cluster-c", regionKey, "us", "gpu-tier.example.com", "low"),
	cluster("cluster-d"),
}

func props(m map[string]string) csv1beta1.ClusterSelector {
	return csv1beta1.ClusterSelector{PropertySelector: &csv1beta1.PropertySelector{MatchProperties: m}}
}

func expr(key string, op csv1beta1.PropertySelectorOperator, values ...string) csv1beta1.ClusterSelector {
	return csv1beta1.ClusterSelector{PropertySelector: &csv1beta1.PropertySelector{
		MatchExpressions: []csv1beta1.PropertySelectorRequirement{{Key: key, Operator: op, Values: values}},
	}}
}

func TestResolve(t *testing.T) {
	in := csv1beta1.PropertySelectorOpIn
	for _, tc := range []struct {
		name      string
		selectors []csv1beta1.ClusterSelector
		importer  Properties
		want      [][]string
		invalid   bool
	}{{
		name:      "story 1: own cluster, then own region",
		selectors: []csv1beta1.ClusterSelector{expr(idKey, in, same), props(map[string]string{regionKey: same})},
		importer:  clusterset[1],
		want:      [][]string{{"cluster-b"}, {"cluster-a", "cluster-b"}},
	}, {
		name:      "story 1 from the other region",
		selectors: []csv1beta1.ClusterSelector{expr(idKey, in, same), props(map[string]string{regionKey: same})},
		importer:  clusterset[2],
		want:      [][]string{{"cluster-c"}, {"cluster-c"}},
	}, {
		name:      "importer without the property: that selector matches nothing, the others still do",
		selectors: []csv1beta1.ClusterSelector{props(map[string]string{regionKey: same}), expr(idKey, in, same)},
		importer:  clusterset[3],
		want:      [][]string{nil, {"cluster-d"}},
	}, {
		name:      "a placeholder among other values of NotIn, missing on the importer: nothing",
		selectors: []csv1beta1.ClusterSelector{expr(regionKey, csv1beta1.PropertySelectorOpNotIn, "us", same)},
		importer:  clusterset[3],
		want:      [][]string{nil},
	}, {
		name:      "NotIn own region also matches clusters without a region",
		selectors: []csv1beta1.ClusterSelector{expr(regionKey, csv1beta1.PropertySelectorOpNotIn, same)},
		importer:  clusterset[0],
		want:      [][]string{{"cluster-c", "cluster-d"}},
	}, {
		name:      "In with a literal and a placeholder",
		selectors: []csv1beta1.ClusterSelector{expr(regionKey, in, "us", same)},
		importer:  clusterset[1],
		want:      [][]string{{"cluster-a", "cluster-b", "cluster-c"}},
	}, {
		name:      "Exists and DoesNotExist",
		selectors: []csv1beta1.ClusterSelector{expr("gpu-tier.example.com", csv1beta1.PropertySelectorOpExists), expr(regionKey, csv1beta1.PropertySelectorOpDoesNotExist)},
		importer:  clusterset[0],
		want:      [][]string{{"cluster-a", "cluster-c"}, {"cluster-d"}},
	}, {
		name: "story 2: properties and expressions are ANDed",
		selectors: []csv1beta1.ClusterSelector{{PropertySelector: &csv1beta1.PropertySelector{
			MatchProperties:  map[string]string{regionKey: same},
			MatchExpressions: []csv1beta1.PropertySelectorRequirement{{Key: "gpu-tier.example.com", Operator: csv1beta1.PropertySelectorOpExists}},
		}}},
		importer: clusterset[1],
		want:     [][]string{{"cluster-a"}},
	}, {
		name:      "a literal value that is no label value",
		selectors: []csv1beta1.ClusterSelector{props(map[string]string{regionKey: "eu west/1"})},
		importer:  clusterset[0],
		want:      [][]string{nil},
	}, {
		name:      "order is the selectors' order, not the results' size",
		selectors: []csv1beta1.ClusterSelector{props(map[string]string{regionKey: "us"}), props(map[string]string{regionKey: "eu"})},
		importer:  clusterset[0],
		want:      [][]string{{"cluster-c"}, {"cluster-a", "cluster-b"}},
	}, {
		name:     "no selectors, no results",
		importer: clusterset[0],
		want:     [][]string{},
	}, {
		name:      "an empty propertySelector is invalid",
		selectors: []csv1beta1.ClusterSelector{{PropertySelector: &csv1beta1.PropertySelector{}}},
		invalid:   true,
	}, {
		name:      "an entry without propertySelector is invalid",
		selectors: []csv1beta1.ClusterSelector{{}},
		invalid:   true,
	}, {
		name:      "17 selectors",
		selectors: slices.Repeat([]csv1beta1.ClusterSelector{expr(idKey, in, same)}, 17),
		invalid:   true,
	}, {
		name:      "In without values",
		selectors: []csv1beta1.ClusterSelector{expr(regionKey, in)},
		invalid:   true,
	}, {
		name:      "Exists with values",
		selectors: []csv1beta1.ClusterSelector{expr(regionKey, csv1beta1.PropertySelectorOpExists, same)},
		invalid:   true,
	}, {
		name:      "unknown operator",
		selectors: []csv1beta1.ClusterSelector{expr(regionKey, "Gt", "1")},
		invalid:   true,
	}, {
		name:      "a key that is no ClusterProperty name",
		selectors: []csv1beta1.ClusterSelector{props(map[string]string{"Region_Key": "eu"})},
		invalid:   true,
	}, {
		name:      "one invalid entry invalidates the list, whole",
		selectors: []csv1beta1.ClusterSelector{expr(idKey, in, same), {}},
		invalid:   true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			// Results never depend on the order the source clusters come in.
			for _, sources := range [][]Properties{clusterset, reversed(clusterset)} {
				got, err := Resolve(tc.selectors, tc.importer, sources)
				if tc.invalid {
					if !errors.Is(err, ErrInvalid) || got != nil {
						t.Fatalf("got %v, %v; want ErrInvalid and no results", got, err)
					}
					if Validate(tc.selectors) == nil {
						t.Errorf("Validate accepts what Resolve refuses")
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				var clusters [][]string
				for _, r := range got {
					clusters = append(clusters, r.Clusters)
				}
				if len(tc.want) == 0 && len(clusters) == 0 {
					continue
				}
				if diff := cmp.Diff(tc.want, clusters); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			}
		})
	}
}

// A prepared selector is bound to the importer's properties at the time
// it was prepared.
func TestPrepareSelectorBindsTheImporter(t *testing.T) {
	importer := cluster("cluster-a", regionKey, "eu")
	p, err := PrepareSelector(props(map[string]string{regionKey: same}), importer)
	if err != nil {
		t.Fatal(err)
	}
	importer.Properties[regionKey] = "us"
	got, _ := p.SelectClusters(clusterset)
	if len(got) != 2 || got[0].ID != "cluster-a" || got[1].ID != "cluster-b" {
		t.Errorf("got %v, want the eu clusters", got)
	}
}

func reversed[T any](in []T) []T {
	out := slices.Clone(in)
	slices.Reverse(out)
	return out
}
