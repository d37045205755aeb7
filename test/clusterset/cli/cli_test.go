package cli

import (
	"reflect"
	"testing"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/clusterset"
)

// `clusterset up --cluster-property` is repeatable and fills
// Options.ClusterProperties; a malformed one is a flag error.
func TestClusterPropertyFlag(t *testing.T) {
	var o clusterset.Options
	cmd := upCommand()
	cmd.ResetFlags()
	addClusterSetFlags(cmd, &o)
	if err := cmd.ParseFlags([]string{"--clusters=3", "--cluster-property=cluster-a=region.topology.k8s.io=eu", "--cluster-property", "cluster-c=region.topology.k8s.io=us"}); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{"cluster-a": {"region.topology.k8s.io": "eu"}, "cluster-c": {"region.topology.k8s.io": "us"}}
	if !reflect.DeepEqual(o.ClusterProperties, want) {
		t.Errorf("properties %v, want %v", o.ClusterProperties, want)
	}
	if got := cmd.Flags().Lookup("cluster-property").Value.String(); got != "cluster-a=region.topology.k8s.io=eu,cluster-c=region.topology.k8s.io=us" {
		t.Errorf("flag value %q", got)
	}
	if err := cmd.ParseFlags([]string{"--cluster-property=cluster-a"}); err == nil {
		t.Error("--cluster-property=cluster-a accepted")
	}
}
