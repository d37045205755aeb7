package export

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
)

func sel(key string, values ...string) csv1beta1.ClusterSelector {
	return csv1beta1.ClusterSelector{PropertySelector: &csv1beta1.PropertySelector{
		MatchExpressions: []csv1beta1.PropertySelectorRequirement{{Key: key, Operator: csv1beta1.PropertySelectorOpIn, Values: values}},
	}}
}

func TestMergeClusterSelectors(t *testing.T) {
	at := func(cluster string, minute int) Export {
		return Export{Cluster: cluster, ServiceExport: &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(time.Unix(0, 0).Add(time.Duration(minute) * time.Minute))}}}
	}
	local := []csv1beta1.ClusterSelector{sel("cluster.clusterset.k8s.io", csv1beta1.SameAsImporter)}
	region := append(slices.Clone(local), sel("region.topology.k8s.io", csv1beta1.SameAsImporter))
	reordered := []csv1beta1.ClusterSelector{region[1], region[0]}
	for _, tc := range []struct {
		name    string
		exports []Export
		lists   map[string][]csv1beta1.ClusterSelector
		want    []csv1beta1.ClusterSelector
		losers  []string
	}{
		{"all agree", []Export{at("a", 1), at("b", 2)}, map[string][]csv1beta1.ClusterSelector{"a": region, "b": region}, region, nil},
		{"none has any", []Export{at("a", 1), at("b", 2)}, nil, nil, nil},
		{"the oldest wins", []Export{at("a", 2), at("b", 1)}, map[string][]csv1beta1.ClusterSelector{"a": region, "b": local}, local, []string{"a"}},
		{"order matters", []Export{at("a", 1), at("b", 2)}, map[string][]csv1beta1.ClusterSelector{"a": region, "b": reordered}, region, []string{"b"}},
		{"an export without any conflicts with one with some", []Export{at("a", 1), at("b", 2), at("c", 3)}, map[string][]csv1beta1.ClusterSelector{"a": local, "c": local}, local, []string{"b"}},
		{"the oldest without any: none", []Export{at("a", 1), at("b", 2)}, map[string][]csv1beta1.ClusterSelector{"b": local}, nil, []string{"b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, exports := range [][]Export{tc.exports, reversedExports(tc.exports)} {
				got, conflicts := MergeClusterSelectors(exports, func(c string) []csv1beta1.ClusterSelector { return tc.lists[c] })
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
				var losers []string
				for _, c := range conflicts {
					if c.Reason != ReasonClusterSelectorsConflict {
						t.Errorf("reason %s", c.Reason)
					}
					losers = c.Losers
				}
				if !slices.Equal(losers, tc.losers) {
					t.Errorf("losers %v, want %v", losers, tc.losers)
				}
			}
		})
	}
}

func reversedExports(in []Export) []Export {
	out := slices.Clone(in)
	slices.Reverse(out)
	return out
}

func TestValidateClusterSelectors(t *testing.T) {
	clusterIP := &v1.Service{Spec: v1.ServiceSpec{ClusterIP: "10.0.0.1"}}
	headless := &v1.Service{Spec: v1.ServiceSpec{ClusterIP: v1.ClusterIPNone}}
	good := []csv1beta1.ClusterSelector{sel("region.topology.k8s.io", csv1beta1.SameAsImporter)}
	for _, tc := range []struct {
		name   string
		svc    *v1.Service
		sels   []csv1beta1.ClusterSelector
		reason mcsv1beta1.ServiceExportConditionReason
	}{
		{"none", headless, nil, mcsv1beta1.ServiceExportReasonValid},
		{"valid", clusterIP, good, mcsv1beta1.ServiceExportReasonValid},
		{"headless", headless, good, mcsv1beta1.ServiceExportReasonInvalidServiceType},
		{"empty propertySelector", clusterIP, []csv1beta1.ClusterSelector{{PropertySelector: &csv1beta1.PropertySelector{}}}, ReasonInvalidClusterSelector},
		{"bad key", clusterIP, []csv1beta1.ClusterSelector{sel("Not A Key", "x")}, ReasonInvalidClusterSelector},
	} {
		v := ValidateClusterSelectors(tc.svc, tc.sels)
		if v.Reason != tc.reason || v.Valid != (tc.reason == mcsv1beta1.ServiceExportReasonValid) {
			t.Errorf("%s: %+v, want %s", tc.name, v, tc.reason)
		}
	}
}
