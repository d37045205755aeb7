package framework

import (
	"context"
	"path/filepath"
	"testing"
)

// StartTestEtcd starts etcd for a test (skipping it when etcd and
// kube-apiserver are not built) and stops it when the test ends.
func StartTestEtcd(t testing.TB) *Etcd {
	t.Helper()
	SkipUnlessBuilt(t, "etcd", "kube-apiserver")
	etcd, err := StartEtcd(context.Background(), filepath.Join(t.TempDir(), "etcd"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(etcd.Stop)
	return etcd
}

// StartTestCluster starts a cluster on etcd for a test, in a directory of
// the test's when opts.Dir is empty, and stops it when the test ends.
func StartTestCluster(t testing.TB, etcd *Etcd, opts ClusterOptions) *Cluster {
	t.Helper()
	opts.Etcd = etcd
	if opts.Dir == "" {
		opts.Dir = filepath.Join(t.TempDir(), opts.Name)
	}
	cluster, err := StartCluster(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Stop)
	return cluster
}
