// Package crd tests the ClusterPolicy CRD against a real kube-apiserver:
// samples apply, defaults are filled in, NVIDIA-style policies are accepted
// and invalid input is rejected with a message naming the field.
package crd
