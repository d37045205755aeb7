package app

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/mcs"
)

// A standby replica is ready (a Deployment of several replicas becomes
// Available, and rolls), and says it stands by; a replica that has not
// built its controller yet is not.
func TestReadyzOfAStandby(t *testing.T) {
	ask := func(h *health) (int, string) {
		rec := httptest.NewRecorder()
		h.readyz(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code, strings.TrimSpace(rec.Body.String())
	}
	if code, body := ask(&health{}); code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "starting") {
		t.Errorf("before the controller is built: %d %q, want 503 starting", code, body)
	}
	code, body := ask(&health{ctrl: &mcs.Controller{}})
	if code != http.StatusOK || body != "ok: standby, another replica leads" {
		t.Errorf("standby: %d %q, want 200 and the word standby", code, body)
	}
	if body == "ok" {
		t.Error("a standby must be told from the leader, which answers a bare ok once its caches have synced")
	}
}

// /readyz answers anyone who reaches it: it says how many members have
// not synced, never which.
func TestReadyzNamesNoMember(t *testing.T) {
	rec := httptest.NewRecorder()
	h := &health{ctrl: fakeReadiness{"secret-cluster-7": false, "cluster-a": true}, leading: true}
	h.readyz(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if body := rec.Body.String(); rec.Code != http.StatusServiceUnavailable || strings.Contains(body, "secret-cluster-7") || !strings.Contains(body, "1 member") {
		t.Errorf("readyz: %d %q, want 503 counting one member without naming it", rec.Code, body)
	}
}

// fakeReadiness is a started controller whose members' caches have
// synced or not, by cluster ID.
type fakeReadiness map[string]bool

func (f fakeReadiness) Ready() <-chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}

func (f fakeReadiness) Synced() map[string]bool { return f }
