package gating

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/draslices"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/cudaworkload"
)

// readyDRANode is a node of a DRA pool whose stack is up but for the
// workload proof, which is pending, with slices naming whole GPUs.
func readyDRANode() (*corev1.Node, map[state.Name]*state.PodFacts, func(*Input)) {
	labels := variantLabels(states(map[state.Name]gpuv1.StateValue{drv: gpuv1.StateReady, tk: gpuv1.StateReady,
		dra: gpuv1.StateReady, dcg: gpuv1.StateReady, gfd: gpuv1.StateReady, cw: gpuv1.StatePending}))
	labels[gpuv1.LabelAllocationMode] = "dra"
	n := bare(node(labels, map[string]string{AnnotationBootID: "boot-1", AnnotationDriverPod: "d1", AnnotationAllocationMode: "dra",
		gpuv1.AnnotationServed: "true"}))
	slices := slicesNaming(8)
	slices.WholeGPUs = 8
	return n, draReadyPods(), func(in *Input) {
		inDRAPool(in)
		withProof(in)
		in.DRA = slices
	}
}

// draProofPod is a CUDA workload pod of a DRA node's generation.
func draProofPod(pods map[state.Name]*state.PodFacts, attempt string, since time.Time, end func(*state.PodFacts)) *state.PodFacts {
	return proofPodOf(cudaworkload.Generation("boot-1", string(pods[drv].UID), string(pods[dra].UID), ""), attempt, since, end)
}

// On a node of a DRA pool the proof claims one device of the DRA driver's,
// as DRA workloads do, through the DRA driver's kubelet plugin: no
// extended resource (the node advertises none) and no RuntimeClass. Its
// generation is the kubelet plugin's pod, and the node is ready, its
// readiness taint lifted, once the sample ran.
func TestDRANodeProofClaimsADevice(t *testing.T) {
	g := NewWithT(t)
	n, pods, dra := readyDRANode()
	taint := func(in *Input) { in.Policy.Spec.Operator.ReadinessTaint.Enabled = true }

	r := decide(t, n, pods, dra, taint)
	g.Expect(stateOf(r, dp)).To(Equal("disabled"))
	g.Expect(stateOf(r, cw)).To(Equal("pending"))
	g.Expect(r.ReadinessTaint).To(BeTrue())
	g.Expect(r.Workload).To(Equal(&cudaworkload.Request{Generation: "boot=boot-1,driver=d1,plugin=r1,mig=", Attempt: 1,
		DeviceClass: cudaworkload.GPUDeviceClass}))

	pods[cw] = draProofPod(pods, "1", now, passed)
	r = decide(t, n, pods, dra, taint)
	g.Expect(stateOf(r, cw)).To(Equal("ready"))
	g.Expect(r.ReadinessTaint).To(BeFalse())

	pods[cw] = draProofPod(pods, "1", now, failed802)
	r = decide(t, n, pods, dra, taint)
	g.Expect(stateOf(r, cw)).To(Equal("failed"))
	g.Expect(r.Why[cw]).To(ContainSubstring("Fabric Manager"))
	g.Expect(r.ReadinessTaint).To(BeTrue())
}

// The device class follows what the slices name: a whole GPU first, a MIG
// device on a node whose GPUs are all in MIG mode, and no proof asked
// where the slices name neither.
func TestDRAProofDeviceClass(t *testing.T) {
	tests := map[string]struct {
		slices *draslices.Node
		want   string
	}{
		"whole GPUs and MIG devices": {slices: &draslices.Node{WholeGPUs: 4, MIGDevices: map[string]int{"1g.10gb": 7}},
			want: cudaworkload.GPUDeviceClass},
		"MIG devices only": {slices: &draslices.Node{MIGDevices: map[string]int{"1g.10gb": 0, "3g.40gb": 2}},
			want: cudaworkload.MIGDeviceClass},
		"none": {slices: &draslices.Node{MIGDevices: map[string]int{"1g.10gb": 0}}},
		"nil":  {},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			class, ok := workloadDeviceClass(tt.slices)
			g.Expect(class).To(Equal(tt.want))
			g.Expect(ok).To(Equal(tt.want != ""))
		})
	}

	g := NewWithT(t)
	n, pods, dra := readyDRANode()
	r := decide(t, n, pods, dra, func(in *Input) { in.DRA.WholeGPUs = 0 })
	g.Expect(stateOf(r, cw)).To(Equal("pending"))
	g.Expect(r.Why[cw]).To(Equal("the node's ResourceSlices name no GPU or MIG device for the CUDA workload to claim"))
	g.Expect(r.Workload).To(BeNil())
}

// A DRA proof pod the scheduler cannot place (every device held by a
// workload or tainted, the node cordoned) says nothing of CUDA: the node
// waits and says why, for as long as it takes, and the pod is not
// replaced: the scheduler tries it again as the cluster changes. Once
// bound, its run is timed from its binding (operandpods), not from its
// creation.
func TestUnscheduledDRAProofWaitsForTheScheduler(t *testing.T) {
	g := NewWithT(t)
	n, pods, dra := readyDRANode()
	unscheduled := func(f *state.PodFacts) {
		f.Unscheduled = "Unschedulable: 0/3 nodes are available: 1 cannot allocate all claims"
	}
	for _, since := range []time.Time{now, now.Add(-10 * retry)} {
		pods[cw] = draProofPod(pods, "1", since, unscheduled)
		r := decide(t, n, pods, dra)
		g.Expect(stateOf(r, cw)).To(Equal("pending"), "not a CUDA failure")
		g.Expect(r.Why[cw]).To(Equal("attempt 1 waits for the scheduler in pod nvidia-cuda-validator-w1: " +
			"Unschedulable: 0/3 nodes are available: 1 cannot allocate all claims"))
		g.Expect(reasons(r)).NotTo(ContainElement("StateFailed"))
		g.Expect(r.Workload).To(BeNil(), "not replaced")
		g.Expect(r.RequeueAfter).To(BeZero(), "its binding wakes the node")
	}

	pods[cw] = draProofPod(pods, "1", now.Add(-time.Second), func(f *state.PodFacts) { f.Phase = corev1.PodRunning })
	r := decide(t, n, pods, dra)
	g.Expect(r.Why[cw]).To(Equal("attempt 1 runs in pod nvidia-cuda-validator-w1"))

	// A proof that stood keeps the node ready meanwhile.
	n.Labels[gpuv1.StateLabel(string(cw))] = string(gpuv1.StateReady)
	pods[cw] = draProofPod(pods, "1", now, unscheduled)
	g.Expect(stateOf(decide(t, n, pods, dra), cw)).To(Equal("ready"))
}

// A node with no GPU plugin at all (allocation mode none) has no path to
// prove: the proof is disabled there, and its record goes.
func TestNoProofWithoutAPlugin(t *testing.T) {
	g := NewWithT(t)
	n, pods := readyNode()
	n.Labels[gpuv1.LabelAllocationMode] = "none"
	n.Annotations[AnnotationAllocationMode] = "none"
	pods[cw] = proofPod(pods, "1", now, passed)
	delete(pods, dp)
	r := decide(t, bare(n), pods, withProof, func(in *Input) { in.AllocationMode = gpuv1.AllocationNone })
	g.Expect(stateOf(r, dp)).To(Equal("disabled"))
	g.Expect(stateOf(r, dra)).To(Equal("disabled"))
	g.Expect(stateOf(r, cw)).To(Equal("disabled"))
	g.Expect(r.StalePods).To(ContainElement(cw))
}
