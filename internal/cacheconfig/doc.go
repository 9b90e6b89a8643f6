// Package cacheconfig says what the operator's informer cache holds: its own
// objects (by label, in its namespace), every node with bulky fields
// stripped, and the ClusterPolicies. No Pod or Secret informer exists in
// it: the operand pods are summarised by package operandpods.
package cacheconfig
