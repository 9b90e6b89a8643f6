// Package migmanager renders the mig-manager state: NVIDIA's mig-manager,
// which applies a node's MIG configuration, run on a node only while the
// operator's reconfiguration of the node is at its apply step.
package migmanager
