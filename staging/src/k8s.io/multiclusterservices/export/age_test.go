package export

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func TestCompareAge(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name         string
		aAge, bAge   time.Time
		aName, bName string
		want         int
	}{
		{name: "older wins whatever the names", aAge: t0, aName: "zeta", bAge: t0.Add(time.Second), bName: "alpha", want: -1},
		{name: "newer loses whatever the names", aAge: t0.Add(time.Second), aName: "alpha", bAge: t0, bName: "zeta", want: 1},
		{name: "same second: the name that sorts first", aAge: t0, aName: "cluster-a", bAge: t0, bName: "cluster-b", want: -1},
		{name: "same second, names reversed", aAge: t0, aName: "cluster-b", bAge: t0, bName: "cluster-a", want: 1},
		{name: "the same claim", aAge: t0, aName: "ns/web", bAge: t0, bName: "ns/web", want: 0},
		{name: "names compare as bytes: '-' sorts before '/'", aAge: t0, aName: "a-x/c", bAge: t0, bName: "a/b", want: -1},
		{name: "one nanosecond is older", aAge: t0, aName: "b", bAge: t0.Add(time.Nanosecond), bName: "a", want: -1},
		{name: "the same instant in another zone is the same age", aAge: t0, aName: "a", bAge: t0.In(time.FixedZone("x", 3600)), bName: "b", want: -1},
		{name: "an unset time is the oldest", aAge: time.Time{}, aName: "z", bAge: t0, bName: "a", want: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CompareAge(tc.aAge, tc.aName, tc.bAge, tc.bName); got != tc.want {
				t.Errorf("CompareAge(%v, %q, %v, %q) = %d, want %d", tc.aAge, tc.aName, tc.bAge, tc.bName, got, tc.want)
			}
			// Antisymmetric: b against a is the opposite.
			if got := CompareAge(tc.bAge, tc.bName, tc.aAge, tc.aName); got != -tc.want {
				t.Errorf("reversed: CompareAge(%v, %q, %v, %q) = %d, want %d", tc.bAge, tc.bName, tc.aAge, tc.aName, got, -tc.want)
			}
			// CompareAgeFunc ranks alike, and looks at the names only
			// when the times are equal.
			compared := false
			got := CompareAgeFunc(tc.aAge, tc.aName, tc.bAge, tc.bName, func(a, b string) int {
				compared = true
				return strings.Compare(a, b)
			})
			if got != tc.want || compared != tc.aAge.Equal(tc.bAge) {
				t.Errorf("CompareAgeFunc = %d (names compared: %v), want %d (names compared: %v)", got, compared, tc.want, tc.aAge.Equal(tc.bAge))
			}
		})
	}
}

// A member that claims its export is older than its namespace (a forged
// or broken creation time) does not win the conflict it would win: the
// export is taken to be as old as its namespace, no older.
func TestBoundCreationKeepsForgedAgesFromWinning(t *testing.T) {
	forged := export("b", -525600, func(s *v1.Service, _ *mcsv1beta1.ServiceExport) { s.Spec.ClusterIP = v1.ClusterIPNone })
	nsB := epoch.Add(5 * time.Minute)
	bounded := forged
	bounded.ServiceExport = BoundCreation(forged.ServiceExport, nsB, epoch.Add(time.Hour))
	if !bounded.ServiceExport.CreationTimestamp.Time.Equal(nsB) || forged.ServiceExport.CreationTimestamp.Time.Equal(nsB) {
		t.Fatalf("bounded %v (input %v), want %v and the input untouched", bounded.ServiceExport.CreationTimestamp, forged.ServiceExport.CreationTimestamp, nsB)
	}
	r := Merge([]Export{export("a", 1, nil), bounded})
	if r.Spec.Type != mcsv1beta1.ClusterSetIP || r.Conflicts[0].Winner != "a" {
		t.Errorf("type %s won by %s, want a's ClusterSetIP", r.Spec.Type, r.Conflicts[0].Winner)
	}
	// A creation time in the future counts as now; one within stays.
	future := export("c", 600, nil)
	if got := BoundCreation(future.ServiceExport, time.Time{}, epoch.Add(time.Hour)); !got.CreationTimestamp.Time.Equal(epoch.Add(time.Hour)) {
		t.Errorf("future creation time bounded to %v", got.CreationTimestamp)
	}
	ok := export("d", 10, nil)
	if got := BoundCreation(ok.ServiceExport, epoch, epoch.Add(time.Hour)); got != ok.ServiceExport {
		t.Errorf("a creation time within the bounds was copied")
	}
}
