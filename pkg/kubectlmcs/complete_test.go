package kubectlmcs

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// `kubectl mcs <TAB>`: kubectl runs kubectl_complete-mcs with the words
// typed after `mcs`; it answers with the subcommands, their arguments
// and flags' values, as the shells' kubectl completion reads them.
func TestCompletion(t *testing.T) {
	for _, tc := range []struct {
		typed []string
		want  []string
	}{
		{[]string{""}, []string{"status", "get", "diagnose"}},
		{[]string{"get", ""}, []string{"exports", "imports"}},
		{[]string{"get", "imports", "-o", ""}, []string{"wide"}},
	} {
		var out bytes.Buffer
		cmd := NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &bytes.Buffer{}})
		cmd.SetOut(&out)
		cmd.SetArgs(Args("/usr/local/bin/"+CompletionCommandName, tc.typed))
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%q: %v", tc.typed, err)
		}
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			word, _, _ := strings.Cut(line, "\t")
			got = append(got, word)
		}
		for _, w := range tc.want {
			if !slices.Contains(got, w) {
				t.Errorf("kubectl mcs %s<TAB>: %v, want %s among them", strings.Join(tc.typed, " "), got, w)
			}
		}
		// The protocol's last line is the directive (":4" and the like).
		if last := got[len(got)-1]; !strings.HasPrefix(last, ":") {
			t.Errorf("kubectl mcs %s<TAB>: no directive line, %v", strings.Join(tc.typed, " "), got)
		}
	}
	// Started as kubectl-mcs, the arguments are the user's.
	if got := Args("kubectl-mcs", []string{"status"}); !slices.Equal(got, []string{"status"}) {
		t.Errorf("kubectl-mcs status runs %v", got)
	}
}
