// Package cacheconfig says what the operator's informer cache holds: its own
// objects and pods (by label, in its namespace), every node with bulky
// fields stripped, and the ClusterPolicies. No cluster-wide Pod or Secret
// informer exists.
package cacheconfig
