// Package gpucluster reports on NVIDIA's GPUCluster resource: whether a
// ClusterPolicy is there for it to lie over, whether the cluster can run
// the DRA driver, and how many GPU nodes serve their GPUs through it. It
// writes the status only: the GPUCluster's effect, every pool in
// allocation mode dra, is the driver pools' (internal/driverpool).
package gpucluster
