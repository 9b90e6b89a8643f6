// Command benchscale is `make bench-scale`: it measures the operator on a
// simulated cluster of N fake GPU nodes (hack/sim) and prints one table,
// writing every figure to _output/bench/scale.json.
//
// One run is two fresh clusters. The first runs the operator as its own
// ServiceAccount, with an audit log of that user only, through a rollout, a
// quiet period, a reboot of some nodes and a fleet driver upgrade. The
// second applies the DaemonSets the operator rendered, with the operator's
// per-node gates removed, to measure the floor the ordered rollout is
// compared with. It is a benchmark, not a test: it reports what it measures
// and fails only when the cluster cannot get there at all.
//
// BENCH_OPERATOR_GODEBUG sets the operator's GODEBUG and no other
// process's: BENCH_OPERATOR_GODEBUG=gctrace=1 logs the operator's heap at
// each garbage collection to _output/bench/sim/logs/, where the peaks
// between the heap profiles show.
package main
