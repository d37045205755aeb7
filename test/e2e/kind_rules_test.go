package e2e

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// TestKindClusterImportRulesLikeService: on a kind node, the rules our
// kube-proxy programs for an import are the rules upstream's nftables
// proxier programs for a plain Service of the same ports and endpoints.
// A exports a Service (two pods, a TCP and a UDP port; once without and
// once with ClientIP affinity, which gives each endpoint a chain and an
// affinity set); B has a selector-less Service with the same ports and
// affinity and an EndpointSlice naming the same pods. In B's node's table
// ip kube-proxy, every chain, set, rule and map element of each (the
// import's synthetic Service <name>.clusterset, and the plain one) is
// compared with names, chain hashes and the service IP masked: same
// chains, same rules in the same order, same elements. Both IPs also
// answer with A's pods.
func TestKindClusterImportRulesLikeService(t *testing.T) {
	k := requireKind(t)
	s := &suite{p: k, a: k.ms[0], b: k.ms[1], top: t}
	sp := s.space(t, "e2e-rules-shape")
	client := sp.client(s.b, "client")
	for _, variant := range []struct {
		name     string
		affinity func(*v1.ServiceSpec)
	}{
		{"web", func(*v1.ServiceSpec) {}},
		{"sticky", clientIPAffinity(300)},
	} {
		t.Run(variant.name, func(t *testing.T) {
			spec := func(spec *v1.ServiceSpec) {
				spec.Ports = []v1.ServicePort{
					{Name: "tcp", Port: 80, TargetPort: intstr.FromInt(8080), Protocol: v1.ProtocolTCP},
					{Name: "udp", Port: 80, TargetPort: intstr.FromInt(8080), Protocol: v1.ProtocolUDP},
				}
				variant.affinity(spec)
			}
			sp.service(s.a, variant.name, spec)
			ips := sp.echoPods(s.a, variant.name, variant.name+"-a-1", variant.name+"-a-2")
			want := podNames(ips)
			sp.export(s.a, variant.name)
			vip := sp.vip(s.b, variant.name)

			// What a user would write by hand for the same endpoints.
			plainName := variant.name + "-plain"
			plain := sp.service(s.b, plainName, func(s *v1.ServiceSpec) { spec(s); s.Selector = nil })
			slice := &discoveryv1.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Name: plainName + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: plainName}},
				AddressType: discoveryv1.AddressTypeIPv4,
			}
			for _, port := range plain.Spec.Ports {
				slice.Ports = append(slice.Ports, discoveryv1.EndpointPort{Name: ptr.To(port.Name), Port: ptr.To[int32](8080), Protocol: ptr.To(port.Protocol)})
			}
			for _, pod := range want {
				slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
					Addresses:  []string{ips[pod]},
					Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
				})
			}
			if _, err := s.b.Client.DiscoveryV1().EndpointSlices(sp.name).Create(t.Context(), slice, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			reached := want
			if variant.name == "sticky" {
				reached = nil // one client sticks to one pod
			}
			for _, ip := range []string{vip, plain.Spec.ClusterIP} {
				eventually(t, 60*time.Second, hostPort(ip, 80)+" to answer with A's pods", func() (bool, string) {
					got := client.answers("tcp", hostPort(ip, 80), 10)
					ok := len(got) > 0 && slices.IndexFunc(got, func(p string) bool { return !slices.Contains(want, p) }) < 0
					return ok && (reached == nil || slices.Equal(got, reached)), strings.Join(got, ",")
				})
			}

			var imported, local []string
			eventually(t, 60*time.Second, "the import's rules to have the plain Service's shape", func() (bool, string) {
				out, err := k.nodeExec(t.Context(), s.b, s.b.Node, "nft", "-j", "list", "table", "ip", "kube-proxy")
				if err != nil {
					return false, err.Error()
				}
				if imported, err = serviceRules(out, sp.name, variant.name+".clusterset", vip); err != nil {
					return false, err.Error()
				}
				if local, err = serviceRules(out, sp.name, plainName, plain.Spec.ClusterIP); err != nil {
					return false, err.Error()
				}
				return slices.Equal(imported, local) && len(imported) > 0, shapeDiff(imported, local)
			})
			// The import is programmed at all: its service chains, and
			// every endpoint of A behind each port.
			text := strings.Join(imported, "\n")
			for _, want := range []string{"chain service-HASH-SVC/tcp/tcp", "chain service-HASH-SVC/udp/udp"} {
				if !slices.Contains(imported, want) {
					t.Errorf("the import's rules have no %q:\n%s", want, text)
				}
			}
			for _, pod := range want {
				if !hasIP(text, ips[pod]) {
					t.Errorf("the import's rules never name %s's address %s:\n%s", pod, ips[pod], text)
				}
			}
			t.Logf("RULE SHAPE on %s/%s: the import %s/%s (%s) and the Service %s/%s (%s) have the same %d chains, sets, rules and elements:\n%s",
				s.b.Name, s.b.Node, sp.name, variant.name, vip, sp.name, plainName, plain.Spec.ClusterIP, len(imported), text)
		})
	}
}

