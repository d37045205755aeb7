package export

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/multiclusterservices/proxy"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func TestImportedSlice(t *testing.T) {
	src := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-abcde", Labels: map[string]string{
			discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)},
			{Name: ptr.To("metrics"), Port: ptr.To[int32](9090)},
		},
		Endpoints: []discoveryv1.Endpoint{
			{
				Addresses:  []string{"10.1.0.5"},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
				Hostname:   ptr.To("web-0"),
				NodeName:   ptr.To("node-1"),
				Zone:       ptr.To("zone-a"),
				Hints:      &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "zone-a"}}},
				TargetRef:  &v1.ObjectReference{Kind: "Pod", Name: "web-0"},
			},
			// A proxy rejects a whole slice with a loopback address.
			{Addresses: []string{"127.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
			// A member publishing cloud metadata addresses would send
			// every other member's traffic to their own metadata service.
			{Addresses: []string{"100.100.100.200"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
			{Addresses: []string{"168.63.129.16"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
			{Addresses: []string{"169.254.169.254"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
		},
	}
	got := ImportedSlice(src, "web", "cluster-a", "mcs-controller.multicluster.x-k8s.io", served("http"), nil)
	want := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: SliceName("web", "cluster-a", "web-abcde"), Labels: map[string]string{
			mcsv1beta1.LabelServiceName:   "web",
			mcsv1beta1.LabelSourceCluster: "cluster-a",
			discoveryv1.LabelManagedBy:    "mcs-controller.multicluster.x-k8s.io",
			discoveryv1.LabelServiceName:  "web.clusterset",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{"10.1.0.5"},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			Hostname:   ptr.To("web-0"),
			NodeName:   ptr.To("node-1"),
			Zone:       ptr.To("zone-a"),
		}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ImportedSlice (-want +got):\n%s", diff)
	}
	// It names the import's synthetic Service, which no real Service can
	// be: never a local Service's slice, and a proxy hands it on as it is.
	if !proxy.IsMultiClusterEndpointSlice(got) || !proxy.SharesImportService(got) {
		t.Errorf("an imported slice must be an MCS slice naming its import's synthetic Service: %v", got.Labels)
	}

	// Ports with no name default to "" and are kept when "" is served.
	src.Ports = []discoveryv1.EndpointPort{{Port: ptr.To[int32](8080)}}
	if got := ImportedSlice(src, "web", "cluster-a", "m", served(""), nil); len(got.Ports) != 1 || *got.Ports[0].Protocol != v1.ProtocolTCP {
		t.Errorf("unnamed port: %+v", got.Ports)
	}
	src.AddressType = discoveryv1.AddressTypeFQDN
	if got := ImportedSlice(src, "web", "cluster-a", "m", served("http"), nil); got != nil {
		t.Errorf("an FQDN slice cannot be imported, got %v", got)
	}
}

// TestImportedSliceAddresses: an endpoint keeps its valid addresses in
// canonical form, which every member's proxies compare, and loses the
// others; one whose addresses are all kept as they are shares them.
func TestImportedSliceAddresses(t *testing.T) {
	tests := []struct {
		name        string
		addressType discoveryv1.AddressType
		addrs, want []string
	}{
		{"kept whole", discoveryv1.AddressTypeIPv4, []string{"10.1.0.5", "10.1.0.6"}, []string{"10.1.0.5", "10.1.0.6"}},
		{"IPv6 in canonical form", discoveryv1.AddressTypeIPv6, []string{"FD00:10::0005"}, []string{"fd00:10::5"}},
		{"an invalid address after a valid one", discoveryv1.AddressTypeIPv4, []string{"10.1.0.5", "127.0.0.1", "10.1.0.7"}, []string{"10.1.0.5", "10.1.0.7"}},
		{"a metadata address first", discoveryv1.AddressTypeIPv4, []string{"169.254.169.254", "10.1.0.5"}, []string{"10.1.0.5"}},
		{"IPv4 in an IPv6 slice", discoveryv1.AddressTypeIPv6, []string{"10.1.0.5", "::ffff:10.1.0.5"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &discoveryv1.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: "web-abcde"},
				AddressType: tt.addressType,
				Endpoints:   []discoveryv1.Endpoint{{Addresses: tt.addrs, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
			}
			got := ImportedSlice(src, "web", "cluster-a", "m", served("http"), nil)
			var addrs []string
			if len(got.Endpoints) > 0 {
				addrs = got.Endpoints[0].Addresses
			}
			if diff := cmp.Diff(tt.want, addrs); diff != "" {
				t.Errorf("addresses (-want +got):\n%s", diff)
			}
			if len(got.Endpoints) > 1 {
				t.Errorf("got %d endpoints from one", len(got.Endpoints))
			}
		})
	}
}

// TestImportedSliceHints: the hints are the import's trafficDistribution's,
// whatever hints the source cluster had (here, proportional ones pointing
// elsewhere).
func TestImportedSliceHints(t *testing.T) {
	src := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: "web-abcde"},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.1.0.5"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}, NodeName: ptr.To("node-1"), Zone: ptr.To("zone-a"),
				Hints: &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "zone-b"}}}},
			{Addresses: []string{"10.1.0.6"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}, NodeName: ptr.To("node-2")},
			{Addresses: []string{"10.1.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}, NodeName: ptr.To("node-3"), Zone: ptr.To("zone-a")},
		},
	}
	zone := func(z string) []discoveryv1.ForZone { return []discoveryv1.ForZone{{Name: z}} }
	node := func(n string) []discoveryv1.ForNode { return []discoveryv1.ForNode{{Name: n}} }
	for _, tc := range []struct {
		td   *string
		want []*discoveryv1.EndpointHints
	}{
		{td: nil, want: []*discoveryv1.EndpointHints{nil, nil, nil}},
		{td: ptr.To("SomethingNew"), want: []*discoveryv1.EndpointHints{nil, nil, nil}},
		{td: ptr.To(v1.ServiceTrafficDistributionPreferClose), want: []*discoveryv1.EndpointHints{{ForZones: zone("zone-a")}, nil, nil}},
		{td: ptr.To(v1.ServiceTrafficDistributionPreferSameZone), want: []*discoveryv1.EndpointHints{{ForZones: zone("zone-a")}, nil, nil}},
		{td: ptr.To(v1.ServiceTrafficDistributionPreferSameNode), want: []*discoveryv1.EndpointHints{{ForZones: zone("zone-a"), ForNodes: node("node-1")}, {ForNodes: node("node-2")}, nil}},
	} {
		got := ImportedSlice(src, "web", "cluster-a", "m", served("http"), tc.td)
		var hints []*discoveryv1.EndpointHints
		for _, ep := range got.Endpoints {
			hints = append(hints, ep.Hints)
		}
		if diff := cmp.Diff(tc.want, hints); diff != "" {
			t.Errorf("trafficDistribution %v: hints (-want +got):\n%s", ptr.Deref(tc.td, "<unset>"), diff)
		}
	}
	if src.Endpoints[0].Hints.ForZones[0].Name != "zone-b" {
		t.Errorf("ImportedSlice changed its input")
	}
}

