package topology

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
)

// apiserver serves the ClusterProperty cluster.clusterset.k8s.io with
// value id, or 404 when id is empty.
func apiserver(t *testing.T, id string) *rest.Config {
	t.Helper()
	path := fmt.Sprintf("/apis/%s/%s/clusterproperties/%s", aboutv1alpha1.GroupName, "v1alpha1", aboutv1alpha1.ClusterIDProperty)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path != path || id == "" {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
			return
		}
		fmt.Fprintf(w, `{"apiVersion":"about.k8s.io/v1alpha1","kind":"ClusterProperty","metadata":{"name":%q},"spec":{"value":%q}}`, aboutv1alpha1.ClusterIDProperty, id)
	}))
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL}
}

// TestResolve: each member's answer decides its own fate only. A member
// without a usable ID is named in failed with why; IDs are returned as
// answered, duplicates too (the inventory settles who keeps one).
func TestResolve(t *testing.T) {
	tests := []struct {
		name       string
		ids        []string
		want       string
		wantFailed map[string]string
	}{
		{name: "distinct IDs", ids: []string{"east", "west"}, want: "east,west"},
		{name: "missing ID", ids: []string{"east", ""}, want: "east", wantFailed: map[string]string{"ctx-1": "no cluster ID"}},
		{name: "duplicate ID", ids: []string{"east", "east"}, want: "east,east"},
		{name: "ID that cannot label a slice", ids: []string{"East_1", "west"}, want: "west", wantFailed: map[string]string{"ctx-0": "not a valid RFC-1123 label"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			configs := map[string]*rest.Config{}
			var order []string
			for i, id := range tt.ids {
				name := fmt.Sprintf("ctx-%d", i)
				configs[name] = apiserver(t, id)
				order = append(order, name)
			}
			members, unreachable, failed := Resolve(context.Background(), configs, order, 5*time.Second)
			if len(failed) != len(tt.wantFailed) {
				t.Errorf("failed %v, want %v", failed, tt.wantFailed)
			}
			for name, want := range tt.wantFailed {
				err := failed[name]
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("failed[%s] = %v, want one containing %q", name, err, want)
					continue
				}
				// An ID missing or invalid is one kind of error to callers,
				// said once.
				if !errors.Is(err, ErrNoClusterID) || strings.Contains(err.Error(), "no cluster ID: invalid cluster ID") {
					t.Errorf("failed[%s] = %v: want ErrNoClusterID, said once", name, err)
				}
			}
			if len(unreachable) > 0 {
				t.Errorf("unreachable %v", unreachable)
			}
			var got []string
			for _, m := range members {
				got = append(got, m.ClusterID)
			}
			if strings.Join(got, ",") != tt.want {
				t.Errorf("IDs %v, want %s", got, tt.want)
			}
		})
	}
}

// TestResolveUnreachable: a member whose API does not answer is left out
// (and named) rather than keeping the others from working; with none
// answering, all are named, to join once they answer.
func TestResolveUnreachable(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close() // nothing listens there any more
	configs := map[string]*rest.Config{"east": apiserver(t, "east"), "west": {Host: down.URL}}
	members, unreachable, failed := Resolve(context.Background(), configs, []string{"east", "west"}, 1500*time.Millisecond)
	if len(failed) > 0 {
		t.Fatal(failed)
	}
	if len(members) != 1 || members[0].ClusterID != "east" || strings.Join(unreachable, ",") != "west" {
		t.Errorf("members %v, unreachable %v; want east, and west unreachable", members, unreachable)
	}
	members, unreachable, failed = Resolve(context.Background(), map[string]*rest.Config{"west": {Host: down.URL}}, []string{"west"}, 1500*time.Millisecond)
	if len(members) != 0 || len(failed) != 0 || strings.Join(unreachable, ",") != "west" {
		t.Errorf("with no member answering: members %v, unreachable %v, failed %v; want west unreachable", members, unreachable, failed)
	}
}
