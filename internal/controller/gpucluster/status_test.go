package gpucluster

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	gpuv1alpha1 "github.com/gpu-operator/gpu-operator/api/v1alpha1"
	"github.com/gpu-operator/gpu-operator/internal/driverpool"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

func gpuNode(name string, labels map[string]string) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{gpuv1.LabelGPUPresent: gpuv1.LabelTrue}}}
	for k, v := range labels {
		n.Labels[k] = v
	}
	return n
}

func serving(name string) corev1.Node {
	return gpuNode(name, map[string]string{gpuv1.LabelAllocationMode: string(gpuv1.AllocationDRA),
		gpuv1.StateLabel(string(state.DRADriver)): string(gpuv1.StateReady)})
}

func condition(st gpuv1alpha1.GPUClusterStatus, t string) *metav1.Condition {
	return meta.FindStatusCondition(st.Conditions, t)
}

func TestStatus(t *testing.T) {
	gc := &gpuv1alpha1.GPUCluster{ObjectMeta: metav1.ObjectMeta{Name: gpuv1alpha1.GPUClusterName, Generation: 3}}
	cp := &gpuv1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "cluster-policy"}}
	off := false
	noCDI := cp.DeepCopy()
	noCDI.Spec.CDI.Enabled = &off
	switching := gpuNode("b", map[string]string{gpuv1.LabelAllocationMode: string(gpuv1.AllocationNone),
		gpuv1.LabelModeSwitchState: "plugin-on-required"})
	for name, tt := range map[string]struct {
		cp              *gpuv1.ClusterPolicy
		served          bool
		nodes           []corev1.Node
		state           gpuv1alpha1.State
		reason, message string
		readyNodes      string
		errorTrue       bool
	}{
		"no policy to lie over": {cp: nil, served: true, state: gpuv1alpha1.StateNotReady,
			reason: gpuv1alpha1.ReasonPrerequisiteNotMet, message: "create a ClusterPolicy", errorTrue: true},
		"DRA not served": {cp: cp, served: false, nodes: []corev1.Node{serving("a")}, state: gpuv1alpha1.StateNotReady,
			reason: gpuv1alpha1.ReasonReconcileFailed, message: "Kubernetes 1.34", errorTrue: true},
		"CDI off": {cp: noCDI, served: true, state: gpuv1alpha1.StateNotReady,
			reason: gpuv1alpha1.ReasonReconcileFailed, message: "needs CDI", errorTrue: true},
		"a node mid-switch": {cp: cp, served: true, nodes: []corev1.Node{serving("a"), switching}, state: gpuv1alpha1.StateNotReady,
			reason: gpuv1alpha1.ReasonOperandNotReady, readyNodes: "1/2",
			message: "1 of 2 GPU nodes serve their GPUs through DRA; not yet: b (allocation mode none, switch plugin-on-required)"},
		"a DRA node not proven": {cp: cp, served: true, state: gpuv1alpha1.StateNotReady, readyNodes: "0/1",
			nodes: []corev1.Node{gpuNode("c", map[string]string{gpuv1.LabelAllocationMode: string(gpuv1.AllocationDRA),
				gpuv1.StateLabel(string(state.DRADriver)): string(gpuv1.StatePending)})},
			reason: gpuv1alpha1.ReasonOperandNotReady, message: "c (allocation mode dra, dra-driver pending)"},
		"every node serves; others are not counted": {cp: cp, served: true, state: gpuv1alpha1.StateReady, readyNodes: "2/2",
			nodes: []corev1.Node{serving("a"), serving("b"), {ObjectMeta: metav1.ObjectMeta{Name: "cpu"}},
				gpuNode("opted-out", map[string]string{gpuv1.LabelDeployOperands: "false"}),
				gpuNode("no-dra-driver", map[string]string{gpuv1.DeployLabel("dra-driver"): "false"})},
			reason: gpuv1alpha1.ReasonReconciled, message: "every GPU node (2) of ClusterPolicy cluster-policy"},
		"no GPU node": {cp: cp, served: true, state: gpuv1alpha1.StateReady, readyNodes: "0/0",
			reason: gpuv1alpha1.ReasonReconciled, message: "no GPU nodes found"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			var pools *driverpool.Set
			if tt.cp != nil {
				pools = driverpool.FromPolicy(tt.cp)
				pools.Overlay(gc)
			}
			st := buildStatus(gc, tt.cp, tt.served, pools, tt.nodes, "gpu-operator")
			g.Expect(st.State).To(Equal(tt.state))
			g.Expect(st.Namespace).To(Equal("gpu-operator"))
			g.Expect(st.ObservedGeneration).To(BeEquivalentTo(3))
			g.Expect(st.ReadyNodes).To(Equal(tt.readyNodes))
			ready := condition(st, gpuv1alpha1.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Reason).To(Equal(tt.reason))
			g.Expect(ready.Message).To(ContainSubstring(tt.message))
			g.Expect(ready.Status == metav1.ConditionTrue).To(Equal(tt.state == gpuv1alpha1.StateReady))
			g.Expect(condition(st, gpuv1alpha1.ConditionError).Status == metav1.ConditionTrue).To(Equal(tt.errorTrue))
		})
	}
}

