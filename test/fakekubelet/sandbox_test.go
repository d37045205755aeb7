package fakekubelet

import (
	"net"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestIPAMHandsOutEveryHostAddressOnceAndGoesRound(t *testing.T) {
	a, err := newIPAM("10.200.3.0/29")
	if err != nil {
		t.Fatal(err)
	}
	if a.gateway.String() != "10.200.3.1" {
		t.Errorf("gateway %s, want the first address", a.gateway)
	}
	var got []string
	for range 5 {
		ip, err := a.allocate()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ip.String())
	}
	// Not the network (.0), the gateway (.1) or the broadcast (.7).
	if want := "10.200.3.2,10.200.3.3,10.200.3.4,10.200.3.5,10.200.3.6"; strings.Join(got, ",") != want {
		t.Errorf("allocated %v, want %s", got, want)
	}
	if _, err := a.allocate(); err == nil {
		t.Errorf("a full range still hands out addresses")
	}
	a.release(netIP(t, "10.200.3.3"))
	a.release(netIP(t, "10.200.3.5"))
	// Round the range: the lower freed address comes first only because
	// the cursor wrapped, not because it is the lowest.
	for _, want := range []string{"10.200.3.3", "10.200.3.5"} {
		ip, err := a.allocate()
		if err != nil || ip.String() != want {
			t.Errorf("allocate() = %v, %v; want %s", ip, err, want)
		}
	}
}

func TestIPAMServesIPv6(t *testing.T) {
	a, err := newIPAM("fd00:10:200:3::/64")
	if err != nil {
		t.Fatal(err)
	}
	first, err := a.allocate()
	if err != nil || first.String() != "fd00:10:200:3::2" {
		t.Fatalf("first IPv6 pod address %v %v, want fd00:10:200:3::2", first, err)
	}
	second, _ := a.allocate()
	a.release(first)
	if second.String() != "fd00:10:200:3::3" || a.inUse[2] {
		t.Errorf("second %s, in use after release: %v", second, a.inUse)
	}
}

func TestIPAMRefusesRangesItCannotServe(t *testing.T) {
	for _, cidr := range []string{"10.0.0.0/8", "10.0.0.0/31", "fd00::/127", "nonsense"} {
		if _, err := newIPAM(cidr); err == nil {
			t.Errorf("newIPAM(%q) succeeded", cidr)
		}
	}
}

func TestPodNetnsNameIsReadableAndUnique(t *testing.T) {
	pod := func(name, uid string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(uid)}}
	}
	a := PodNetnsName("cset-a-", pod("web-1", "1b4e28ba-2fa1-11d2-883f-0016d3cca427"))
	if a != "cset-a-web-1-1b4e28" {
		t.Errorf("got %q", a)
	}
	// The same name again (a recreated pod) gets another namespace.
	if b := PodNetnsName("cset-a-", pod("web-1", "9f2c0000-0000-0000-0000-000000000000")); b == a {
		t.Errorf("a recreated pod reuses %q", a)
	}
	long := PodNetnsName("cset-a-", pod(strings.Repeat("x", 253), "1b4e28ba-2fa1-11d2-883f-0016d3cca427"))
	if len(long) > 60 {
		t.Errorf("name of %d characters", len(long))
	}
}

func TestGraceIsThePodsAndCapped(t *testing.T) {
	seconds := func(s int64) *int64 { return &s }
	cases := []struct {
		pod  v1.Pod
		want string
	}{
		{v1.Pod{}, "5s"}, // the default 30s, capped
		{v1.Pod{Spec: v1.PodSpec{TerminationGracePeriodSeconds: seconds(2)}}, "2s"},
		{v1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionGracePeriodSeconds: seconds(0)}, Spec: v1.PodSpec{TerminationGracePeriodSeconds: seconds(2)}}, "0s"},
	}
	for _, c := range cases {
		if got := grace(&c.pod).String(); got != c.want {
			t.Errorf("grace = %s, want %s", got, c.want)
		}
	}
}

func netIP(t *testing.T, s string) net.IP {
	t.Helper()
	ip := net.ParseIP(s)
	if ip == nil {
		t.Fatalf("bad IP %q", s)
	}
	return ip
}
