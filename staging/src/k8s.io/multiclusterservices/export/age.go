package export

import (
	"strings"
	"time"
)

// CompareAge is KEP-1645's "oldest export wins" as a comparison for
// slices.SortFunc and slices.BinarySearchFunc: negative when the object
// created at aCreated and named aName ranks before the one created at
// bCreated and named bName. The older ranks first; of two created in the
// same instant (the apiserver keeps seconds) the name that sorts first,
// so that every replica and every node ranks them alike.
//
// Every "oldest wins" of the project ranks by it: Merge the exports of a
// name (named by source cluster), kube-proxy the imports that claim one
// clusterset IP (by namespace/name), the controller's allocator the
// imports whose IPs it restores (by key), and the catalog the claims on a
// local name and the bindings of a global service.
func CompareAge(aCreated time.Time, aName string, bCreated time.Time, bName string) int {
	return CompareAgeFunc(aCreated, aName, bCreated, bName, strings.Compare)
}

// CompareAgeFunc is CompareAge for names of any type, ordered by
// compareNames, which runs only when the times are equal: kube-proxy's
// claims keep the import's namespace/name as a types.NamespacedName and
// build its string only for that tie.
func CompareAgeFunc[N any](aCreated time.Time, aName N, bCreated time.Time, bName N, compareNames func(a, b N) int) int {
	if c := aCreated.Compare(bCreated); c != 0 {
		return c
	}
	return compareNames(aName, bName)
}
