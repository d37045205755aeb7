package export

import (
	"strings"
	"testing"
	"time"
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
