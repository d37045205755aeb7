package proxy

import (
	"encoding/json"
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// FuzzServiceForImport feeds arbitrary ServiceImports (as JSON, the way they
// reach a proxy) and checks that translation never panics and that whatever
// it accepts is something the proxier can program safely.
func FuzzServiceForImport(f *testing.F) {
	seeds := []string{
		`{"metadata":{"name":"web","namespace":"ns","labels":{"app.kubernetes.io/managed-by":"mcs-controller.multicluster.x-k8s.io"}},"spec":{"type":"ClusterSetIP","ips":["10.250.0.1"],"ports":[{"port":80}]}}`,
		`{"metadata":{"name":"web","namespace":"ns","labels":{"app.kubernetes.io/managed-by":"someone"}},"spec":{"type":"ClusterSetIP","ips":["10.250.0.1"],"ports":[{"port":80}]}}`,
		`{"metadata":{"name":"web","namespace":"ns","labels":{"app.kubernetes.io/managed-by":"mcs-controller.multicluster.x-k8s.io"}},"spec":{"type":"ClusterSetIP","ips":["10.250.0.1","fd00:10:250::1"],"ipFamilies":["IPv4","IPv6"],"ports":[{"name":"a","port":80,"protocol":"UDP"},{"name":"b","port":81,"protocol":"SCTP"}],"sessionAffinity":"ClientIP"}}`,
		`{"metadata":{"name":"web"},"spec":{"type":"Headless","ports":[{"port":80}]}}`,
		`{"metadata":{"name":"web"},"spec":{"type":"ClusterSetIP","ips":["8.8.8.8"],"ports":[{"port":0}]}}`,
		`{"spec":{"type":"ClusterSetIP","ips":["::ffff:10.250.0.1"],"sessionAffinity":"ClientIP","sessionAffinityConfig":{"clientIP":{"timeoutSeconds":-1}}}}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var si mcsv1beta1.ServiceImport
		if json.Unmarshal(data, &si) != nil {
			return
		}
		opts := testOptions()
		svc, err := ServiceForImport(&si, opts)
		if err != nil || svc == nil {
			if svc != nil {
				t.Fatalf("rejected import produced a Service")
			}
			return
		}
		if !opts.trusts(si.Labels[LabelImportManagedBy]) {
			t.Fatalf("an import by untrusted manager %q produced a Service", si.Labels[LabelImportManagedBy])
		}
		if si.Spec.Type != mcsv1beta1.ClusterSetIP {
			t.Fatalf("a %q import produced a Service", si.Spec.Type)
		}
		if len(svc.Spec.ClusterIPs) == 0 || svc.Spec.ClusterIP != svc.Spec.ClusterIPs[0] || len(svc.Spec.ClusterIPs) != len(svc.Spec.IPFamilies) {
			t.Fatalf("inconsistent clusterIPs %v / %v", svc.Spec.ClusterIPs, svc.Spec.IPFamilies)
		}
		for _, s := range svc.Spec.ClusterIPs {
			ip, err := netip.ParseAddr(s)
			if err != nil || !opts.admits(ip) || ip.String() != s {
				t.Fatalf("accepted clusterIP %q outside the clusterset ranges or not canonical", s)
			}
		}
		if len(svc.Spec.Ports) == 0 {
			t.Fatalf("accepted an import without ports")
		}
		for _, p := range svc.Spec.Ports {
			if p.Port < 1 || p.Port > 65535 || (p.Protocol != v1.ProtocolTCP && p.Protocol != v1.ProtocolUDP && p.Protocol != v1.ProtocolSCTP) {
				t.Fatalf("accepted port %+v", p)
			}
		}
		if svc.Spec.SessionAffinity == v1.ServiceAffinityClientIP && (svc.Spec.SessionAffinityConfig == nil || svc.Spec.SessionAffinityConfig.ClientIP == nil || svc.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds == nil) {
			t.Fatalf("ClientIP affinity without a timeout would crash the proxier")
		}
	})
}

// FuzzEndpointSliceForImport checks that any accepted MCS slice carries only
// unicast addresses of its family and valid ports.
func FuzzEndpointSliceForImport(f *testing.F) {
	seeds := []string{
		`{"metadata":{"name":"s","labels":{"multicluster.kubernetes.io/service-name":"web","endpointslice.kubernetes.io/managed-by":"mcs-controller.multicluster.x-k8s.io"}},"addressType":"IPv4","endpoints":[{"addresses":["10.1.0.1"],"nodeName":"n"}],"ports":[{"port":80}]}`,
		`{"metadata":{"labels":{"multicluster.kubernetes.io/service-name":"web","endpointslice.kubernetes.io/managed-by":"mcs-controller.multicluster.x-k8s.io"}},"addressType":"IPv6","endpoints":[{"addresses":["::1"]}],"ports":[{"port":80,"protocol":"UDP"}]}`,
		`{"metadata":{"labels":{"multicluster.kubernetes.io/service-name":"web"}},"addressType":"FQDN","endpoints":[{"addresses":["example.com"]}]}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var s discoveryv1.EndpointSlice
		if json.Unmarshal(data, &s) != nil {
			return
		}
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		out, err := EndpointSliceForImport(&s, testOptions())
		if err != nil {
			return
		}
		if out.Labels[discoveryv1.LabelServiceName] != ServiceName(ImportNameOf(&s)) {
			t.Fatalf("accepted slice does not belong to the synthetic Service")
		}
		for _, ep := range out.Endpoints {
			if ep.NodeName != nil || (ep.Hints != nil && (len(ep.Hints.ForNodes) > 0 || len(ep.Hints.ForZones) == 0)) {
				t.Fatalf("remote endpoint kept its node name or node hints, or an empty hints object")
			}
			for _, a := range ep.Addresses {
				ip, err := netip.ParseAddr(a)
				if err != nil || !ip.IsGlobalUnicast() || ip.Is4() != (s.AddressType == discoveryv1.AddressTypeIPv4) {
					t.Fatalf("accepted address %q in a %s slice", a, s.AddressType)
				}
			}
		}
		for _, p := range out.Ports {
			if p.Port == nil || *p.Port < 1 || *p.Port > 65535 {
				t.Fatalf("accepted port %+v", p)
			}
		}
	})
}
