package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSpecFile(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--root", "/r", "--log", "/l", "--log-format", "json", "--systemd-cgroup", "create", "--bundle", "/b", "--pid-file", "/p", "id"}, "/b/config.json"},
		{[]string{"create", "--bundle=/b", "id"}, "/b/config.json"},
		{[]string{"run", "id"}, "config.json"},
		{[]string{"--root", "/r", "exec", "--process", "/tmp/p.json", "--detach", "id"}, "/tmp/p.json"},
		{[]string{"--root", "/r", "start", "id"}, ""},
		{[]string{"--root", "/r", "delete", "--force", "id"}, ""},
	} {
		if got := specFile(c.args); got != c.want {
			t.Errorf("specFile(%v) = %q, want %q", c.args, got, c.want)
		}
	}
}

func TestFilterFileKeepsEverythingElse(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "config.json")
	in := `{"ociVersion":"1.2.0","process":{"capabilities":{"bounding":["CAP_CHOWN","CAP_SYS_RESOURCE"],"effective":["CAP_SYS_RESOURCE"],"permitted":["CAP_CHOWN"]}},` +
		`"linux":{"resources":{"memory":{"limit":9223372036854771712}}}}`
	if err := os.WriteFile(file, []byte(in), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := filterFile(file); err != nil {
		t.Fatal(err)
	}
	out, _ := os.ReadFile(file)
	got := string(out)
	if strings.Contains(got, "CAP_SYS_RESOURCE") || !strings.Contains(got, `"bounding":["CAP_CHOWN"]`) || !strings.Contains(got, `"effective":[]`) {
		t.Errorf("capabilities not filtered: %s", got)
	}
	if !strings.Contains(got, "9223372036854771712") {
		t.Errorf("a large number lost its precision: %s", got)
	}
}
