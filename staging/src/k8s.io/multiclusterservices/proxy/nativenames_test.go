package proxy

import (
	"encoding/json"
	"math"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"k8s.io/multiclusterservices/clusterselection"
)

func TestNativeNamesOf(t *testing.T) {
	tests := []struct {
		annotations map[string]string
		want        NativeNamesPolicy
		wantErr     bool
	}{
		{nil, NativeNamesPolicy{Minimum: Minimum{Count: 1}}, false},
		{map[string]string{AnnotationNativeNames: "RemoteAndLocal"}, NativeNamesPolicy{Strategy: RemoteAndLocal, Minimum: Minimum{Count: 1}}, false},
		{map[string]string{AnnotationNativeNames: "LocalFirst"}, NativeNamesPolicy{Strategy: LocalFirst, Minimum: Minimum{Count: 1}}, false},
		{map[string]string{AnnotationNativeNames: "LocalFirst", AnnotationLocalFirstMinimum: "3"}, NativeNamesPolicy{Strategy: LocalFirst, Minimum: Minimum{Count: 3}}, false},
		{map[string]string{AnnotationNativeNames: "LocalFirst", AnnotationLocalFirstMinimum: "50%"}, NativeNamesPolicy{Strategy: LocalFirst, Minimum: Minimum{Percent: 50}}, false},
		// A typo must not turn anything on.
		{map[string]string{AnnotationNativeNames: "localfirst"}, NativeNamesPolicy{}, true},
		{map[string]string{AnnotationNativeNames: "LocalFirst", AnnotationLocalFirstMinimum: "0"}, NativeNamesPolicy{}, true},
		{map[string]string{AnnotationNativeNames: "LocalFirst", AnnotationLocalFirstMinimum: "150%"}, NativeNamesPolicy{}, true},
		{map[string]string{AnnotationNativeNames: "LocalFirst", AnnotationLocalFirstMinimum: "half"}, NativeNamesPolicy{}, true},
		{map[string]string{AnnotationNativeNames: "RemoteAndLocal", AnnotationLocalFirstMinimum: "2"}, NativeNamesPolicy{}, true},
	}
	for _, tt := range tests {
		got, err := NativeNamesOf(tt.annotations)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("NativeNamesOf(%v) = %+v, %v; want %+v, error %v", tt.annotations, got, err, tt.want, tt.wantErr)
		}
	}
}

// eps builds a slice named name of family with one endpoint per state:
// "r" ready, "n" not ready, "t" serving and terminating, "u" readiness
// unknown.
func eps(name string, family discoveryv1.AddressType, states string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, AddressType: family}
	for i, st := range states {
		addr := "10.0.0." + string(rune('1'+i))
		if family == discoveryv1.AddressTypeIPv6 {
			addr = "fd00::" + string(rune('1'+i))
		}
		ep := discoveryv1.Endpoint{Addresses: []string{addr}}
		switch st {
		case 'r':
			ep.Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true)}
		case 'n':
			ep.Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(false)}
		case 't':
			ep.Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}
		}
		s.Endpoints = append(s.Endpoints, ep)
	}
	return s
}

func names(ss []*discoveryv1.EndpointSlice) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

