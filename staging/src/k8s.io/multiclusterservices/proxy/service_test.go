package proxy

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func testOptions() *Options {
	return &Options{
		ClusterSetIPCIDRs: []netip.Prefix{netip.MustParsePrefix("10.250.0.0/16"), netip.MustParsePrefix("fd00:10:250::/108")},
		TrustedManagers:   []string{DefaultManagedBy},
	}
}

func testImport(mutate func(*mcsv1beta1.ServiceImport)) *mcsv1beta1.ServiceImport {
	si := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-1", Labels: map[string]string{LabelImportManagedBy: DefaultManagedBy}},
		Spec: mcsv1beta1.ServiceImportSpec{
			Type:  mcsv1beta1.ClusterSetIP,
			IPs:   []string{"10.250.0.10"},
			Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}},
		},
	}
	if mutate != nil {
		mutate(si)
	}
	return si
}

func TestServiceForImport(t *testing.T) {
	local := v1.ServiceInternalTrafficPolicyLocal
	bogusPolicy := v1.ServiceInternalTrafficPolicy("Nowhere")
	preferClose := v1.ServiceTrafficDistributionPreferClose
	timeout := int32(60)
	zero := int32(0)

	tests := []struct {
		name   string
		mutate func(*mcsv1beta1.ServiceImport)
		// want is applied to the Service expected for the unmutated import.
		want       func(*v1.Service)
		wantNil    bool
		wantReason Reason
	}{
		{
			name: "single-stack ClusterSetIP import",
		},
		{
			name: "dual-stack import keeps the order of its ips",
			mutate: func(si *mcsv1beta1.ServiceImport) {
				si.Spec.IPs = []string{"fd00:10:250::a", "10.250.0.10"}
				si.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}
			},
			want: func(s *v1.Service) {
				s.Spec.ClusterIP = "fd00:10:250::a"
				s.Spec.ClusterIPs = []string{"fd00:10:250::a", "10.250.0.10"}
				s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}
				s.Spec.IPFamilyPolicy = ptrTo(v1.IPFamilyPolicyRequireDualStack)
			},
		},
		{
			name:   "IPv6 written in a non-canonical form is canonicalised",
			mutate: func(si *mcsv1beta1.ServiceImport) { si.Spec.IPs = []string{"FD00:10:250:0::00a"} },
			want: func(s *v1.Service) {
				s.Spec.ClusterIP = "fd00:10:250::a"
				s.Spec.ClusterIPs = []string{"fd00:10:250::a"}
				s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol}
			},
		},
		{
			name: "ports default to TCP and keep appProtocol",
			mutate: func(si *mcsv1beta1.ServiceImport) {
				si.Spec.Ports = []mcsv1beta1.ServicePort{
					{Name: "http", Port: 80, AppProtocol: ptrTo("http")},
					{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53},
					{Name: "sctp", Protocol: v1.ProtocolSCTP, Port: 9999},
				}
			},
			want: func(s *v1.Service) {
				s.Spec.Ports = []v1.ServicePort{
					{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, AppProtocol: ptrTo("http")},
					{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53},
					{Name: "sctp", Protocol: v1.ProtocolSCTP, Port: 9999},
				}
			},
		},
		{
			name: "ClientIP affinity keeps its timeout",
			mutate: func(si *mcsv1beta1.ServiceImport) {
				si.Spec.SessionAffinity = v1.ServiceAffinityClientIP
				si.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: &timeout}}
			},
			want: func(s *v1.Service) {
				s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
				s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: &timeout}}
			},
		},
		{
			name:   "ClientIP affinity without a timeout gets the Service default",
			mutate: func(si *mcsv1beta1.ServiceImport) { si.Spec.SessionAffinity = v1.ServiceAffinityClientIP },
			want: func(s *v1.Service) {
				s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
				s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptrTo(int32(v1.DefaultClientIPServiceAffinitySeconds))}}
			},
		},
		{
			name: "traffic policy and distribution are carried over",
			mutate: func(si *mcsv1beta1.ServiceImport) {
				si.Spec.InternalTrafficPolicy = &local
				si.Spec.TrafficDistribution = &preferClose
			},
			want: func(s *v1.Service) {
				s.Spec.InternalTrafficPolicy = &local
				s.Spec.TrafficDistribution = &preferClose
			},
		},
		{
			name:    "headless import programs nothing",
			mutate:  func(si *mcsv1beta1.ServiceImport) { si.Spec.Type = mcsv1beta1.Headless; si.Spec.IPs = nil },
			wantNil: true,
		},
		{name: "import without a manager", mutate: func(si *mcsv1beta1.ServiceImport) { si.Labels = nil }, wantReason: ReasonUntrustedManager},
		{name: "import by an untrusted manager", mutate: func(si *mcsv1beta1.ServiceImport) { si.Labels[LabelImportManagedBy] = "attacker" }, wantReason: ReasonUntrustedManager},
		{name: "unknown type", mutate: func(si *mcsv1beta1.ServiceImport) { si.Spec.Type = "LoadBalancer" }, wantReason: ReasonInvalidType},
		{name: "invalid name", mutate: func(si *mcsv1beta1.ServiceImport) { si.Name = "Web_1" }, wantReason: ReasonInvalidName},
		{name: "no ips", mutate: func(si *mcsv1beta1.ServiceImport) { si.Spec.IPs = nil }, wantReason: ReasonNoIPs},
		{name: "garbage ip", mutate: func(si *mcsv1beta1.ServiceImport) { si.Spec.IPs = []string{"10.250.0.300"} }, wantReason: ReasonInvalidIP},
		{name: "ip with leading zeros", mutate: func(si *mcsv1beta1.ServiceImport) { si.Spec.IPs = []string{"10.250.0.010"} }, wantReason: ReasonInvalidIP},
		{name: "ip with a zone", mutate: func(si *mcsv1beta1.ServiceImport) { si.Spec.IPs = []string{"fd00:10:250::a%eth0"} }, wantReason: ReasonInvalidIP},
		{name: "loopback ip", mutate: func(si *mcsv1beta1.ServiceImport) { si.Spec.IPs = []string{"127.0.0.1"} }, wantReason: ReasonInvalidIP},
		{name: "IPv4-mapped IPv6", mutate: func(si *mcsv1beta1.ServiceImport) { si.Spec.IPs = []string{"::ffff:10.250.0.10"} }, wantReason: ReasonInvalidIP},
		{name: "two ips of one family", mutate: func(si *mcsv1beta1.ServiceImport) { si.Spec.IPs = []string{"10.250.0.10", "10.250.0.11"} }, wantReason: ReasonInvalidIP},
		{name: "three ips", mutate: func(si *mcsv1beta1.ServiceImport) {
			si.Spec.IPs = []string{"10.250.0.10", "fd00:10:250::a", "10.250.0.11"}
		}, wantReason: ReasonInvalidIP},
		{name: "ip outside the clusterset range", mutate: func(si *mcsv1beta1.ServiceImport) { si.Spec.IPs = []string{"10.96.0.1"} }, wantReason: ReasonIPOutsideClusterSetCIDR},
		{name: "public ip is not capturable", mutate: func(si *mcsv1beta1.ServiceImport) { si.Spec.IPs = []string{"8.8.8.8"} }, wantReason: ReasonIPOutsideClusterSetCIDR},
		{
			name: "ip family not listed in ipFamilies",
			mutate: func(si *mcsv1beta1.ServiceImport) {
				si.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol}
			},
			wantReason: ReasonIPFamilyMismatch,
		},
		{name: "no ports", mutate: func(si *mcsv1beta1.ServiceImport) { si.Spec.Ports = nil }, wantReason: ReasonNoPorts},
		// The attack: an import (the admission policy absent) that makes
		// every node program tens of thousands of ports.
		{name: "attack: more ports than an EndpointSlice serves", mutate: func(si *mcsv1beta1.ServiceImport) {
			si.Spec.Ports = nil
			for p := int32(1); p <= 20000; p++ {
				si.Spec.Ports = append(si.Spec.Ports, mcsv1beta1.ServicePort{Name: fmt.Sprintf("p%d", p), Protocol: v1.ProtocolTCP, Port: p})
			}
		}, wantReason: ReasonTooManyPorts},
		{name: "port 0", mutate: func(si *mcsv1beta1.ServiceImport) { si.Spec.Ports[0].Port = 0 }, wantReason: ReasonInvalidPort},
		{name: "port 65536", mutate: func(si *mcsv1beta1.ServiceImport) { si.Spec.Ports[0].Port = 65536 }, wantReason: ReasonInvalidPort},
		{name: "unknown protocol", mutate: func(si *mcsv1beta1.ServiceImport) { si.Spec.Ports[0].Protocol = "ICMP" }, wantReason: ReasonUnsupportedProtocol},
		{name: "invalid port name", mutate: func(si *mcsv1beta1.ServiceImport) { si.Spec.Ports[0].Name = "HTTP!" }, wantReason: ReasonInvalidPort},
		{
			name: "unnamed port among several",
			mutate: func(si *mcsv1beta1.ServiceImport) {
				si.Spec.Ports = append(si.Spec.Ports, mcsv1beta1.ServicePort{Port: 443})
			},
			wantReason: ReasonInvalidPort,
		},
		{
			name: "duplicate port name",
			mutate: func(si *mcsv1beta1.ServiceImport) {
				si.Spec.Ports = append(si.Spec.Ports, mcsv1beta1.ServicePort{Name: "http", Port: 443})
			},
			wantReason: ReasonDuplicatePort,
		},
		{
			name: "duplicate port and protocol",
			mutate: func(si *mcsv1beta1.ServiceImport) {
				si.Spec.Ports = append(si.Spec.Ports, mcsv1beta1.ServicePort{Name: "other", Port: 80})
			},
			wantReason: ReasonDuplicatePort,
		},
		{name: "unknown affinity", mutate: func(si *mcsv1beta1.ServiceImport) { si.Spec.SessionAffinity = "Cookie" }, wantReason: ReasonInvalidSessionAffinity},
		{
			name: "affinity timeout 0",
			mutate: func(si *mcsv1beta1.ServiceImport) {
				si.Spec.SessionAffinity = v1.ServiceAffinityClientIP
				si.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: &zero}}
			},
			wantReason: ReasonInvalidSessionAffinity,
		},
		{name: "unknown traffic policy", mutate: func(si *mcsv1beta1.ServiceImport) { si.Spec.InternalTrafficPolicy = &bogusPolicy }, wantReason: ReasonInvalidTrafficPolicy},
	}

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			si := testImport(tc.mutate)
			before := si.DeepCopy()
			got, err := ServiceForImport(si, testOptions())
			if diff := cmp.Diff(before, si); diff != "" {
				t.Errorf("translation modified its input (-before +after):\n%s", diff)
			}
			if tc.wantReason != "" {
				var rej *RejectionError
				if !errors.As(err, &rej) || rej.Reason != tc.wantReason {
					t.Fatalf("got error %v, want a rejection with reason %s", err, tc.wantReason)
				}
				if got != nil {
					t.Errorf("a rejected import produced a Service: %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if tc.wantNil {
				if got != nil {
					t.Fatalf("got a Service for an import that must program nothing: %+v", got)
				}
				return
			}
			want := &v1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web.clusterset", UID: "uid-1"},
				Spec: v1.ServiceSpec{
					Type:                  v1.ServiceTypeClusterIP,
					ClusterIP:             "10.250.0.10",
					ClusterIPs:            []string{"10.250.0.10"},
					IPFamilies:            []v1.IPFamily{v1.IPv4Protocol},
					IPFamilyPolicy:        ptrTo(v1.IPFamilyPolicySingleStack),
					Ports:                 []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}},
					SessionAffinity:       v1.ServiceAffinityNone,
					InternalTrafficPolicy: ptrTo(v1.ServiceInternalTrafficPolicyCluster),
				},
			}
			if tc.want != nil {
				tc.want(want)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("unexpected Service (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseCIDRs(t *testing.T) {
	for _, bad := range [][]string{
		nil, {""}, {"0.0.0.0/0"}, {"::/0"}, {"10.250.0.1/16"}, {"not-a-cidr"},
		// Ranges that admit (nearly) everything, alone or together.
		{"0.0.0.0/1", "128.0.0.0/1"}, {"10.0.0.0/8"}, {"10.0.0.0/12", "10.16.0.0/12"}, {"fd00::/8"},
		// Overlapping ranges.
		{"10.250.0.0/16", "10.250.1.0/24"},
		// Special-purpose addresses: the node's own or cloud platforms'.
		{"127.0.0.0/16"}, {"169.254.169.0/24"}, {"100.100.100.0/24"}, {"168.63.128.0/17"}, {"fd00:ec2::/112"},
		{"fe80::/64"}, {"::ffff:10.250.0.0/112"}, {"224.0.0.0/16"},
	} {
		if _, err := ParseCIDRs(bad); err == nil {
			t.Errorf("ParseCIDRs(%q) succeeded; want an error", bad)
		}
	}
	if _, err := ParseCIDRs([]string{"10.96.0.0/12", "fd00:10:250::/64"}); err != nil {
		t.Errorf("the largest accepted ranges are refused: %v", err)
	}
	got, err := ParseCIDRs(DefaultClusterSetIPCIDRs)
	if err != nil || len(got) != 2 {
		t.Fatalf("ParseCIDRs(default) = %v, %v", got, err)
	}
}

func TestCheckDisjoint(t *testing.T) {
	ranges, _ := ParseCIDRs(DefaultClusterSetIPCIDRs)
	if err := CheckDisjoint(ranges, "--cluster-cidr", []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}); err != nil {
		t.Errorf("disjoint ranges refused: %v", err)
	}
	err := CheckDisjoint(ranges, "--cluster-cidr", []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")})
	if err == nil || !strings.Contains(err.Error(), "--cluster-cidr 10.0.0.0/8") {
		t.Errorf("CheckDisjoint with a pod range holding the clusterset range = %v", err)
	}
}

func TestServiceName(t *testing.T) {
	if got := ServiceName("web"); got != "web.clusterset" {
		t.Errorf("ServiceName(web) = %q", got)
	}
	if name, ok := ImportName("web.clusterset"); !ok || name != "web" {
		t.Errorf("ImportName(web.clusterset) = %q, %v", name, ok)
	}
	if _, ok := ImportName("web"); ok {
		t.Errorf("ImportName(web) claims a real Service name is synthetic")
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestServiceForImportSharesCanonicalIPs: a translation shares the IPs of
// an import that writes them canonically, and cannot write into them.
func TestServiceForImportSharesCanonicalIPs(t *testing.T) {
	for _, ips := range [][]string{{"10.250.0.10"}, {"fd00:10:250::a", "10.250.0.10"}} {
		si := testImport(func(si *mcsv1beta1.ServiceImport) { si.Spec.IPs = ips })
		svc, err := ServiceForImport(si, testOptions())
		if err != nil {
			t.Fatal(err)
		}
		got := svc.Spec.ClusterIPs
		if &got[0] != &si.Spec.IPs[0] || cap(got) != len(got) {
			t.Errorf("%v: ClusterIPs are a copy, or may be appended into the import's list", ips)
		}
	}
	si := testImport(func(si *mcsv1beta1.ServiceImport) { si.Spec.IPs = []string{"FD00:10:250::A"} })
	svc, err := ServiceForImport(si, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIPs[0] != "fd00:10:250::a" || si.Spec.IPs[0] != "FD00:10:250::A" {
		t.Errorf("a non-canonical IP is canonicalised in a copy: got %v, import %v", svc.Spec.ClusterIPs, si.Spec.IPs)
	}
}

// As many ports as an EndpointSlice serves are programmed, every one.
func TestServiceForImportTakesAsManyPortsAsASlice(t *testing.T) {
	si := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "wide", Labels: map[string]string{LabelImportManagedBy: DefaultManagedBy}},
		Spec:       mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{"10.250.0.10"}},
	}
	for p := int32(1); p <= MaxImportPorts; p++ {
		si.Spec.Ports = append(si.Spec.Ports, mcsv1beta1.ServicePort{Name: fmt.Sprintf("p%d", p), Protocol: v1.ProtocolTCP, Port: p})
	}
	svc, err := ServiceForImport(si, &Options{ClusterSetIPCIDRs: []netip.Prefix{netip.MustParsePrefix("10.250.0.0/16")}, TrustedManagers: []string{DefaultManagedBy}})
	if err != nil || len(svc.Spec.Ports) != MaxImportPorts {
		t.Fatalf("%d ports: %v, %v", MaxImportPorts, err, svc)
	}
}
