// Package nvidiadriver reports on NVIDIADriver resources: the nodes of each
// one's pool, how many run its driver ready, and the nodes two of them
// select. It writes their status and events only; the ClusterPolicy
// controller renders the pools' DaemonSets and the maintenance controller
// upgrades their nodes.
package nvidiadriver
