// Package upstream runs Kubernetes' own sig-network e2e specs, those of
// the pinned release, against a cluster: upstream's word that a cluster
// running our kube-proxy (gate on, our packages applied) still behaves as
// Kubernetes. Only the specs of test/e2e/network and
// test/e2e/common/network are linked in, so that the binary builds in a
// fraction of upstream's whole e2e.test; which of them run is
// hack/upstream-e2e.sh's -ginkgo.focus and -ginkgo.skip.
package upstream

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"k8s.io/component-base/version"
	conformancetestdata "k8s.io/kubernetes/test/conformance/testdata"
	"k8s.io/kubernetes/test/e2e"
	"k8s.io/kubernetes/test/e2e/framework"
	"k8s.io/kubernetes/test/e2e/framework/config"
	"k8s.io/kubernetes/test/e2e/framework/testfiles"
	e2etestingmanifests "k8s.io/kubernetes/test/e2e/testing-manifests"
	testfixtures "k8s.io/kubernetes/test/fixtures"
	imageutils "k8s.io/kubernetes/test/utils/image"

	// The specs: every [sig-network] spec of the release.
	_ "k8s.io/kubernetes/test/e2e/common/network"
	_ "k8s.io/kubernetes/test/e2e/network"

	// What upstream's e2e.test initializes besides its specs: failure
	// dumps, metrics grabbing, node checks and the output format.
	_ "k8s.io/kubernetes/test/e2e/framework/debug/init"
	_ "k8s.io/kubernetes/test/e2e/framework/metrics/init"
	_ "k8s.io/kubernetes/test/e2e/framework/node/init"
	_ "k8s.io/kubernetes/test/utils/ktesting/format"
)

func TestMain(m *testing.M) {
	showVersion := flag.Bool("version", false, "Print the Kubernetes version the specs are of, and exit.")
	showImages := flag.Bool("print-images", false, "Print, one per line, ROLE=IMAGE for the test images these specs run (hack/kind-images.sh builds them under these names), and exit.")
	config.CopyFlags(config.Flags, flag.CommandLine)
	framework.RegisterCommonFlags(flag.CommandLine)
	framework.RegisterClusterFlags(flag.CommandLine)
	flag.Parse()
	if *showVersion {
		fmt.Println(version.Get())
		os.Exit(0)
	}
	if *showImages {
		for _, i := range []struct {
			role string
			id   imageutils.ImageID
		}{{"agnhost", imageutils.Agnhost}, {"busybox", imageutils.BusyBox}, {"nginx", imageutils.Nginx}, {"glibc-dns-testing", imageutils.GlibcDnsTesting}} {
			fmt.Printf("%s=%s\n", i.role, imageutils.GetE2EImage(i.id))
		}
		fmt.Printf("pause=%s\n", imageutils.GetPauseImageName())
		os.Exit(0)
	}
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unknown arguments: %q\n", flag.Args())
		os.Exit(2)
	}
	// The manifests and fixtures some specs read, from the release's
	// embedded copies (no Kubernetes source tree here).
	testfiles.AddFileSource(e2etestingmanifests.GetE2ETestingManifestsFS())
	testfiles.AddFileSource(testfixtures.GetTestFixturesFS())
	testfiles.AddFileSource(conformancetestdata.GetConformanceTestdataFS())
	framework.AfterReadingAllFlags(&framework.TestContext)
	os.Exit(m.Run())
}

func TestSIGNetwork(t *testing.T) {
	e2e.RunE2ETests(t)
}
