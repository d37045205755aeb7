package process

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCrashHeadSurvivesALongTrace: a process that panics writes its reason
// first and a trace after it, longer than the last lines a start-up
// failure prints; the reason is said all the same.
func TestCrashHeadSurvivesALongTrace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kube-proxy.log")
	log := []string{"I1203 started", "panic: runtime error: invalid memory address or nil pointer dereference [recovered]", "goroutine 215 [running]:"}
	for range 40 {
		log = append(log, "\tk8s.io/apimachinery/pkg/util/runtime.handleCrash(...)")
	}
	if err := os.WriteFile(path, []byte(strings.Join(log, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(Tail(path, 20), "panic: ") {
		t.Fatal("the fixture's trace is too short to push the reason out of the tail")
	}
	p := &Process{name: "kube-proxy", logPath: path}
	msg := p.Failure(os.ErrClosed).Error()
	if !strings.Contains(msg, "panic: runtime error: invalid memory address") {
		t.Errorf("the failure does not say why the process crashed:\n%s", msg)
	}
	if crashHead(filepath.Join(t.TempDir(), "missing.log"), 5) != "" {
		t.Error("a log that cannot be read has a crash head")
	}
}
