package gating

import (
	"maps"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/draslices"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

const dra = state.DRADriver

// inDRAPool puts the node in a pool of allocation mode dra, on a cluster
// that serves ResourceSlices, with the DRA driver enabled.
func inDRAPool(in *Input) {
	in.AllocationMode = gpuv1.AllocationDRA
	in.DRAServed = true
	in.Enabled[dra] = true
}

// slicesNaming is a node's complete ResourceSlices naming n GPUs.
func slicesNaming(n int) *draslices.Node {
	return &draslices.Node{Slices: 1, Pools: []draslices.Pool{{Name: "gpu-1", Generation: 1, Have: 1, Want: 1}}, GPUs: n}
}

// bare is a node no plugin has served: it advertises no GPU.
func bare(n *corev1.Node) *corev1.Node {
	n.Status.Allocatable, n.Status.Capacity = nil, nil
	return n
}

// draReadyPods are the pods of a DRA node whose stack is up.
func draReadyPods() map[state.Name]*state.PodFacts {
	old := now.Add(-time.Hour)
	return map[state.Name]*state.PodFacts{drv: readyPod("d1", old), tk: readyPod("t1", old), dra: readyPod("r1", old),
		dcg: readyPod("e1", old), gfd: readyPod("g1", old)}
}

// A new node of a DRA pool runs the DRA driver in the device plugin's
// place, and the driver is ready only once its ResourceSlices are
// complete and name every GPU GFD counted: its pod has no readiness
// probe. A node that served before (its driver restarted, it rebooted)
// needs a GPU named, not every one: a GPU lost is health, and must not
// keep the node from coming back. GFD's count of MIG devices is no
// count of GPUs.
func TestNewNodeOfADRAPool(t *testing.T) {
	tests := map[string]struct {
		slices *draslices.Node
		served bool
		labels map[string]string
		want   gpuv1.StateValue
		why    string
	}{
		"fewer than GFD, served before": {slices: slicesNaming(7), served: true, want: gpuv1.StateReady},
		"GFD counting MIG devices": {slices: slicesNaming(8), want: gpuv1.StateReady,
			labels: map[string]string{"nvidia.com/gpu.count": "56", "nvidia.com/mig.strategy": "single", gpuv1.LabelMIGCapable: "true"}},
		"no slices": {want: gpuv1.StatePending, why: "no ResourceSlice of driver gpu.nvidia.com"},
		"incomplete": {slices: &draslices.Node{Slices: 1, GPUs: 4,
			Pools: []draslices.Pool{{Name: "gpu-1", Generation: 2, Have: 1, Want: 2}}},
			want: gpuv1.StatePending, why: "pool gpu-1 generation 2: 1 of 2 slices"},
		"no GPU":          {slices: slicesNaming(0), want: gpuv1.StatePending, why: "name no GPU"},
		"fewer than GFD":  {slices: slicesNaming(6), want: gpuv1.StatePending, why: "name 6 GPUs, but the node has 8"},
		"every GPU named": {slices: slicesNaming(8), want: gpuv1.StateReady},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			// Labelled dra when first seen, before any pod ran.
			labels := variantLabels(states(map[state.Name]gpuv1.StateValue{drv: gpuv1.StateReady, tk: gpuv1.StateReady}))
			maps.Copy(labels, tt.labels)
			n := node(labels, map[string]string{AnnotationBootID: "boot-1", AnnotationDriverPod: "d1", AnnotationAllocationMode: "dra"})
			if tt.served {
				n.Annotations[gpuv1.AnnotationServed] = "true"
			}
			pods := draReadyPods()
			delete(pods, dcg)
			delete(pods, gfd)
			r := decide(t, n, pods, inDRAPool, func(in *Input) { in.DRA = tt.slices })
			g.Expect(r.Labels).To(HaveKeyWithValue(gpuv1.LabelAllocationMode, "dra"))
			g.Expect(r.Annotations).To(HaveKeyWithValue(AnnotationAllocationMode, "dra"))
			g.Expect(r.Labels).To(HaveKeyWithValue(gpuv1.DeployLabel(string(dra)), "true"))
			g.Expect(stateOf(r, dp)).To(Equal("disabled"), "never both plugins on one node")
			g.Expect(stateOf(r, mpsd)).To(Equal("disabled"))
			g.Expect(stateOf(r, dra)).To(Equal(string(tt.want)))
			if tt.why != "" {
				g.Expect(r.Why[dra]).To(ContainSubstring(tt.why))
				g.Expect(stateOf(r, dcg)).To(Equal("pending"), "dcgm-exporter waits for the plugin that serves")
				return
			}
			g.Expect(r.Why).NotTo(HaveKey(dra))
			g.Expect(stateOf(r, dcg)).To(Equal("pending"))
			g.Expect(r.Why[dcg]).To(Equal("no pod yet"), "past the DRA driver, dcgm-exporter waits for its own pod")
			g.Expect(r.Annotations).To(HaveKeyWithValue(gpuv1.AnnotationServed, "true"), "the DRA driver serves the node")
		})
	}
}

