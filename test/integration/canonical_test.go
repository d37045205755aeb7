package integration

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Upstream kube-proxy writes Services in map order, so two kube-proxies
// given the same input create chains, set elements and dispatch rules in
// different orders. The canonical forms below keep everything that
// decides where a packet goes (every object, every element, the order of
// rules within a chain) and drop only creation order and handles.

// canonicalNFT canonicalises the output of `nft -j list ruleset`.
func canonicalNFT(data string) (string, error) {
	var doc struct {
		Nftables []map[string]map[string]any `json:"nftables"`
	}
	if err := json.Unmarshal([]byte(data), &doc); err != nil {
		return "", fmt.Errorf("decoding nft JSON: %w", err)
	}
	var objects []string
	rules := map[string][]string{}
	for _, item := range doc.Nftables {
		for kind, obj := range item {
			if kind == "metainfo" {
				continue
			}
			delete(obj, "handle")
			if elems, ok := obj["elem"].([]any); ok {
				sort.Slice(elems, func(i, j int) bool { return mustJSON(elems[i]) < mustJSON(elems[j]) })
			}
			if kind == "rule" {
				chain := fmt.Sprintf("%v %v %v", obj["family"], obj["table"], obj["chain"])
				rules[chain] = append(rules[chain], mustJSON(obj["expr"])+" "+fmt.Sprint(obj["comment"]))
				continue
			}
			objects = append(objects, kind+" "+mustJSON(obj))
		}
	}
	sort.Strings(objects)
	var b strings.Builder
	for _, o := range objects {
		b.WriteString(o + "\n")
	}
	chains := make([]string, 0, len(rules))
	for c := range rules {
		chains = append(chains, c)
	}
	sort.Strings(chains)
	for _, c := range chains {
		b.WriteString("rules of " + c + ":\n")
		for _, r := range rules[c] {
			b.WriteString("  " + r + "\n")
		}
	}
	return b.String(), nil
}

func mustJSON(v any) string {
	out, _ := json.Marshal(v)
	return string(out)
}

// dispatchChains hold one rule per Service in map order; the order of
// their rules carries no meaning (each matches a distinct IP and port),
// except for the final nodeports rule, which sorts the same everywhere.
var dispatchChains = map[string]bool{
	"KUBE-SERVICES": true, "KUBE-NODEPORTS": true, "KUBE-EXTERNAL-SERVICES": true,
	"KUBE-PROXY-FIREWALL": true, "KUBE-FIREWALL": true,
}

// canonicalIPTables canonicalises iptables-save output: counters and
// comments dropped, chain declarations sorted, rules of dispatch chains
// sorted, other chains' rules kept in order.
func canonicalIPTables(data string) string {
	var out []string
	var decls []string
	rules := map[string][]string{}
	var chainOrder []string
	flush := func() {
		sort.Strings(decls)
		out = append(out, decls...)
		sort.Strings(chainOrder)
		for _, c := range chainOrder {
			r := rules[c]
			if dispatchChains[c] {
				sort.Strings(r)
			}
			out = append(out, r...)
		}
		decls, rules, chainOrder = nil, map[string][]string{}, nil
	}
	for _, line := range strings.Split(data, "\n") {
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "*"):
			out = append(out, line)
		case strings.HasPrefix(line, ":"):
			decls = append(decls, strings.Fields(line)[0])
		case strings.HasPrefix(line, "-A "):
			chain := strings.Fields(line)[1]
			if _, ok := rules[chain]; !ok {
				chainOrder = append(chainOrder, chain)
			}
			rules[chain] = append(rules[chain], line)
		case line == "COMMIT":
			flush()
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
