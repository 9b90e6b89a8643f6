package gating

import (
	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// Operation is a maintenance operation as a node's label records it: the
// four machines that take a node out of service, in the arbiter's
// precedence.
type Operation struct {
	// Name is the operation's short name, the operation label of
	// gpu_operator_maintenance_nodes.
	Name string
	// Label is the node label that holds its state; Done is the state it
	// ends in, which holds nothing.
	Label string
	Done  string
}

// Operations returns the maintenance operations in the arbiter's
// precedence.
func Operations() []Operation {
	return []Operation{
		{Name: "upgrade", Label: gpuv1.LabelUpgradeState, Done: string(gpuv1.UpgradeDone)},
		{Name: "repair", Label: gpuv1.LabelRemediationState, Done: string(gpuv1.RemediationDone)},
		{Name: "mode-switch", Label: gpuv1.LabelModeSwitchState, Done: string(gpuv1.ModeSwitchDone)},
		{Name: "mig-reconfigure", Label: gpuv1.LabelMIGReconfigureState, Done: string(gpuv1.MIGReconfigureDone)},
	}
}

// StateOn is the operation's state on n, empty when its label records
// none or records done.
func (o Operation) StateOn(n *corev1.Node) string {
	if st := n.Labels[o.Label]; st != o.Done {
		return st
	}
	return ""
}