// A node of a DRA pool whose stack is up is ready on every state, and a
// ready DRA driver stays ready while its slices name a GPU: fewer GPUs is
// a health matter. Slices gone leave it after the grace period.
func TestReadyDRANode(t *testing.T) {
	g := NewWithT(t)
	labels := variantLabels(states(map[state.Name]gpuv1.StateValue{drv: gpuv1.StateReady, tk: gpuv1.StateReady,
		dra: gpuv1.StateReady, dcg: gpuv1.StateReady, gfd: gpuv1.StateReady}))
	labels[gpuv1.LabelAllocationMode] = "dra"
	annotations := map[string]string{AnnotationBootID: "boot-1", AnnotationDriverPod: "d1", AnnotationAllocationMode: "dra",
		gpuv1.AnnotationServed: "true"}
	n := node(labels, annotations)
	n.Status.Allocatable, n.Status.Capacity = nil, nil // the DRA driver advertises no extended resource

	r := decide(t, n, draReadyPods(), inDRAPool, func(in *Input) { in.DRA = slicesNaming(8) })
	g.Expect(r.Why).To(BeEmpty())
	g.Expect(stateOf(r, dp)).To(Equal("disabled"))
	g.Expect(ServesGPUs(&corev1.Node{ObjectMeta: n.ObjectMeta})).To(BeTrue(), "a ready DRA driver serves the node's GPUs")

	r = decide(t, n, draReadyPods(), inDRAPool, func(in *Input) { in.DRA = slicesNaming(7) })
	g.Expect(stateOf(r, dra)).To(Equal("ready"), "a GPU fewer is health, not the plugin's function")

	r = decide(t, n, draReadyPods(), inDRAPool, func(in *Input) { in.DRA = nil })
	g.Expect(stateOf(r, dra)).To(Equal("ready"), "within the grace period")
	g.Expect(r.RequeueAfter).To(Equal(grace))
	n.Annotations[AnnotationMissingSince] = "dra-driver=" + now.Add(-2*grace).Format(time.RFC3339)
	r = decide(t, n, draReadyPods(), inDRAPool, func(in *Input) { in.DRA = nil })
	g.Expect(stateOf(r, dra)).To(Equal("pending"))
	g.Expect(r.StalePods).To(ContainElement(dra), "its pod is restarted")
	g.Expect(stateOf(r, dcg)).To(Equal("pending"), "the states after it restart")
}

