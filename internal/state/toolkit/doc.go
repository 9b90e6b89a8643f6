// Package toolkit renders the container-toolkit state: the NVIDIA Container
// Toolkit DaemonSet, which makes the node's container runtime able to start
// GPU containers.
package toolkit
