package framework

import "testing"

// SkipUnlessBuilt skips the test when any of the named binaries has not been
// built, so that `go test ./...` passes on a machine that never ran
// hack/build-tools.sh. Any other error locating them fails the test.
func SkipUnlessBuilt(t testing.TB, binaries ...string) {
	t.Helper()
	for _, name := range binaries {
		if _, err := Binary(name); err != nil {
			t.Skipf("skipping: %s is not built; run hack/build-tools.sh %s (%v)", name, name, err)
		}
	}
}