// serviceRules extracts from `nft -j list table ...` what the nftables
// proxier programs for Service ns/name with cluster IP ip: its chains
// and sets (named service-, local-, endpoint-, affinity-, external-,
// firewall-<hash>-ns/name/...) with their rules in order (a set's
// elements are clients, not rules), and every map or set element and every
// other rule that names the IP or one of those chains. Names are masked (the hash as
// HASH, ns/name as SVC, the IP as VIP), so two Services that the proxier
// treats alike give the same sorted lines.
func serviceRules(data []byte, ns, name, ip string) ([]string, error) {
	var doc struct {
		Nftables []map[string]map[string]any `json:"nftables"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("decoding nft JSON: %w", err)
	}
	chainName := `(service|local|endpoint|affinity|external|firewall)-[A-Z2-7]{8}-` + regexp.QuoteMeta(ns+"/"+name+"/")
	own := regexp.MustCompile(`^` + chainName)
	anyOwn := regexp.MustCompile(chainName)
	ipRE := regexp.MustCompile(`(^|[^0-9.])` + regexp.QuoteMeta(ip) + `([^0-9]|$)`)
	masker := func(s string) string {
		s = anyOwn.ReplaceAllString(s, "${1}-HASH-SVC/")
		s = strings.ReplaceAll(s, ns+"/"+name, "SVC")
		return ipRE.ReplaceAllString(s, "${1}VIP${2}")
	}
	mentions := func(s string) bool { return hasIP(s, ip) || strings.Contains(s, "-"+ns+"/"+name+"/") }
	var lines []string
	position := map[string]int{}
	for _, item := range doc.Nftables {
		for kind, obj := range item {
			switch kind {
			case "chain":
				if chain, _ := obj["name"].(string); own.MatchString(chain) {
					lines = append(lines, "chain "+masker(chain))
				}
			case "rule":
				chain, _ := obj["chain"].(string)
				expr := mustJSON(obj["expr"])
				switch {
				case own.MatchString(chain):
					// The rules of the Service's own chains, in order.
					position[chain]++
					lines = append(lines, fmt.Sprintf("rule %d of %s: %s", position[chain], masker(chain), masker(expr)))
				case mentions(expr):
					lines = append(lines, fmt.Sprintf("rule of %s: %s", chain, masker(expr)))
				}
			case "set", "map":
				if set, _ := obj["name"].(string); own.MatchString(set) {
					delete(obj, "handle")
					delete(obj, "elem")
					lines = append(lines, kind+" "+masker(mustJSON(obj)))
					continue
				}
				elems, _ := obj["elem"].([]any)
				for _, e := range elems {
					if s := mustJSON(e); mentions(s) {
						lines = append(lines, fmt.Sprintf("element of %s %v: %s", kind, obj["name"], masker(s)))
					}
				}
			}
		}
	}
	slices.Sort(lines)
	return lines, nil
}

func mustJSON(v any) string {
	out, _ := json.Marshal(v)
	return string(out)
}

// shapeDiff lists the lines only one side has.
func shapeDiff(imported, local []string) string {
	var out []string
	for _, l := range imported {
		if !slices.Contains(local, l) {
			out = append(out, "import only: "+l)
		}
	}
	for _, l := range local {
		if !slices.Contains(imported, l) {
			out = append(out, "Service only: "+l)
		}
	}
	return strings.Join(out, "\n")
}
