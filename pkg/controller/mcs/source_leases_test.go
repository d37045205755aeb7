package mcs

import (
	"testing"
	"time"
)

// A member that writes a source Lease renewed far in the future (a clock
// ahead, or a lie) must not keep that source's endpoints imported for
// longer than its TTL after a restart.
func TestLaterRenewalIsBoundedByNow(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name        string
		have, lease time.Time
		want        time.Time
	}{
		{"a later lease wins", now.Add(-time.Minute), now.Add(-time.Second), now.Add(-time.Second)},
		{"an earlier lease does not", now.Add(-time.Second), now.Add(-time.Minute), now.Add(-time.Second)},
		{"a lease from the future counts as now", now.Add(-time.Minute), now.Add(365 * 24 * time.Hour), now},
		{"nothing known yet", time.Time{}, now.Add(-time.Second), now.Add(-time.Second)},
	}
	for _, tt := range tests {
		if got := laterRenewal(tt.have, tt.lease, now); !got.Equal(tt.want) {
			t.Errorf("%s: laterRenewal = %v, want %v", tt.name, got, tt.want)
		}
	}
}