func TestSelectForLocalService(t *testing.T) {
	v4, v6 := discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6
	remote := remoteOf(eps("remote-v4", v4, "rr"), eps("remote-v6", v6, "rr"))
	localFirst := func(m Minimum) NativeNamesPolicy { return NativeNamesPolicy{Strategy: LocalFirst, Minimum: m} }
	one := Minimum{Count: 1}
	tests := []struct {
		name   string
		policy NativeNamesPolicy
		local  []*discoveryv1.EndpointSlice
		want   []string
	}{
		{"off: own endpoints only", NativeNamesPolicy{}, []*discoveryv1.EndpointSlice{eps("local-v4", v4, "")}, []string{"local-v4"}},
		{"RemoteAndLocal: all of them", NativeNamesPolicy{Strategy: RemoteAndLocal}, []*discoveryv1.EndpointSlice{eps("local-v4", v4, "r")}, []string{"local-v4", "remote-v4", "remote-v6"}},
		{"LocalFirst: one ready local endpoint is enough", localFirst(one), []*discoveryv1.EndpointSlice{eps("local-v4", v4, "rn")}, []string{"local-v4", "remote-v6"}},
		{"LocalFirst: readiness unknown counts as ready", localFirst(one), []*discoveryv1.EndpointSlice{eps("local-v4", v4, "u")}, []string{"local-v4", "remote-v6"}},
		{"LocalFirst: no ready local endpoint, remote joins", localFirst(one), []*discoveryv1.EndpointSlice{eps("local-v4", v4, "nn")}, []string{"local-v4", "remote-v4", "remote-v6"}},
		// The proxy then prefers the remote ready endpoints to the local
		// serving-terminating ones, as for any Service.
		{"LocalFirst: only terminating locally, remote joins", localFirst(one), []*discoveryv1.EndpointSlice{eps("local-v4", v4, "tt")}, []string{"local-v4", "remote-v4", "remote-v6"}},
		{"LocalFirst: no local slice at all", localFirst(one), nil, []string{"remote-v4", "remote-v6"}},
		{"LocalFirst: a count across slices", localFirst(Minimum{Count: 3}), []*discoveryv1.EndpointSlice{eps("local-a", v4, "rr"), eps("local-b", v4, "rn")}, []string{"local-a", "local-b", "remote-v6"}},
		{"LocalFirst: below the count spills over before empty", localFirst(Minimum{Count: 3}), []*discoveryv1.EndpointSlice{eps("local-a", v4, "rrn")}, []string{"local-a", "remote-v4", "remote-v6"}},
		{"LocalFirst: a share, met", localFirst(Minimum{Percent: 50}), []*discoveryv1.EndpointSlice{eps("local-a", v4, "rrnn")}, []string{"local-a", "remote-v6"}},
		{"LocalFirst: a share, rounded up, not met", localFirst(Minimum{Percent: 50}), []*discoveryv1.EndpointSlice{eps("local-a", v4, "rnn")}, []string{"local-a", "remote-v4", "remote-v6"}},
		{"LocalFirst: families decide apart", localFirst(one), []*discoveryv1.EndpointSlice{eps("local-v4", v4, "n"), eps("local-v6", v6, "r")}, []string{"local-v4", "local-v6", "remote-v4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := slices.Clone(tt.local)
			got := names(SelectForLocalService(tt.policy, "cluster-b", tt.local, remote))
			if !slices.Equal(got, tt.want) {
				t.Errorf("selected %v, want %v", got, tt.want)
			}
			if !slices.Equal(before, tt.local) {
				t.Errorf("the local slices were modified")
			}
		})
	}
}

// FuzzSelectForLocalService checks the promises that hold for any input:
// local slices are always kept, in order, and nothing but the given slices
// is returned; LocalFirst adds a family's remote slices only when that
// family's local endpoints fall short, and off adds none.
func FuzzSelectForLocalService(f *testing.F) {
	f.Add(`LocalFirst`, `2`, `[{"addressType":"IPv4","endpoints":[{"addresses":["10.0.0.1"],"conditions":{"ready":false}}]}]`)
	f.Add(`RemoteAndLocal`, ``, `[]`)
	f.Add(``, ``, `[{"addressType":"IPv6","endpoints":[{"addresses":["fd00::1"]}]}]`)
	f.Add(`LocalFirst`, `100%`, `[{"addressType":"IPv4","endpoints":[{"addresses":["10.0.0.1"]},{"addresses":["10.0.0.2"],"conditions":{"ready":false}}]}]`)
	remote := remoteOf(eps("remote-v4", discoveryv1.AddressTypeIPv4, "r"), eps("remote-v6", discoveryv1.AddressTypeIPv6, "r"))
	f.Fuzz(func(t *testing.T, strategy, minimum, localJSON string) {
		annotations := map[string]string{AnnotationNativeNames: strategy}
		if minimum != "" {
			annotations[AnnotationLocalFirstMinimum] = minimum
		}
		policy, err := NativeNamesOf(annotations)
		if err != nil {
			if policy != (NativeNamesPolicy{}) {
				t.Fatalf("an invalid policy %+v was returned with %v", policy, err)
			}
			return
		}
		var local []*discoveryv1.EndpointSlice
		if json.Unmarshal([]byte(localJSON), &local) != nil || slices.Contains(local, nil) {
			return
		}
		got := SelectForLocalService(policy, "cluster-b", local, remote)
		if len(got) < len(local) || !slices.Equal(got[:len(local)], local) {
			t.Fatalf("local slices not kept first and whole: %v", names(got))
		}
		for _, s := range got[len(local):] {
			if !slices.ContainsFunc(remote, func(r clusterselection.Source) bool { return r.Slice == s }) {
				t.Fatalf("returned a slice that was not given: %v", s.Name)
			}
			if policy.Strategy == NativeNamesOff {
				t.Fatalf("off, yet remote slice %s joined", s.Name)
			}
			if policy.Strategy == LocalFirst && enoughReady(policy.Minimum, local, s.AddressType) {
				t.Fatalf("LocalFirst added %s although the local %s endpoints suffice", s.Name, s.AddressType)
			}
		}
	})
}

