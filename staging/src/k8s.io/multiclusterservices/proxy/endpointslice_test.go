package proxy

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func testSlice(mutate func(*discoveryv1.EndpointSlice)) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns",
			Name:      "web-cluster-a-1",
			Labels: map[string]string{
				mcsv1beta1.LabelServiceName:   "web",
				mcsv1beta1.LabelSourceCluster: "cluster-a",
				discoveryv1.LabelManagedBy:    DefaultManagedBy,
			},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{"10.1.0.5"},
			Conditions: discoveryv1.EndpointConditions{Ready: ptrTo(true)},
			NodeName:   ptrTo("node-a"),
			Zone:       ptrTo("zone-a"),
			Hints:      &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "zone-a"}}, ForNodes: []discoveryv1.ForNode{{Name: "node-a"}}},
		}},
		Ports: []discoveryv1.EndpointPort{{Name: ptrTo("http"), Protocol: ptrTo(v1.ProtocolTCP), Port: ptrTo(int32(8080))}},
	}
	if mutate != nil {
		mutate(s)
	}
	return s
}

func TestIsMultiClusterEndpointSlice(t *testing.T) {
	if !IsMultiClusterEndpointSlice(testSlice(nil)) {
		t.Errorf("an MCS slice is not recognised")
	}
	local := testSlice(func(s *discoveryv1.EndpointSlice) { s.Labels[discoveryv1.LabelServiceName] = "web" })
	if IsMultiClusterEndpointSlice(local) {
		t.Errorf("a slice of a local Service is taken for an MCS slice")
	}
	plain := testSlice(func(s *discoveryv1.EndpointSlice) { delete(s.Labels, mcsv1beta1.LabelServiceName) })
	if IsMultiClusterEndpointSlice(plain) {
		t.Errorf("a slice without the MCS label is taken for an MCS slice")
	}
}

// Which slices reach an import, by their two service-name labels: an MCS
// slice may name its own import's synthetic Service too (the label a
// proxy keys slices by); any other slice naming a synthetic Service is
// dropped, whatever else it says.
func TestServiceNameLabels(t *testing.T) {
	for _, c := range []struct {
		name                 string
		mcsName, serviceName string // "-": label absent
		mcs, claims, shares  bool
		localClaim           bool
	}{
		{"MCS slice", "web", "-", true, false, false, false},
		{"MCS slice naming its import's Service", "web", "web.clusterset", true, false, true, false},
		{"MCS slice naming another import's Service", "web", "db.clusterset", false, true, false, false},
		// Written for a derived member's stock proxies (native names),
		// or by whoever holds the controller's credentials: never the
		// Service's own slice to a proxy that programs imports.
		{"attack: MCS slice naming the local Service of its import's name", "web", "web", false, false, false, true},
		{"attack: MCS slice naming another local Service", "web", "webhook", false, false, false, true},
		{"MCS slice of its import's derived Service", "web", DerivedServiceName("ns", "web"), false, false, false, false},
		{"attack: MCS slice naming another import's derived Service", "web", DerivedServiceName("ns", "db"), false, false, false, true},
		{"plain slice naming an import's Service", "-", "web.clusterset", false, true, false, false},
		{"local Service's slice", "-", "web", false, false, false, false},
		{"slice of no Service", "-", "-", false, false, false, false},
	} {
		s := testSlice(func(s *discoveryv1.EndpointSlice) {
			for key, value := range map[string]string{mcsv1beta1.LabelServiceName: c.mcsName, discoveryv1.LabelServiceName: c.serviceName} {
				if value == "-" {
					delete(s.Labels, key)
				} else {
					s.Labels[key] = value
				}
			}
		})
		if got := IsMultiClusterEndpointSlice(s); got != c.mcs {
			t.Errorf("%s: IsMultiClusterEndpointSlice = %v, want %v", c.name, got, c.mcs)
		}
		if got := ClaimsImportService(s); got != c.claims {
			t.Errorf("%s: ClaimsImportService = %v, want %v", c.name, got, c.claims)
		}
		if got := SharesImportService(s); got != c.shares {
			t.Errorf("%s: SharesImportService = %v, want %v", c.name, got, c.shares)
		}
		want := LocalSlice
		switch {
		case c.mcs:
			want = MultiClusterSlice
		case c.claims:
			want = ImportClaimingSlice
		case c.localClaim:
			want = LocalServiceClaimingSlice
		}
		if got := KindOf(s); got != want {
			t.Errorf("%s: KindOf = %v, want %v", c.name, got, want)
		}
	}
}