// A node that serves GPUs keeps its allocation mode when its pool's
// changes: only a switch, which evicts its GPU pods first, moves it. A
// node from before modes serves through the device plugin. A person's
// edit of the mode label is not taken.
func TestAllocationModeMovesOnlyWhereNothingIsLost(t *testing.T) {
	tests := map[string]struct {
		annotations map[string]string
		labels      map[string]string
		pool        gpuv1.AllocationMode
		pods        bool // the device plugin's pod runs
		advertised  bool // GPUs registered by a device plugin
		slices      int  // the DRA driver's slices on the node
		want        gpuv1.AllocationMode
		waits       bool
	}{
		"new node":                        {pool: gpuv1.AllocationDRA, want: gpuv1.AllocationDRA},
		"new node, GPUs registered":       {pool: gpuv1.AllocationDRA, advertised: true, want: gpuv1.AllocationDevicePlugin, waits: true},
		"new node, slices left":           {annotations: map[string]string{AnnotationAllocationMode: "dra"}, pool: gpuv1.AllocationDevicePlugin, slices: 1, want: gpuv1.AllocationDRA, waits: true},
		"an annotation not ours":          {annotations: map[string]string{AnnotationAllocationMode: "gpu"}, pool: gpuv1.AllocationDRA, want: gpuv1.AllocationDRA},
		"new node, device plugin started": {pool: gpuv1.AllocationDRA, pods: true, want: gpuv1.AllocationDevicePlugin, waits: true},
		"from before modes, served":       {annotations: map[string]string{gpuv1.AnnotationServed: "true"}, pool: gpuv1.AllocationDRA, want: gpuv1.AllocationDevicePlugin, waits: true},
		"served, pool moved":              {annotations: map[string]string{gpuv1.AnnotationServed: "true", AnnotationAllocationMode: "device-plugin"}, pool: gpuv1.AllocationDRA, want: gpuv1.AllocationDevicePlugin, waits: true},
		"served, pool moved back":         {annotations: map[string]string{gpuv1.AnnotationServed: "true", AnnotationAllocationMode: "dra"}, pool: gpuv1.AllocationDevicePlugin, want: gpuv1.AllocationDRA, waits: true},
		"in its pool's mode":              {annotations: map[string]string{gpuv1.AnnotationServed: "true", AnnotationAllocationMode: "dra"}, pool: gpuv1.AllocationDRA, want: gpuv1.AllocationDRA},
		"no pool holds it":                {annotations: map[string]string{gpuv1.AnnotationServed: "true", AnnotationAllocationMode: "dra"}, want: gpuv1.AllocationDRA},
		"no pool, never labelled":         {want: gpuv1.AllocationDevicePlugin},
		"a person's label":                {annotations: map[string]string{gpuv1.AnnotationServed: "true", AnnotationAllocationMode: "device-plugin"}, labels: map[string]string{gpuv1.LabelAllocationMode: "dra"}, pool: gpuv1.AllocationDevicePlugin, want: gpuv1.AllocationDevicePlugin},
		// The switch holds the mode: none while the old plugin leaves,
		// then its target, whatever the pool says meanwhile.
		"a switch holds it at none": {annotations: map[string]string{gpuv1.AnnotationServed: "true", AnnotationAllocationMode: "device-plugin",
			gpuv1.AnnotationModeSwitchHold: "none"}, pool: gpuv1.AllocationDRA, pods: true, advertised: true, want: gpuv1.AllocationNone},
		"a switch holds it at its target": {annotations: map[string]string{gpuv1.AnnotationServed: "true", AnnotationAllocationMode: "none",
			gpuv1.AnnotationModeSwitchHold: "dra"}, pool: gpuv1.AllocationDevicePlugin, want: gpuv1.AllocationDRA},
		"a hold not ours": {annotations: map[string]string{gpuv1.AnnotationServed: "true", AnnotationAllocationMode: "device-plugin",
			gpuv1.AnnotationModeSwitchHold: "both"}, pool: gpuv1.AllocationDRA, pods: true, advertised: true, want: gpuv1.AllocationDevicePlugin, waits: true},
		"none, its hold forgotten": {annotations: map[string]string{gpuv1.AnnotationServed: "true", AnnotationAllocationMode: "none"},
			pool: gpuv1.AllocationDRA, want: gpuv1.AllocationDRA},
		"none, its hold forgotten, the old plugin still there": {annotations: map[string]string{gpuv1.AnnotationServed: "true",
			AnnotationAllocationMode: "none"}, pool: gpuv1.AllocationDRA, pods: true, want: gpuv1.AllocationNone, waits: true},
		"none, its hold forgotten, slices left": {annotations: map[string]string{gpuv1.AnnotationServed: "true",
			AnnotationAllocationMode: "none"}, pool: gpuv1.AllocationDRA, slices: 1, want: gpuv1.AllocationNone, waits: true},
		"a hold from one plugin's mode straight to the other's": {annotations: map[string]string{gpuv1.AnnotationServed: "true",
			AnnotationAllocationMode: "device-plugin", gpuv1.AnnotationModeSwitchHold: "dra"}, pool: gpuv1.AllocationDRA, pods: true,
			advertised: true, want: gpuv1.AllocationDevicePlugin, waits: true},
		"none, its hold forgotten, no pool": {annotations: map[string]string{gpuv1.AnnotationServed: "true", AnnotationAllocationMode: "none"},
			want: gpuv1.AllocationDevicePlugin},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			var pods map[state.Name]*state.PodFacts
			if tt.pods {
				pods = map[state.Name]*state.PodFacts{dp: notReadyPod(now)}
			}
			n := node(tt.labels, tt.annotations)
			if !tt.advertised {
				bare(n)
			}
			r := decide(t, n, pods, inDRAPool, func(in *Input) {
				in.AllocationMode = tt.pool
				if tt.slices > 0 {
					in.DRA = &draslices.Node{Slices: tt.slices}
				}
			})
			g.Expect(r.Labels).To(HaveKeyWithValue(gpuv1.LabelAllocationMode, string(tt.want)))
			g.Expect(r.Annotations).To(HaveKeyWithValue(AnnotationAllocationMode, string(tt.want)))
			if !tt.waits {
				g.Expect(r.Annotations).NotTo(HaveKey(AnnotationAllocationModeWaiting))
				return
			}
			g.Expect(r.Annotations[AnnotationAllocationModeWaiting]).To(ContainSubstring("waits for its allocation mode switch"))
			g.Expect(reasons(r)).To(ContainElement("AllocationModeWaiting"))
		})
	}
}

