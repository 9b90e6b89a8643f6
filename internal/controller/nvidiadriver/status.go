package nvidiadriver

import (
	"fmt"
	"slices"
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

// notManaged says why the operator does not act on NVIDIADrivers under the
// active policy, "" when it does.
func notManaged(cp *gpuv1.ClusterPolicy) string {
	switch {
	case cp == nil:
		return "no ClusterPolicy: create one with driver.useNvidiaDriverCRD=true (the chart's driver.nvidiaDriverCRD.enabled=true)"
	case !cp.Spec.Driver.UsesNVIDIADrivers():
		return fmt.Sprintf("ClusterPolicy %s does not hand the driver to NVIDIADrivers: set its driver.useNvidiaDriverCRD to true "+
			"(the chart's driver.nvidiaDriverCRD.enabled=true)", cp.Name)
	case !cp.Spec.Driver.IsEnabled():
		return fmt.Sprintf("ClusterPolicy %s has driver.enabled=false: no driver is deployed", cp.Name)
	}
	return ""
}

// buildStatus is an NVIDIADriver's status: the GPU nodes its pool holds,
// how many run its driver ready, and the nodes it conflicts on.
// missingConfig names the kernelModuleConfig ConfigMap the NVIDIADriver
// names and that does not exist, "" when there is none.
func buildStatus(nvd *gpuv1alpha1.NVIDIADriver, cp *gpuv1.ClusterPolicy, pools *driverpool.Set, nodes []corev1.Node,
	namespace, missingConfig string) gpuv1alpha1.NVIDIADriverStatus {
	st := gpuv1alpha1.NVIDIADriverStatus{
		Namespace:          namespace,
		ObservedGeneration: nvd.Generation,
		Conditions:         append([]metav1.Condition(nil), nvd.Status.Conditions...),
		IgnoredFields:      nvd.Spec.RefusedFields(),
	}
	if why := notManaged(cp); why != "" {
		st.State = gpuv1alpha1.StateDisabled
		setConditions(&st, nvd.Generation, metav1.ConditionFalse, gpuv1alpha1.ReasonNotManaged, why, "")
		return st
	}
	var members, ready, notReady []string
	var missing int32
	kernels := map[string]*gpuv1alpha1.KernelImage{}
	for i := range nodes {
		n := &nodes[i]
		if !gating.IsGPUNode(n) {
			continue
		}
		a := pools.Assign(n.Name, n.Labels)
		if slices.Contains(a.Conflicts, nvd.Name) {
			others := slices.DeleteFunc(slices.Clone(a.Conflicts), func(s string) bool { return s == nvd.Name })
			st.Conflicts = append(st.Conflicts, gpuv1alpha1.NodeConflict{Node: n.Name, With: others})
			continue
		}
		if len(a.Conflicts) > 0 || a.Unclaimed || a.Pool != nvd.Name {
			continue
		}
		members = append(members, n.Name)
		if a.Image != "" {
			countKernel(kernels, a, pools.Images[a.Image])
		}
		if runsItsDriver(n, nvd.Name) {
			ready = append(ready, n.Name)
		} else {
			notReady = append(notReady, n.Name)
		}
	}
	conflicts := len(st.Conflicts)
	slices.SortFunc(st.Conflicts, func(a, b gpuv1alpha1.NodeConflict) int { return strings.Compare(a.Node, b.Node) })
	if len(st.Conflicts) > gpuv1alpha1.MaxConflicts {
		st.Conflicts = st.Conflicts[:gpuv1alpha1.MaxConflicts]
	}
	st.Kernels, missing = kernelList(kernels)
	st.Nodes = int32(len(members))
	st.ReadyNodes = fmt.Sprintf("%d/%d", len(ready), len(members))
	switch {
	case missingConfig != "":
		st.State = gpuv1alpha1.StateNotReady
		setConditions(&st, nvd.Generation, metav1.ConditionFalse, gpuv1alpha1.ReasonKernelModuleConfigMissing, "",
			fmt.Sprintf("kernelModuleConfig names ConfigMap %s, which does not exist in namespace %s: create it or unset "+
				"kernelModuleConfig. The %d nodes keep the driver they run until then", missingConfig, namespace, len(members)))
	case missing > 0:
		st.State = gpuv1alpha1.StateNotReady
		setConditions(&st, nvd.Generation, metav1.ConditionFalse, gpuv1alpha1.ReasonPrecompiledImageMissing, "",
			fmt.Sprintf("%d of its %d nodes boot a kernel whose precompiled image cannot be pulled (%s): each keeps the "+
				"driver it runs, and one without gets none. Boot a kernel NVIDIA publishes images for, or move the nodes "+
				"to an NVIDIADriver without usePrecompiled", missing, len(members), describeMissing(st.Kernels)))
	case !nvd.Spec.Runs():
		st.State = gpuv1alpha1.StateNotReady
		setConditions(&st, nvd.Generation, metav1.ConditionFalse, gpuv1alpha1.ReasonUnsupportedDriverType, "",
			fmt.Sprintf("driverType %s is not run by this operator: its %d nodes get no driver. Use driverType gpu, or "+
				"NVIDIA's operator for vGPU", nvd.Spec.DriverType, len(members)))
	case conflicts > 0:
		st.State = gpuv1alpha1.StateNotReady
		reason := gpuv1alpha1.ReasonConflictingNodeSelector
		what := "another NVIDIADriver also selects"
		if nvd.Spec.Default && onlyDefaults(pools, st.Conflicts) {
			reason, what = gpuv1alpha1.ReasonMultipleDefaults, "another default NVIDIADriver would also take"
		}
		setConditions(&st, nvd.Generation, metav1.ConditionFalse, reason, "", fmt.Sprintf(
			"%s. %s %d of the GPU nodes this one selects (%s): each keeps the driver it runs and none is replaced until "+
				"only one NVIDIADriver selects it. Change a nodeSelector or nodeAffinity, or the nodes' labels",
			nvidiaConflict(nvd.Name, st.Conflicts[0], reason == gpuv1alpha1.ReasonMultipleDefaults), what, conflicts,
			describeConflicts(st.Conflicts)))
	case len(notReady) > 0:
		st.State = gpuv1alpha1.StateNotReady
		setConditions(&st, nvd.Generation, metav1.ConditionFalse, gpuv1alpha1.ReasonNodesNotReady,
			fmt.Sprintf("the driver is not ready on %d of %d nodes: %s", len(notReady), len(members), names(notReady)), "")
	default:
		st.State = gpuv1alpha1.StateReady
		msg := fmt.Sprintf("the driver is ready on every one of its %d nodes", len(members))
		reason := gpuv1alpha1.ReasonReady
		if len(members) == 0 {
			msg, reason = "no GPU node is selected by this NVIDIADriver", gpuv1alpha1.ReasonNoNodes
		}
		setConditions(&st, nvd.Generation, metav1.ConditionTrue, reason, msg, "")
	}
	return st
}

// countKernel counts a node of a precompiled pool towards its kernel.
func countKernel(kernels map[string]*gpuv1alpha1.KernelImage, a driverpool.Assignment, v driverpool.ImageVerdict) {
	k := kernels[a.Image]
	if k == nil {
		k = &gpuv1alpha1.KernelImage{Kernel: a.Kernel, Image: a.Image, State: gpuv1alpha1.ImageChecking}
		switch v.State {
		case driverpool.ImageAvailable:
			k.State = gpuv1alpha1.ImageAvailable
		case driverpool.ImageMissing:
			k.State, k.Message = gpuv1alpha1.ImageMissing, v.Message
		}
		kernels[a.Image] = k
	}
	k.Nodes++
}

// kernelList returns the kernels, missing images first, then by kernel,
// at most MaxKernels; and how many nodes boot one whose image is missing.
func kernelList(kernels map[string]*gpuv1alpha1.KernelImage) ([]gpuv1alpha1.KernelImage, int32) {
	var out []gpuv1alpha1.KernelImage
	var missing int32
	for _, k := range kernels {
		out = append(out, *k)
		if k.State == gpuv1alpha1.ImageMissing {
			missing += k.Nodes
		}
	}
	slices.SortFunc(out, func(a, b gpuv1alpha1.KernelImage) int {
		if am, bm := a.State == gpuv1alpha1.ImageMissing, b.State == gpuv1alpha1.ImageMissing; am != bm {
			if am {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Image, b.Image)
	})
	if len(out) > gpuv1alpha1.MaxKernels {
		out = out[:gpuv1alpha1.MaxKernels]
	}
	return out, missing
}

func describeMissing(kernels []gpuv1alpha1.KernelImage) string {
	var parts []string
	for _, k := range kernels {
		if k.State == gpuv1alpha1.ImageMissing {
			parts = append(parts, fmt.Sprintf("kernel %s on %d nodes: %s, %s", k.Kernel, k.Nodes, k.Image, k.Message))
		}
	}
	return strings.Join(parts, "; ")
}

// runsItsDriver reports whether a node of the pool runs the pool's driver,
// ready: in the pool (its label moves with the upgrade that brings the
// driver), not waiting for or in an upgrade, and its driver ready, or
// disabled (the host's own driver, or the node opted out).
func runsItsDriver(n *corev1.Node, pool string) bool {
	switch gpuv1.UpgradeState(n.Labels[gpuv1.LabelUpgradeState]) {
	case "", gpuv1.UpgradeDone:
	default:
		return false
	}
	switch gpuv1.StateValue(n.Labels[gpuv1.StateLabel(string(state.Driver))]) {
	case gpuv1.StateDisabled:
		return true
	case gpuv1.StateReady:
		return n.Labels[gpuv1.LabelDriverPool] == pool
	}
	return false
}

// setConditions sets Ready (with readyMsg) and Error: True with errMsg
// when it is not empty.
func setConditions(st *gpuv1alpha1.NVIDIADriverStatus, generation int64, ready metav1.ConditionStatus, reason, readyMsg, errMsg string) {
	if readyMsg == "" {
		readyMsg = errMsg
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: gpuv1alpha1.ConditionReady, Status: ready,
		Reason: reason, Message: readyMsg, ObservedGeneration: generation})
	errCond := metav1.Condition{Type: gpuv1alpha1.ConditionError, Status: metav1.ConditionFalse, Reason: gpuv1alpha1.ReasonReady,
		Message: "nothing to fix", ObservedGeneration: generation}
	if errMsg != "" {
		errCond.Status, errCond.Reason, errCond.Message = metav1.ConditionTrue, reason, errMsg
	}
	meta.SetStatusCondition(&st.Conditions, errCond)
}

// onlyDefaults reports whether every NVIDIADriver a conflict names is a
// default one: two defaults, rather than overlapping selectors.
func onlyDefaults(pools *driverpool.Set, conflicts []gpuv1alpha1.NodeConflict) bool {
	for _, c := range conflicts {
		for _, name := range c.With {
			if p := pools.Pool(name); p == nil || !p.IsDefault() {
				return false
			}
		}
	}
	return true
}

// nvidiaConflict is NVIDIA's words for a conflict, which NVIDIA users'
// scripts look for in the condition (gpu-operator v26.7.0
// internal/validator/validator.go, internal/nvidiadriver/nvidiadriver.go):
// "multiple NVIDIADrivers match the same node <node>: [<names>]", or
// "multiple default NVIDIADrivers found: [<names>]".
func nvidiaConflict(name string, first gpuv1alpha1.NodeConflict, defaults bool) string {
	all := slices.Sorted(slices.Values(append([]string{name}, first.With...)))
	if defaults {
		return fmt.Sprintf("multiple default NVIDIADrivers found: %v", all)
	}
	return fmt.Sprintf("multiple NVIDIADrivers match the same node %s: %v", first.Node, all)
}

func describeConflicts(conflicts []gpuv1alpha1.NodeConflict) string {
	parts := make([]string, 0, len(conflicts))
	for _, c := range conflicts {
		parts = append(parts, fmt.Sprintf("%s with %s", c.Node, strings.Join(c.With, ", ")))
	}
	return strings.Join(parts, "; ")
}

func names(nodes []string) string {
	slices.Sort(nodes)
	if len(nodes) > maxNamedNodes {
		return strings.Join(nodes[:maxNamedNodes], ", ") + fmt.Sprintf(" and %d more", len(nodes)-maxNamedNodes)
	}
	return strings.Join(nodes, ", ")
}
