package explain

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/controller/maintenance"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// Node is what kubectl gpu why prints of one node.
type Node struct {
	Name string `json:"name"`
	// GPUNode is false for a node the operator does not serve.
	GPUNode bool   `json:"gpuNode"`
	Pool    string `json:"pool,omitempty"`
	// HeldUnder is the driver pool an operation holding the node keeps
	// it under, where it differs from Pool: its budgets, timeouts and
	// eviction settings stay that pool's until it ends.
	HeldUnder string `json:"heldUnderPool,omitempty"`
	Mode      string `json:"allocationMode,omitempty"`
	// States are the node's states in the chain's order.
	States []State `json:"states,omitempty"`
	// Operations are the maintenance operations the node's labels record.
	Operations []Operation `json:"operations,omitempty"`
	// Waiting is why a queued operation does not start (the maintenance
	// look's word on the node).
	Waiting        string `json:"waiting,omitempty"`
	ReadinessTaint bool   `json:"readinessTaint"`
	Cordoned       bool   `json:"cordoned"`
	// Next says what a person can do, each a command or a fact to check.
	Next []string `json:"next,omitempty"`
}

// State is one state of the chain on a node.
type State struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	// Reason is the node controller's word on a state not ready.
	Reason string `json:"reason,omitempty"`
	// Pod is the state's pod on the node, where it has one.
	Pod string `json:"pod,omitempty"`
}

// Operation is a maintenance operation as the node's labels record it.
type Operation struct {
	Name  string    `json:"name"`
	State string    `json:"state"`
	Since time.Time `json:"since,omitzero"`
	// Reason is the operation's own word on a failure, where it keeps one.
	Reason string `json:"reason,omitempty"`
}

// operationNotes are, per operation (gating.Operations), the name a
// person reads and the annotations that keep its since and its reason.
var operationNotes = map[string]struct{ name, since, reason string }{
	"upgrade":         {"driver upgrade", maintenance.AnnotationSince, ""},
	"repair":          {"repair", maintenance.AnnotationRemediationSince, maintenance.AnnotationReason},
	"mode-switch":     {"allocation mode switch", maintenance.AnnotationSwitchSince, gpuv1.AnnotationModeSwitchReason},
	"mig-reconfigure": {"MIG reconfiguration", maintenance.AnnotationMIGSince, gpuv1.AnnotationMIGReason},
}

// Facts are what the operator knows of a node beyond its labels.
type Facts struct {
	// Why is the node controller's judgement (node.Reconciler.Explain):
	// why each state not ready is not.
	Why map[state.Name]string
	// Pods are the states' pods on the node, in Namespace, the
	// operator's.
	Pods      map[state.Name]string
	Namespace string
	// RepairsAutoStart is the policy's remediation.autoStart.
	RepairsAutoStart bool
}

// ForNode explains a node: its states in graph's order (a state whose
// label is missing as the operator reads it: pending, or disabled where
// it gates only once labelled), each with why when it is not ready and
// its pod there, and the operations its labels record.
func ForNode(n *corev1.Node, graph *state.Graph, facts Facts) Node {
	out := Node{Name: n.Name, GPUNode: gating.IsGPUNode(n), Pool: n.Labels[gpuv1.LabelDriverPool],
		Mode: n.Labels[gpuv1.LabelAllocationMode], Waiting: n.Annotations[gpuv1.AnnotationMaintenanceWaiting],
		Cordoned:       n.Spec.Unschedulable,
		ReadinessTaint: slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == gpuv1.TaintGPUNotReady })}
	if !out.GPUNode {
		out.Next = append(out.Next, "the operator serves no GPU on this node: it needs NFD's label "+
			"feature.node.kubernetes.io/pci-10de.present=true, or nvidia.com/gpu.present=true")
		return out
	}
	for _, name := range graph.PerNode() {
		out.States = append(out.States, State{Name: string(name), Value: string(graph.ValueOf(name, n.Labels)),
			Reason: facts.Why[name], Pod: facts.Pods[name]})
	}
	if kept := n.Annotations[gpuv1.AnnotationMaintenancePool]; kept != "" && kept != out.Pool && maintenance.Held(n) {
		out.HeldUnder = kept
	}
	out.Operations = operationsOf(n)
	out.Next = next(n, out, facts)
	return out
}

// operationsOf are the operations the node's labels record as holding it.
func operationsOf(n *corev1.Node) []Operation {
	var out []Operation
	for _, op := range gating.Operations() {
		st := op.StateOn(n)
		if st == "" {
			continue
		}
		notes := operationNotes[op.Name]
		o := Operation{Name: notes.name, State: st}
		if t, err := time.Parse(time.RFC3339, n.Annotations[notes.since]); err == nil {
			o.Since = t
		}
		if notes.reason != "" {
			o.Reason = n.Annotations[notes.reason]
		}
		out = append(out, o)
	}
	return out
}

// next says what a person can do about the node, from the docs' own
// commands (docs/driver-upgrades.md, node-health.md, mig.md).
func next(n *corev1.Node, out Node, facts Facts) []string {
	var tips []string
	for _, o := range out.Operations {
		switch {
		case o.Name == "driver upgrade" && o.State == string(gpuv1.UpgradeFailed):
			tips = append(tips, fmt.Sprintf("the driver upgrade failed: once its cause is fixed, retry it with "+
				"kubectl label node %s %s=%s --overwrite", n.Name, gpuv1.LabelUpgradeState, gpuv1.UpgradeRequired))
		case o.Name == "repair" && o.State == string(gpuv1.RemediationRequired) && !facts.RepairsAutoStart &&
			n.Annotations[gpuv1.AnnotationRemediationApproved] != gpuv1.LabelTrue:
			tips = append(tips, fmt.Sprintf("the repair waits for a person (remediation.autoStart is off): approve it with "+
				"kubectl annotate node %s %s=true", n.Name, gpuv1.AnnotationRemediationApproved))
		case o.Name == "repair" && o.State == string(gpuv1.RemediationFailed):
			tips = append(tips, fmt.Sprintf("the repair failed and waits for a person: approve it to start over with "+
				"kubectl annotate node %s %s=true --overwrite, or reboot the node to validate it again", n.Name, gpuv1.AnnotationRemediationApproved))
		case o.Name == "repair" && o.State == string(gpuv1.RemediationRebootRequired):
			tips = append(tips, "nothing the operator can do healed the GPUs: reboot the node")
		case o.Name == "MIG reconfiguration" && o.State == string(gpuv1.MIGReconfigureFailed):
			tips = append(tips, fmt.Sprintf("the MIG reconfiguration failed: name another configuration in %s, or remove %s to start over",
				gpuv1.LabelMIGConfig, gpuv1.LabelMIGReconfigureState))
		}
	}
	for _, s := range out.States {
		if s.Value == string(gpuv1.StateFailed) {
			tips = append(tips, fmt.Sprintf("state %s failed: kubectl describe node %s shows its events", s.Name, n.Name))
		}
		if s.Pod != "" && s.Value != string(gpuv1.StateReady) && s.Value != string(gpuv1.StateDisabled) &&
			!strings.HasPrefix(s.Reason, "waiting for ") {
			tips = append(tips, fmt.Sprintf("state %s is %s: its pod's log says more: kubectl logs -n %s %s --all-containers",
				s.Name, s.Value, facts.Namespace, s.Pod))
		}
	}
	if out.Waiting != "" {
		tips = append(tips, "it waits: "+out.Waiting)
	}
	return tips
}