// A node that waits for its switch is told so once, not at every write.
func TestAllocationModeWaitIsToldOnce(t *testing.T) {
	g := NewWithT(t)
	annotations := map[string]string{gpuv1.AnnotationServed: "true", AnnotationAllocationMode: "device-plugin"}
	r := decide(t, node(nil, annotations), nil, inDRAPool)
	annotations[AnnotationAllocationModeWaiting] = r.Annotations[AnnotationAllocationModeWaiting]
	r = decide(t, node(nil, annotations), nil, inDRAPool)
	g.Expect(reasons(r)).NotTo(ContainElement("AllocationModeWaiting"))
	g.Expect(r.Annotations).To(HaveKey(AnnotationAllocationModeWaiting), "kept while it holds")
	g.Expect(r.Annotations[AnnotationAllocationModeWaiting]).To(HavePrefix("its pool's allocation mode is dra, but"))

	delete(annotations, AnnotationAllocationModeWaiting)
	r = decide(t, node(nil, annotations), nil, inDRAPool, func(in *Input) { in.GPUCluster = "gpu-cluster" })
	g.Expect(r.Annotations[AnnotationAllocationModeWaiting]).To(HavePrefix("its pool's allocation mode is dra (set by GPUCluster gpu-cluster), but"),
		"a person who set no pool to dra is told who did")
}

// Where the API server serves no ResourceSlices, the DRA driver fails on
// the DRA pool's nodes with the reason, and no device plugin takes its
// place behind the user's back.
func TestDRAWithoutTheAPI(t *testing.T) {
	g := NewWithT(t)
	r := decide(t, bare(node(variantLabels(nil), nil)), nil, inDRAPool, func(in *Input) { in.DRAServed = false })
	g.Expect(stateOf(r, dra)).To(Equal("failed"))
	g.Expect(r.Why[dra]).To(ContainSubstring("needs Kubernetes 1.34"))
	g.Expect(stateOf(r, dp)).To(Equal("disabled"))

	// An NVIDIADriver's dra pool under a policy with CDI off: the API
	// server refuses it only in the policy's own pools.
	r = decide(t, bare(node(variantLabels(nil), nil)), nil, inDRAPool, func(in *Input) { in.Policy.Spec.CDI.Enabled = new(bool) })
	g.Expect(stateOf(r, dra)).To(Equal("failed"))
	g.Expect(r.Why[dra]).To(ContainSubstring("set the ClusterPolicy's cdi.enabled to true"))
}

// The device plugin's configuration has no effect on a DRA node: it is
// left off the node and said to have none.
func TestDevicePluginConfigOnADRANode(t *testing.T) {
	g := NewWithT(t)
	r := decide(t, bare(node(variantLabels(map[string]string{gpuv1.LabelDevicePluginConfig: "mps-2"}), nil)), nil, inDRAPool, withMPSConfigs)
	g.Expect(r.Labels).NotTo(HaveKey(gpuv1.LabelDevicePluginConfigInUse))
	g.Expect(r.Annotations[AnnotationDevicePluginConfigRefused]).To(ContainSubstring("has no effect"))
	g.Expect(stateOf(r, mpsd)).To(Equal("disabled"), "no MPS daemon without the device plugin")
}