func TestSliceName(t *testing.T) {
	a := SliceName("web", "cluster-a", "web-abcde")
	if a != SliceName("web", "cluster-a", "web-abcde") {
		t.Errorf("not deterministic")
	}
	if !strings.HasPrefix(a, "web-cluster-a-") || len(a) != len("web-cluster-a-")+sliceHashLength {
		t.Errorf("name %q", a)
	}
	for _, other := range []string{SliceName("web", "cluster-b", "web-abcde"), SliceName("web", "cluster-a", "web-fghij"), SliceName("web-cluster", "a", "web-abcde")} {
		if other == a {
			t.Errorf("two sources share the name %q", a)
		}
	}
	long := SliceName(strings.Repeat("s", 63), strings.Repeat("c", 253), strings.Repeat("x", 253))
	if errs := validation.IsDNS1123Subdomain(long); len(errs) > 0 {
		t.Errorf("long name %q: %v", long, errs)
	}
}

func TestForMember(t *testing.T) {
	slice := func() *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{mcsv1beta1.LabelSourceCluster: "cluster-a"}},
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"10.1.0.5"}, NodeName: ptr.To("node-1"), Zone: ptr.To("zone-a"),
					Hints: &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "zone-a"}}, ForNodes: []discoveryv1.ForNode{{Name: "node-1"}}}},
				{Addresses: []string{"10.1.0.6"}, NodeName: ptr.To("node-2"), Hints: &discoveryv1.EndpointHints{ForNodes: []discoveryv1.ForNode{{Name: "node-2"}}}},
			},
		}
	}
	own := slice()
	ForMember(own, "cluster-a")
	if diff := cmp.Diff(slice(), own); diff != "" {
		t.Errorf("the source cluster's own member lost something (-want +got):\n%s", diff)
	}
	other := slice()
	ForMember(other, "cluster-b")
	want := slice()
	want.Endpoints[0].NodeName, want.Endpoints[0].Hints.ForNodes = nil, nil
	want.Endpoints[1].NodeName, want.Endpoints[1].Hints = nil, nil
	if diff := cmp.Diff(want, other); diff != "" {
		t.Errorf("another member's slice (-want +got):\n%s", diff)
	}
}

func TestKeepWithin(t *testing.T) {
	slice := func() *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.1.0.5"}},
			{Addresses: []string{"192.168.7.7"}}, // another network's address
			{Addresses: []string{"172.30.0.1"}},  // a host-network pod on a node
		}}
	}
	s := slice()
	if dropped := KeepWithin(s, nil); dropped != nil || len(s.Endpoints) != 3 {
		t.Errorf("unknown ranges removed %v", dropped)
	}
	dropped := KeepWithin(s, []netip.Prefix{netip.MustParsePrefix("10.1.0.0/24"), netip.MustParsePrefix("172.30.0.1/32")})
	var kept []string
	for _, ep := range s.Endpoints {
		kept = append(kept, ep.Addresses...)
	}
	if !slices.Equal(dropped, []string{"192.168.7.7"}) || !slices.Equal(kept, []string{"10.1.0.5", "172.30.0.1"}) {
		t.Errorf("dropped %v kept %v", dropped, kept)
	}
}
