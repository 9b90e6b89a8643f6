// Package nfd renders the node-feature-discovery state: nfd-master and the
// nfd-worker DaemonSet on every node, which label nodes with their PCI
// devices and OS. It is how GPU nodes are found.
package nfd
