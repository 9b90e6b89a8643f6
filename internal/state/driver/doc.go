// Package driver renders the NVIDIA driver state: the driver container
// DaemonSet, which loads the kernel modules on each GPU node.
package driver
