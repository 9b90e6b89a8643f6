// Package controllers tests the ClusterPolicy and node controllers together
// against a real kube-apiserver, with the real manager running. No
// DaemonSet controller or kubelet runs under envtest, so a small simulator
// in the tests plays both: it places operand pods where the DaemonSets'
// node affinity allows and sets them Ready as each test says.
package controllers
