package kubectlmcs

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestStatusTemplates: status picks fields out of its view as kubectl
// does with -o jsonpath, go-template and --template, keeps json and yaml
// its own, and names the formats it takes when given another.
func TestStatusTemplates(t *testing.T) {
	view := StatusView{Contexts: []MemberStatus{
		{Context: "kind-a", ClusterID: "cluster-a", Nodes: 2, GateOn: 2, GateKnown: 2},
		{Context: "kind-b", ClusterID: "cluster-b", Unreachable: "connection refused"},
	}}
	print := func(output string, flags ...string) (string, error) {
		t.Helper()
		p := newViewPrinter()
		cmd := &cobra.Command{}
		p.addFlags(cmd)
		if err := cmd.Flags().Parse(flags); err != nil {
			t.Fatal(err)
		}
		printer, err := p.printer(output)
		if err != nil || printer == nil {
			return "", err
		}
		var out bytes.Buffer
		err = printTemplate(&out, printer, view)
		return out.String(), err
	}
	for _, c := range []struct {
		output string
		flags  []string
		want   string
	}{
		{output: "jsonpath={.contexts[*].clusterID}", want: "cluster-a cluster-b"},
		{output: `jsonpath={range .contexts[?(@.unreachable)]}{.context}{"\n"}{end}`, want: "kind-b\n"},
		{output: "go-template={{range .contexts}}{{.context}}={{.nodes}} {{end}}", want: "kind-a=2 kind-b=0 "},
		{flags: []string{"--template={{len .contexts}}"}, want: "2"},
		{output: "jsonpath", flags: []string{"--template={.contexts[0].gateOn}"}, want: "2"},
	} {
		got, err := print(c.output, c.flags...)
		if err != nil || got != c.want {
			t.Errorf("-o %q %v: %q, %v; want %q", c.output, c.flags, got, err, c.want)
		}
	}
	for _, own := range []string{"", "json", "yaml"} {
		if p, err := newViewPrinter().printer(own); p != nil || err != nil {
			t.Errorf("-o %q went to a template printer (%v), want the command's own output", own, err)
		}
	}
	if _, err := print("name"); err == nil || !strings.Contains(err.Error(), "jsonpath") || !strings.Contains(err.Error(), "json") {
		t.Errorf("-o name: %v, want an error naming the formats status takes", err)
	}
	if _, err := print("jsonpath={.contexts[}"); err == nil {
		t.Errorf("a jsonpath that does not parse was taken")
	}
}
