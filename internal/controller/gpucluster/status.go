package gpucluster

import (
	"cmp"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	gpuv1alpha1 "github.com/gpu-operator/gpu-operator/api/v1alpha1"
	"github.com/gpu-operator/gpu-operator/internal/driverpool"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// maxNamedNodes bounds how many nodes a condition message names.
const maxNamedNodes = 10

// noPolicy is the status's message where there is no ClusterPolicy. NVIDIA
// runs a GPUCluster instead of a ClusterPolicy; here the driver, the
// toolkit and the rest of the stack still come from the policy, and the
// GPUCluster only moves its pools to DRA.
const noPolicy = "this operator runs the GPU stack from a ClusterPolicy, and a GPUCluster puts that policy's driver " +
	"pools in allocation mode dra: create a ClusterPolicy (the chart's clusterPolicy.create=true)"

// buildStatus is the GPUCluster's status under the active policy (nil for
// none) and its pools. served says whether the API server serves DRA's
// ResourceSlices.
func buildStatus(gc *gpuv1alpha1.GPUCluster, cp *gpuv1.ClusterPolicy, served bool, pools *driverpool.Set, nodes []corev1.Node,
	namespace string) gpuv1alpha1.GPUClusterStatus {
	st := gpuv1alpha1.GPUClusterStatus{
		Namespace:          namespace,
		ObservedGeneration: gc.Generation,
		Conditions:         append([]metav1.Condition(nil), gc.Status.Conditions...),
		IgnoredFields:      gc.Spec.RefusedFields(),
		State:              gpuv1alpha1.StateNotReady,
	}
	if cp == nil {
		setConditions(&st, gc.Generation, gpuv1alpha1.ReasonPrerequisiteNotMet, noPolicy)
		return st
	}
	if why := gating.DRARefusal(cp, served); why != "" {
		setConditions(&st, gc.Generation, gpuv1alpha1.ReasonReconcileFailed,
			fmt.Sprintf("the GPUCluster puts every driver pool of ClusterPolicy %s in allocation mode dra, which cannot run here: %s",
				cp.Name, why))
		return st
	}
	var total int
	var waiting []string
	for i := range nodes {
		n := &nodes[i]
		if !gating.IsGPUNode(n) || !moves(n, pools) {
			continue
		}
		total++
		if why := notServing(n); why != "" {
			waiting = append(waiting, n.Name+" ("+why+")")
		}
	}
	st.ReadyNodes = fmt.Sprintf("%d/%d", total-len(waiting), total)
	if len(waiting) > 0 {
		msg := fmt.Sprintf("%d of %d GPU nodes serve their GPUs through DRA; not yet: %s", total-len(waiting), total, nameNodes(waiting))
		setConditions(&st, gc.Generation, gpuv1alpha1.ReasonOperandNotReady, msg)
		return st
	}
	st.State = gpuv1alpha1.StateReady
	msg := fmt.Sprintf("every GPU node (%d) of ClusterPolicy %s serves its GPUs through DRA", total, cp.Name)
	if total == 0 {
		msg = "no GPU nodes found: nodes are GPU nodes once NFD labels them feature.node.kubernetes.io/pci-10de.present=true, " +
			"or when labelled nvidia.com/gpu.present=true"
	}
	setConditions(&st, gc.Generation, gpuv1alpha1.ReasonReconciled, msg)
	return st
}

// moves reports whether the GPUCluster moves a GPU node to DRA: one
// opted out of the DRA driver (or of every operand) runs none, and one no
// pool holds (NVIDIADrivers in conflict, or none selecting it) keeps its
// mode, as the NVIDIADrivers' status says.
func moves(n *corev1.Node, pools *driverpool.Set) bool {
	if n.Labels[gpuv1.LabelDeployOperands] == "false" || n.Labels[gpuv1.DeployLabel(string(state.DRADriver))] == "false" {
		return false
	}
	return pools.Assign(n.Name, n.Labels).Mode != ""
}

// deletionHeld is the status of a GPUCluster being deleted that NVIDIA's
// operator's finalizer holds: the pools are back in their own modes
// already, and only a person can lift it.
func deletionHeld(gc *gpuv1alpha1.GPUCluster) gpuv1alpha1.GPUClusterStatus {
	st := *gc.Status.DeepCopy()
	st.State = gpuv1alpha1.StateNotReady
	setConditions(&st, gc.Generation, gpuv1alpha1.ReasonDeletionHeld, fmt.Sprintf("the GPUCluster is being deleted and "+
		"the driver pools are back in their own allocation modes, but NVIDIA's operator's finalizer %s holds it, and only "+
		"NVIDIA's operator removes it. Once NVIDIA's operator is gone, remove it: kubectl patch gpucluster %s --type=json "+
		`-p '[{"op":"remove","path":"/metadata/finalizers"}]'`, gpuv1alpha1.NVIDIAGPUClusterFinalizer, gc.Name))
	return st
}

// notServing says why a GPU node does not serve its GPUs through DRA yet,
// "" when it does: its allocation mode is dra and its DRA driver proved
// itself ready from its ResourceSlices.
func notServing(n *corev1.Node) string {
	mode := n.Labels[gpuv1.LabelAllocationMode]
	driver := n.Labels[gpuv1.StateLabel(string(state.DRADriver))]
	if mode == string(gpuv1.AllocationDRA) && driver == string(gpuv1.StateReady) {
		return ""
	}
	parts := []string{"allocation mode " + cmp.Or(mode, "unset")}
	if s := n.Labels[gpuv1.LabelModeSwitchState]; s != "" {
		parts = append(parts, "switch "+s)
	}
	if mode == string(gpuv1.AllocationDRA) {
		parts = append(parts, "dra-driver "+cmp.Or(driver, "unset"))
	}
	return strings.Join(parts, ", ")
}

func nameNodes(names []string) string {
	if len(names) <= maxNamedNodes {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:maxNamedNodes], ", "), len(names)-maxNamedNodes)
}

// setConditions sets Ready, True only for Reconciled, and Error, True
// where a person must act (no policy, DRA refused).
func setConditions(st *gpuv1alpha1.GPUClusterStatus, generation int64, reason, msg string) {
	ready := metav1.ConditionFalse
	if reason == gpuv1alpha1.ReasonReconciled {
		ready = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: gpuv1alpha1.ConditionReady, Status: ready,
		Reason: reason, Message: msg, ObservedGeneration: generation})
	errCond := metav1.Condition{Type: gpuv1alpha1.ConditionError, Status: metav1.ConditionFalse, Reason: gpuv1alpha1.ReasonReady,
		Message: "nothing to fix", ObservedGeneration: generation}
	switch reason {
	case gpuv1alpha1.ReasonPrerequisiteNotMet, gpuv1alpha1.ReasonReconcileFailed, gpuv1alpha1.ReasonDeletionHeld:
		errCond.Status, errCond.Reason, errCond.Message = metav1.ConditionTrue, reason, msg
	}
	meta.SetStatusCondition(&st.Conditions, errCond)
}
