// Package driverpool resolves the driver pools of the cluster: which
// driver settings each GPU node runs, from the ClusterPolicy's
// driver.nodePools or, under driver.useNvidiaDriverCRD, from NVIDIADriver
// resources. Every controller asks it the same question the same way, so
// the renderer, the node gates and the upgrade agree on a node's pool.
package driverpool
