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