func TestCanCarry(t *testing.T) {
	port := func(name string, n int32, proto v1.Protocol) discoveryv1.EndpointPort {
		p := discoveryv1.EndpointPort{Name: ptr.To(name), Port: ptr.To(n)}
		if proto != "" {
			p.Protocol = ptr.To(proto)
		}
		return p
	}
	withPorts := func(family discoveryv1.AddressType, ports ...discoveryv1.EndpointPort) *discoveryv1.EndpointSlice {
		s := eps("s", family, "r")
		s.Ports = ports
		return s
	}
	v4, v6 := discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6
	local := withPorts(v4, port("http", 8080, v1.ProtocolTCP), port("metrics", 9090, v1.ProtocolTCP))
	tests := []struct {
		name   string
		remote *discoveryv1.EndpointSlice
		want   bool
	}{
		{"same ports", withPorts(v4, port("http", 8080, v1.ProtocolTCP), port("metrics", 9090, v1.ProtocolTCP)), true},
		{"same ports, other order, protocol defaulted", withPorts(v4, port("metrics", 9090, ""), port("http", 8080, v1.ProtocolTCP)), true},
		{"another family", withPorts(v6, port("http", 8080, v1.ProtocolTCP), port("metrics", 9090, v1.ProtocolTCP)), false},
		{"another port number", withPorts(v4, port("http", 8081, v1.ProtocolTCP), port("metrics", 9090, v1.ProtocolTCP)), false},
		{"another protocol", withPorts(v4, port("http", 8080, v1.ProtocolUDP), port("metrics", 9090, v1.ProtocolTCP)), false},
		{"a port fewer", withPorts(v4, port("http", 8080, v1.ProtocolTCP)), false},
		{"a port more", withPorts(v4, port("http", 8080, v1.ProtocolTCP), port("metrics", 9090, v1.ProtocolTCP), port("admin", 9000, v1.ProtocolTCP)), false},
	}
	for _, tt := range tests {
		if got := CanCarry(local, tt.remote); got != tt.want {
			t.Errorf("%s: CanCarry = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// A carrier holds the local endpoints and the remote ones, and leaves both
// slices as they were (informer objects are never modified).
func TestCarrying(t *testing.T) {
	local, a, b := eps("local", discoveryv1.AddressTypeIPv4, "rn"), eps("a", discoveryv1.AddressTypeIPv4, "r"), eps("b", discoveryv1.AddressTypeIPv4, "tr")
	a.Endpoints[0].Addresses = []string{"10.1.0.1"}
	b.Endpoints[0].Addresses, b.Endpoints[1].Addresses = []string{"10.2.0.1"}, []string{"10.2.0.2"}
	got := Carrying(local, []*discoveryv1.EndpointSlice{a, b})
	var addrs []string
	for _, ep := range got.Endpoints {
		addrs = append(addrs, ep.Addresses[0])
	}
	if want := []string{"10.0.0.1", "10.0.0.2", "10.1.0.1", "10.2.0.1", "10.2.0.2"}; !slices.Equal(addrs, want) {
		t.Errorf("carrier endpoints %v, want %v", addrs, want)
	}
	if got.Name != "local" || len(local.Endpoints) != 2 || len(a.Endpoints) != 1 || len(b.Endpoints) != 2 {
		t.Errorf("carrier %q; the slices it was made of changed: local %d, a %d, b %d endpoints", got.Name, len(local.Endpoints), len(a.Endpoints), len(b.Endpoints))
	}
	if !ptr.Deref(got.Endpoints[3].Conditions.Terminating, false) {
		t.Errorf("a carried endpoint lost its conditions: %+v", got.Endpoints[3].Conditions)
	}
}

// remoteOf pairs remote slices with cluster-a, the one remote cluster.
func remoteOf(slices ...*discoveryv1.EndpointSlice) []clusterselection.Source {
	var out []clusterselection.Source
	for _, s := range slices {
		out = append(out, clusterselection.Source{Cluster: "cluster-a", Slice: s})
	}
	return out
}

// enoughReady is the fuzz test's own statement of LocalFirst's rule: the
// local slices of family have at least the minimum of ready endpoints (an
// endpoint whose readiness is unknown counts as ready).
func enoughReady(m Minimum, slices []*discoveryv1.EndpointSlice, family discoveryv1.AddressType) bool {
	ready, listed := 0, 0
	for _, s := range slices {
		if s.AddressType != family {
			continue
		}
		for _, ep := range s.Endpoints {
			listed++
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				ready++
			}
		}
	}
	want := m.Count
	if m.Percent > 0 {
		want = max(int(math.Ceil(float64(listed)*float64(m.Percent)/100)), 1)
	}
	return ready >= want
}
