// Package fakenode plays what a real GPU node does in reply to the
// operator's pods, for the simulated clusters (the envtest suite's and the
// kwok one): the kubelet advertises nvidia.com/gpu only while the device
// plugin runs, GPU feature discovery's labels appear only while it runs,
// the container runtime reports the NVIDIA handler only once the toolkit
// configured the runtime's own files, and a host with its own driver
// answers the driver pod's check. What a node is comes from its
// sim.gpu-operator.io/ annotations. Pods are Ready without running
// anything; this makes their effects on the node follow.
package fakenode