// A slice that already names its import's Service is handed over as it
// is, unless it holds another cluster's node names, which are removed
// from a copy.
func TestEndpointSliceForImportShares(t *testing.T) {
	opts := &Options{TrustedManagers: []string{DefaultManagedBy}, LocalClusterID: "cluster-b"}
	labelled := func(s *discoveryv1.EndpointSlice) { s.Labels[discoveryv1.LabelServiceName] = "web.clusterset" }
	withoutNodes := testSlice(func(s *discoveryv1.EndpointSlice) {
		labelled(s)
		s.Endpoints[0].NodeName, s.Endpoints[0].Hints = nil, nil
	})
	if got, err := EndpointSliceForImport(withoutNodes, opts); err != nil || got != withoutNodes {
		t.Errorf("a labelled slice without node names was not handed over as it is (err %v)", err)
	}
	withNodes := testSlice(labelled)
	got, err := EndpointSliceForImport(withNodes, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got == withNodes || got.Endpoints[0].NodeName != nil || withNodes.Endpoints[0].NodeName == nil {
		t.Errorf("another cluster's node names were not removed from a copy")
	}
	// The source cluster's own proxies keep its node names: as it is.
	own := &Options{TrustedManagers: []string{DefaultManagedBy}, LocalClusterID: "cluster-a"}
	if got, _ := EndpointSliceForImport(withNodes, own); got != withNodes {
		t.Errorf("the source cluster's own labelled slice was copied")
	}
	// Still checked: an untrusted manager is refused.
	untrusted := testSlice(func(s *discoveryv1.EndpointSlice) { labelled(s); s.Labels[discoveryv1.LabelManagedBy] = "someone" })
	if _, err := EndpointSliceForImport(untrusted, opts); err == nil {
		t.Errorf("a labelled slice of an untrusted manager was accepted")
	}
}

func TestEndpointSliceForImport(t *testing.T) {
	tests := []struct {
		name       string
		mutate     func(*discoveryv1.EndpointSlice)
		localID    string
		want       func(*discoveryv1.EndpointSlice)
		wantReason Reason
	}{
		{
			name: "remote slice joins the synthetic Service, loses node name and node hints, keeps zone hints",
			want: func(s *discoveryv1.EndpointSlice) {
				s.Endpoints[0].NodeName = nil
				s.Endpoints[0].Hints.ForNodes = nil
			},
		},
		{
			name:    "the local cluster's own slice keeps node name and every hint",
			localID: "cluster-a",
		},
		{
			name:    "another cluster's slice loses node name and node hints even when the local ID is known",
			localID: "cluster-b",
			want: func(s *discoveryv1.EndpointSlice) {
				s.Endpoints[0].NodeName = nil
				s.Endpoints[0].Hints.ForNodes = nil
			},
		},
		{
			name: "IPv6 slice",
			mutate: func(s *discoveryv1.EndpointSlice) {
				s.AddressType = discoveryv1.AddressTypeIPv6
				s.Endpoints[0].Addresses = []string{"fd00:1::5"}
			},
			want: func(s *discoveryv1.EndpointSlice) {
				s.Endpoints[0].NodeName = nil
				s.Endpoints[0].Hints.ForNodes = nil
			},
		},
		{
			name: "a remote slice that names no node is shared as it is",
			mutate: func(s *discoveryv1.EndpointSlice) {
				s.Endpoints[0].NodeName = nil
				s.Endpoints[0].Hints.ForNodes = nil
			},
		},
		{
			name:   "a remote endpoint with node hints only has no hints left",
			mutate: func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Hints.ForZones = nil },
			want: func(s *discoveryv1.EndpointSlice) {
				s.Endpoints[0].NodeName = nil
				s.Endpoints[0].Hints = nil
			},
		},
		{name: "untrusted manager", mutate: func(s *discoveryv1.EndpointSlice) { s.Labels[discoveryv1.LabelManagedBy] = "someone-else" }, wantReason: ReasonUntrustedManager},
		{name: "no manager", mutate: func(s *discoveryv1.EndpointSlice) { delete(s.Labels, discoveryv1.LabelManagedBy) }, wantReason: ReasonUntrustedManager},
		{name: "invalid import name", mutate: func(s *discoveryv1.EndpointSlice) { s.Labels[mcsv1beta1.LabelServiceName] = "a.b" }, wantReason: ReasonInvalidName},
		{name: "FQDN slice", mutate: func(s *discoveryv1.EndpointSlice) { s.AddressType = discoveryv1.AddressTypeFQDN }, wantReason: ReasonUnsupportedAddressType},
		{name: "IPv6 address in an IPv4 slice", mutate: func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Addresses = []string{"fd00::5"} }, wantReason: ReasonInvalidEndpoint},
		{name: "garbage address", mutate: func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Addresses = []string{"pod-a"} }, wantReason: ReasonInvalidEndpoint},
		{name: "loopback address", mutate: func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Addresses = []string{"127.0.0.1"} }, wantReason: ReasonInvalidEndpoint},
		{name: "Alibaba Cloud metadata address", mutate: func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Addresses = []string{"100.100.100.200"} }, wantReason: ReasonInvalidEndpoint},
		{name: "Azure platform address", mutate: func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Addresses = []string{"168.63.129.16"} }, wantReason: ReasonInvalidEndpoint},
		{name: "AWS IPv6 metadata address", mutate: func(s *discoveryv1.EndpointSlice) {
			s.AddressType = discoveryv1.AddressTypeIPv6
			s.Endpoints[0].Addresses = []string{"fd00:ec2::254"}
		}, wantReason: ReasonInvalidEndpoint},
		{name: "endpoint without address", mutate: func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Addresses = nil }, wantReason: ReasonInvalidEndpoint},
		{name: "unknown protocol", mutate: func(s *discoveryv1.EndpointSlice) { s.Ports[0].Protocol = ptrTo(v1.Protocol("GRE")) }, wantReason: ReasonUnsupportedProtocol},
		{name: "missing port number", mutate: func(s *discoveryv1.EndpointSlice) { s.Ports[0].Port = nil }, wantReason: ReasonInvalidPort},
		{name: "port out of range", mutate: func(s *discoveryv1.EndpointSlice) { s.Ports[0].Port = ptrTo(int32(70000)) }, wantReason: ReasonInvalidPort},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := testSlice(tc.mutate)
			before := in.DeepCopy()
			opts := testOptions()
			opts.LocalClusterID = tc.localID
			got, err := EndpointSliceForImport(in, opts)
			if diff := cmp.Diff(before, in); diff != "" {
				t.Errorf("translation modified its input (-before +after):\n%s", diff)
			}
			if tc.wantReason != "" {
				var rej *RejectionError
				if !errors.As(err, &rej) || rej.Reason != tc.wantReason {
					t.Fatalf("got error %v, want a rejection with reason %s", err, tc.wantReason)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			// Only the label a proxy reads is kept.
			want := testSlice(tc.mutate)
			want.Labels = map[string]string{discoveryv1.LabelServiceName: "web.clusterset"}
			if tc.want != nil {
				tc.want(want)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("unexpected slice (-want +got):\n%s", diff)
			}
			// What needs no change is shared with the informer's object.
			if len(got.Endpoints) > 0 && !slices.ContainsFunc(in.Endpoints, namesANode) && &got.Endpoints[0] != &in.Endpoints[0] {
				t.Errorf("endpoints were copied although nothing in them changes")
			}
		})
	}
}

func TestIsServiceOfImport(t *testing.T) {
	for _, c := range []struct {
		service, importName string
		want                bool
	}{
		{"web.clusterset", "web", true},
		{"db.clusterset", "web", false},
		{"web", "web", false}, // a local Service's name, not the synthetic one
		{".clusterset", "", true},
		{"", "", false},
	} {
		if got := IsServiceOfImport(c.service, c.importName); got != c.want {
			t.Errorf("IsServiceOfImport(%q, %q) = %v, want %v", c.service, c.importName, got, c.want)
		}
	}
}
