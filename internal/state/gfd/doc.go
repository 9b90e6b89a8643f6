// Package gfd renders the gpu-feature-discovery state: the GFD DaemonSet,
// which labels nodes with their GPUs' product, memory and capabilities.
package gfd