// The message names a bounded number of nodes, and NVIDIA's sections the
// operator does not act on are listed.
func TestStatusBoundsAndIgnoredFields(t *testing.T) {
	g := NewWithT(t)
	gc := &gpuv1alpha1.GPUCluster{ObjectMeta: metav1.ObjectMeta{Name: gpuv1alpha1.GPUClusterName}}
	gc.Spec.DCGMExporter = &apiextensionsv1.JSON{Raw: []byte(`{"enabled":true}`)}
	gc.Spec.HostPaths = &apiextensionsv1.JSON{Raw: []byte(`{"kubeletRootDir":"/var/lib/kubelet"}`)}
	var nodes []corev1.Node
	for i := range 25 {
		nodes = append(nodes, gpuNode(fmt.Sprintf("n%02d", i), nil))
	}
	cp := &gpuv1.ClusterPolicy{}
	st := buildStatus(gc, cp, true, driverpool.FromPolicy(cp), nodes, "gpu-operator")
	g.Expect(condition(st, gpuv1alpha1.ConditionReady).Message).To(HaveSuffix("n09 (allocation mode unset) and 15 more"))
	g.Expect(st.IgnoredFields).To(Equal([]string{"spec.dcgmExporter: the ClusterPolicy's dcgmExporter governs",
		"spec.hostPaths: the ClusterPolicy's hostPaths govern"}))
}

// A node no pool holds keeps its mode and is not counted: NVIDIADrivers
// that both select it, or none that does, are their status's matter.
func TestStatusLeavesOutNodesNoPoolHolds(t *testing.T) {
	g := NewWithT(t)
	gc := &gpuv1alpha1.GPUCluster{ObjectMeta: metav1.ObjectMeta{Name: gpuv1alpha1.GPUClusterName}}
	cp := &gpuv1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "cluster-policy"}}
	cp.Spec.Driver.UseNvidiaDriverCRD = ptr.To(true)
	pools := driverpool.Resolve(cp, nil) // no NVIDIADriver: every node unclaimed
	pools.Overlay(gc)
	st := buildStatus(gc, cp, true, pools, []corev1.Node{gpuNode("unclaimed", nil)}, "gpu-operator")
	g.Expect(st.ReadyNodes).To(Equal("0/0"))
	g.Expect(st.State).To(Equal(gpuv1alpha1.StateReady))
}

// A GPUCluster being deleted that NVIDIA's operator's finalizer holds says
// so, and how to lift it; nothing here removes another operator's
// finalizer.
func TestDeletionHeldByNVIDIAsFinalizer(t *testing.T) {
	g := NewWithT(t)
	gc := &gpuv1alpha1.GPUCluster{ObjectMeta: metav1.ObjectMeta{Name: gpuv1alpha1.GPUClusterName, Generation: 2,
		Finalizers: []string{gpuv1alpha1.NVIDIAGPUClusterFinalizer}}}
	gc.Status.ReadyNodes = "3/3"
	st := deletionHeld(gc)
	g.Expect(st.State).To(Equal(gpuv1alpha1.StateNotReady))
	g.Expect(st.ReadyNodes).To(Equal("3/3"), "what it last saw is kept")
	errCond := condition(st, gpuv1alpha1.ConditionError)
	g.Expect(errCond.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(errCond.Reason).To(Equal(gpuv1alpha1.ReasonDeletionHeld))
	g.Expect(errCond.Message).To(ContainSubstring("kubectl patch gpucluster gpu-cluster"))
	g.Expect(gc.Finalizers).To(ConsistOf(gpuv1alpha1.NVIDIAGPUClusterFinalizer))
}
