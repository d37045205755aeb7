package multicluster

// LiveHeap is the live heap after two collections, for the benchmarks of
// the external test package.
var LiveHeap = liveHeap
