// Command simagent plays the GPU side of the simulated cluster's fake
// nodes (hack/sim), where kwok only marks pods Ready: the GPUs a node
// advertises while the device plugin runs, GFD's labels while GFD runs, the
// NVIDIA runtime handler once the toolkit configured the node's own
// containerd, and the answer of a host that runs its own driver to the
// driver pod's check (internal/test/fakenode says how). hack/sim/up.sh
// starts it; it runs until killed.
package main