// On a DRA node the unhealthy GPUs are those the driver's slices taint
// (its NVMLDeviceHealthCheck gate): counted in the same annotation, and
// told, as the device plugin's are; a MIG device's taint counts its GPU.
func TestDRADeviceTaintsAreUnhealthyGPUs(t *testing.T) {
	g := NewWithT(t)
	labels := variantLabels(states(map[state.Name]gpuv1.StateValue{drv: gpuv1.StateReady, tk: gpuv1.StateReady,
		dra: gpuv1.StateReady, dcg: gpuv1.StateReady, gfd: gpuv1.StateReady}))
	annotations := map[string]string{AnnotationBootID: "boot-1", AnnotationDriverPod: "d1", AnnotationAllocationMode: "dra",
		gpuv1.AnnotationServed: "true"}
	n := bare(node(labels, annotations))
	tainted := slicesNaming(8)
	tainted.Tainted = map[string][]string{"gpu-3": {"gpu.nvidia.com/xid=79"}, "gpu-5": {"gpu.nvidia.com/xid=48"}}

	r := decide(t, n, draReadyPods(), inDRAPool, func(in *Input) { in.DRA = tainted })
	g.Expect(r.Annotations).To(HaveKeyWithValue(gpuv1.AnnotationUnhealthyGPUs, "2"))
	g.Expect(r.Events).To(ContainElement(HaveField("Message", ContainSubstring("2 GPU(s) unhealthy, as the DRA driver's device taints say: gpu-3 (gpu.nvidia.com/xid=79), gpu-5"))))
	g.Expect(stateOf(r, dra)).To(Equal("ready"), "unhealthy GPUs are remediated, not ungated")

	n.Annotations[gpuv1.AnnotationUnhealthyGPUs] = "2"
	r = decide(t, n, draReadyPods(), inDRAPool, func(in *Input) { in.DRA = slicesNaming(8) })
	g.Expect(r.Annotations).NotTo(HaveKey(gpuv1.AnnotationUnhealthyGPUs))
	g.Expect(reasons(r)).To(ContainElement("GPUsHealthy"))

	// Until the slices are read again (the plugin restarting), the count
	// stands.
	r = decide(t, n, draReadyPods(), inDRAPool, func(in *Input) { in.DRA = nil })
	g.Expect(r.Annotations).To(HaveKeyWithValue(gpuv1.AnnotationUnhealthyGPUs, "2"))
}

// Where the DRA driver in force makes MIG devices itself (its DynamicMIG
// gate), mig-manager does not run on nodes in allocation mode dra: the
// driver destroys at its start the MIG devices it did not make. It still
// runs on device-plugin nodes.
func TestMIGManagerStaysOffDRANodesUnderDynamicMIG(t *testing.T) {
	g := NewWithT(t)
	labels := variantLabels(states(map[state.Name]gpuv1.StateValue{drv: gpuv1.StateReady, tk: gpuv1.StateReady}))
	labels[gpuv1.LabelMIGConfig] = "all-1g.18gb"
	n := node(labels, map[string]string{AnnotationBootID: "boot-1", AnnotationDriverPod: "d1", AnnotationAllocationMode: "dra"})
	withMIG := func(in *Input) {
		in.Enabled[state.MIGManager] = true
		in.Policy.Spec.MIGManager.Enabled = ptr.To(true)
	}
	dynamic := func(in *Input) { in.DRADynamicMIG = true }

	r := decide(t, n, draReadyPods(), inDRAPool, withMIG, dynamic, func(in *Input) { in.DRA = slicesNaming(8) })
	g.Expect(stateOf(r, state.MIGManager)).To(Equal("disabled"))
	g.Expect(r.Labels).NotTo(HaveKey(gpuv1.LabelMIGConfig), "no configuration is written for mig-manager there")
	r = decide(t, n, draReadyPods(), inDRAPool, withMIG, func(in *Input) { in.DRA = slicesNaming(8) })
	g.Expect(stateOf(r, state.MIGManager)).NotTo(Equal("disabled"), "without the gate mig-manager applies the configuration")
	dp := node(maps.Clone(labels), map[string]string{AnnotationBootID: "boot-1", AnnotationDriverPod: "d1"})
	r = decide(t, dp, draReadyPods(), withMIG, dynamic)
	g.Expect(stateOf(r, state.MIGManager)).NotTo(Equal("disabled"), "a device-plugin node keeps mig-manager")

	// Issue 52, finding 3: an apply under way when DynamicMIG is turned
	// on finishes under mig-manager, which stays on the node until then;
	// any other reconfiguration is let go.
	for st, stays := range map[gpuv1.MIGReconfigureState]bool{
		gpuv1.MIGEviction: false, gpuv1.MIGClientsOff: false, gpuv1.MIGApply: true, gpuv1.MIGValidation: false,
		gpuv1.MIGReconfigureFailed: false, gpuv1.MIGReconfigureRequired: false, gpuv1.MIGReconfigureDone: false,
	} {
		inFlight := node(maps.Clone(labels), map[string]string{AnnotationBootID: "boot-1", AnnotationDriverPod: "d1", AnnotationAllocationMode: "dra"})
		inFlight.Labels[gpuv1.LabelMIGReconfigureState] = string(st)
		r = decide(t, inFlight, draReadyPods(), inDRAPool, withMIG, dynamic, func(in *Input) { in.DRA = slicesNaming(8) })
		if stays {
			g.Expect(stateOf(r, state.MIGManager)).NotTo(Equal("disabled"), "mig-manager stays while its reconfiguration is %s", st)
		} else {
			g.Expect(stateOf(r, state.MIGManager)).To(Equal("disabled"), "a reconfiguration %s is let go", st)
		}
	}
}
