package proxy

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// isDNS1035Label and isDNS1123Label must agree with validation's
// everywhere: a name they accept and validation refuses would reach the
// proxier.
func TestLabelChecksAgreeWithValidation(t *testing.T) {
	names := []string{"", "a", "web", "web-1", "1web", "-web", "web-", "Web", "we_b", "we.b", "a--b", "a1", "z9-x",
		"web.clusterset", "wéb", "1", "9a", "-", "a-", strings.Repeat("1", 63), strings.Repeat("1", 64), strings.Repeat("a", 63), strings.Repeat("a", 64), "a\x00", "a b"}
	// Every string of up to three characters over an alphabet with each
	// class of byte.
	alphabet := "az09-A._ \xff"
	var grow func(prefix string, n int)
	grow = func(prefix string, n int) {
		names = append(names, prefix)
		if n == 0 {
			return
		}
		for i := range len(alphabet) {
			grow(prefix+alphabet[i:i+1], n-1)
		}
	}
	grow("", 3)
	for _, name := range names {
		if got, want := isDNS1035Label(name), len(validation.IsDNS1035Label(name)) == 0; got != want {
			t.Errorf("isDNS1035Label(%q) = %v, validation says %v", name, got, want)
		}
		if got, valid := invalidServiceName(name), len(validation.IsDNS1035Label(name)) == 0; (got == "") != valid {
			t.Errorf("invalidServiceName(%q) = %q, validation says valid=%v", name, got, valid)
		}
		if got, want := isDNS1123Label(name), len(validation.IsDNS1123Label(name)) == 0; got != want {
			t.Errorf("isDNS1123Label(%q) = %v, validation says %v", name, got, want)
		}
		if got, valid := invalidPortName(name), len(validation.IsDNS1123Label(name)) == 0; (got == "") != valid {
			t.Errorf("invalidPortName(%q) = %q, validation says valid=%v", name, got, valid)
		}
	}
}
