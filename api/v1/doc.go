// Package v1 holds the ClusterPolicy API (group nvidia.com, version v1): the
// one cluster-scoped object a user edits to describe the GPU node stack.
//
// +kubebuilder:object:generate=true
// +groupName=nvidia.com
package v1
