// Package v1alpha1 holds the NVIDIADriver API (group nvidia.com, version
// v1alpha1), with the NVIDIA GPU Operator's field names: one resource per
// driver pool, which the ClusterPolicy's driver.useNvidiaDriverCRD hands
// driver management to.
//
// +kubebuilder:object:generate=true
// +groupName=nvidia.com
package v1alpha1
