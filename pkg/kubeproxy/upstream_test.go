package kubeproxy

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLinkedSignatures reads upstream kube-proxy's source of the pinned
// version and checks that the functions this build links to still have the
// signatures declared in upstream.go. A linkname to a function whose
// signature changed would link and then corrupt memory, so a version bump
// must fail here first.
func TestLinkedSignatures(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes").Output()
	if err != nil {
		t.Fatalf("locating k8s.io/kubernetes: %v", err)
	}
	app := filepath.Join(strings.TrimSpace(string(out)), "cmd", "kube-proxy", "app")
	want := map[string]string{
		"newProxyServer":  "func(ctx context.Context, config *kubeproxyconfig.KubeProxyConfiguration, master string, initOnly bool, flagzReader flagz.Reader) (*ProxyServer, error)",
		"platformCleanup": "func(ctx context.Context, mode kubeproxyconfig.ProxyMode, cleanupAndExit bool) error",
	}
	got := map[string]string{}
	fset := token.NewFileSet()
	for _, file := range []string{"server.go", "server_linux.go"} {
		f, err := parser.ParseFile(fset, filepath.Join(app, file), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || want[fn.Name.Name] == "" {
				continue
			}
			var b bytes.Buffer
			if err := printer.Fprint(&b, fset, fn.Type); err != nil {
				t.Fatal(err)
			}
			got[fn.Name.Name] = b.String()
		}
	}
	for name, sig := range want {
		if got[name] != sig {
			t.Errorf("upstream %s is %q; upstream.go links to it as %q: update both together", name, got[name], sig)
		}
	}
}
