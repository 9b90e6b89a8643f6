// Command hostcheck writes the host-side pieces of the operand pods, as
// the operator renders them for the default policy, to a directory: the
// driver pod's host-driver check and startup probe, the toolkit's
// readiness probe and the device plugin's /dev/char step, and the workload
// proof's command, with a copy of itself that reads the CUDA sample's run
// as the operator reads the proof's pod (-verdict).
// hack/host-check.sh runs them on a real GPU host, outside Kubernetes, to
// see that they do what the pods need of them there.
package main
