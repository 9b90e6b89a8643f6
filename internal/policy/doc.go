// Package policy finds the active ClusterPolicy: the oldest one not being
// deleted. Every other ClusterPolicy is ignored.
package policy
