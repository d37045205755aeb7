package kubeproxy

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"k8s.io/component-base/version"
)

// appPath is the package upstream.go links into.
const appPath = "k8s.io/kubernetes/cmd/kube-proxy/app"

// TestLinkedSignatures reads upstream kube-proxy's source of the release
// this test binary is linked with (the pinned one, or a release's module
// under minors/) and checks that the functions upstream.go links to have
// there the signatures this build declares for them, every type named by
// its import path. A linkname to a
// function whose signature changed would link and then corrupt memory, so
// a version bump, or a release built with the wrong seam files, must fail
// here first.
func TestLinkedSignatures(t *testing.T) {
	upstream := upstreamSignatures(t, linkedAppDir(t))
	for name, fn := range map[string]any{"newProxyServer": newProxyServer, "platformCleanup": platformCleanup} {
		got, want := upstream[name], signature(reflect.TypeOf(fn))
		t.Logf("%s: %s", name, want)
		if got != want {
			t.Errorf("upstream %s is %s; upstream.go links to it as %s: update both together", name, got, want)
		}
	}
}

// signature writes function type fn with each named type as
// "import/path.Name".
func signature(fn reflect.Type) string {
	var in, out []string
	for i := range fn.NumIn() {
		in = append(in, typeName(fn.In(i)))
	}
	for i := range fn.NumOut() {
		out = append(out, typeName(fn.Out(i)))
	}
	return "func(" + strings.Join(in, ", ") + ") (" + strings.Join(out, ", ") + ")"
}

func typeName(t reflect.Type) string {
	switch {
	case t.Kind() == reflect.Pointer:
		return "*" + typeName(t.Elem())
	case t.Name() != "" && t.PkgPath() != "":
		return t.PkgPath() + "." + t.Name()
	}
	return t.String()
}

// upstreamSignatures returns, per top-level function of the Linux build of
// package dir, its type written as signature writes it.
func upstreamSignatures(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, file := range []string{"server.go", "server_linux.go"} {
		f, err := parser.ParseFile(fset, filepath.Join(dir, file), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		imports := map[string]string{}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			name := path[strings.LastIndex(path, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			imports[name] = path
		}
		name := func(e ast.Expr) string { return exprName(e, imports) }
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil {
				continue
			}
			var in, res []string
			for _, p := range fn.Type.Params.List {
				for range max(1, len(p.Names)) {
					in = append(in, name(p.Type))
				}
			}
			if fn.Type.Results != nil {
				for _, r := range fn.Type.Results.List {
					for range max(1, len(r.Names)) {
						res = append(res, name(r.Type))
					}
				}
			}
			out[fn.Name.Name] = "func(" + strings.Join(in, ", ") + ") (" + strings.Join(res, ", ") + ")"
		}
	}
	return out
}

func exprName(e ast.Expr, imports map[string]string) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return "*" + exprName(x.X, imports)
	case *ast.SelectorExpr:
		if id, ok := x.X.(*ast.Ident); ok {
			return imports[id.Name] + "." + x.Sel.Name
		}
	case *ast.Ident:
		if ast.IsExported(x.Name) {
			return appPath + "." + x.Name
		}
		return x.Name
	}
	return "?"
}

// linkedAppDir returns the source directory of upstream's kube-proxy app
// package of the release this test binary is linked with. A release's
// tests are stamped with its version, as its binaries are
// (hack/test-minors.sh passes kube_ldflags): its module is then looked up
// in the module cache. Unstamped, the test runs in this repository's
// module, whose pinned release go list names.
func linkedAppDir(t *testing.T) string {
	t.Helper()
	var out []byte
	var err error
	if v := version.Get().GitVersion; strings.HasPrefix(v, "v1.") {
		out, err = exec.Command("go", "mod", "download", "-json", "k8s.io/kubernetes@"+v).Output()
		var m struct{ Dir string }
		if err == nil {
			err = json.Unmarshal(out, &m)
		}
		out = []byte(m.Dir)
	} else {
		out, err = exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes").Output()
	}
	if err != nil || len(out) == 0 {
		t.Fatalf("locating k8s.io/kubernetes: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "cmd", "kube-proxy", "app")
	t.Logf("upstream's kube-proxy source: %s", dir)
	return dir
}
