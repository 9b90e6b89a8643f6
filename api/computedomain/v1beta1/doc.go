// Package v1beta1 holds the ComputeDomain API of NVIDIA's DRA driver (group
// resource.nvidia.com, version v1beta1), written here so that controller-gen
// generates the two CRDs the driver's compute-domain controller and kubelet
// plugin need; the operator ships them and reads or writes none of them.
//
// +kubebuilder:object:generate=true
// +groupName=resource.nvidia.com
package v1beta1
