// Package draslices keeps a summary of the ResourceSlices NVIDIA's DRA
// driver publishes, by node: whether the node's GPU pool is complete, how
// many GPUs it names, and which of them carry a device taint. It is how
// the operator proves the dra-driver state ready on a node (the plugin has
// no readiness probe, so a Ready pod proves nothing), sees unhealthy GPUs
// on DRA nodes, and knows when a node's slices are gone after its plugin
// left.
//
// Only summaries are stored, as internal/operandpods does for pods: a
// slice of a node of eight GPUs is a few kilobytes, its summary a few
// hundred bytes.
package draslices
