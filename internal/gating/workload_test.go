package gating

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/cudaworkload"
)

const cw = state.CUDAWorkload

// retry is the workload retry of these tests.
const retry = 5 * time.Minute

// withProof turns the CUDA workload proof on, as the policy's default is.
func withProof(in *Input) {
	in.Enabled[cw] = true
	in.WorkloadRetry = retry
}

// proofPod is a CUDA workload pod of the node's generation under pods,
// ended (or not) as end says, since when it last changed.
func proofPod(pods map[state.Name]*state.PodFacts, attempt string, since time.Time, end func(*state.PodFacts)) *state.PodFacts {
	return proofPodOf(cudaworkload.Generation("boot-1", string(pods[drv].UID), string(pods[dp].UID), ""), attempt, since, end)
}

// proofPodOf is a CUDA workload pod of a generation.
func proofPodOf(gen, attempt string, since time.Time, end func(*state.PodFacts)) *state.PodFacts {
	f := &state.PodFacts{UID: "w", Name: "nvidia-cuda-validator-w" + attempt, Since: since, Current: true, Phase: corev1.PodPending,
		Annotations: []state.Annotation{
			{Key: cudaworkload.AnnotationGeneration, Value: gen}, {Key: cudaworkload.AnnotationAttempt, Value: attempt}}}
	if end != nil {
		end(f)
	}
	return f
}

func passed(f *state.PodFacts) { f.Phase = corev1.PodSucceeded }

func failed802(f *state.PodFacts) {
	f.Phase = corev1.PodFailed
	f.Exits = []state.Exit{{Container: cudaworkload.ContainerName, Code: 1,
		Message: "[Vector addition of 50000 elements]\nFailed to allocate device vector A (error code system not yet initialized)!\n"}}
}

func noGPUFree(f *state.PodFacts) {
	f.Phase, f.Reason, f.Message = corev1.PodFailed, "OutOfnvidia.com/gpu", "Node didn't have enough resource: nvidia.com/gpu"
}

// A fresh node is ready only once a CUDA program ran there through its
// device plugin, and the readiness taint stays on until then.
func TestWorkloadProofMakesTheNodeReady(t *testing.T) {
	g := NewWithT(t)
	n, pods := readyNode()
	n.Labels[gpuv1.StateLabel(string(cw))] = string(gpuv1.StatePending)
	taint := func(in *Input) { in.Policy.Spec.Operator.ReadinessTaint.Enabled = true }

	r := decide(t, n, pods, withProof, taint)
	g.Expect(stateOf(r, cw)).To(Equal("pending"))
	g.Expect(r.Why[cw]).To(Equal("starting the CUDA workload"))
	g.Expect(r.ReadinessTaint).To(BeTrue())
	g.Expect(r.Workload).To(Equal(&cudaworkload.Request{Generation: "boot=boot-1,driver=d1,plugin=p1,mig=", Attempt: 1,
		Resource: "nvidia.com/gpu", RuntimeClass: ptr.To("")}))

	pods[cw] = proofPod(pods, "1", now, nil)
	r = decide(t, n, pods, withProof, taint)
	g.Expect(stateOf(r, cw)).To(Equal("pending"))
	g.Expect(r.Why[cw]).To(Equal("attempt 1 runs in pod nvidia-cuda-validator-w1"))
	g.Expect(r.Workload).To(BeNil(), "its pod is there")

	pods[cw] = proofPod(pods, "1", now, passed)
	r = decide(t, n, pods, withProof, taint)
	g.Expect(stateOf(r, cw)).To(Equal("ready"))
	g.Expect(r.ReadinessTaint).To(BeFalse())
	g.Expect(r.Workload).To(BeNil())
}

// On a node whose Fabric Manager is down, every CUDA start fails with 802:
// the state is failed with the cause named, and tried again after the
// retry, failed still while the next attempt runs.
func TestWorkloadProofFailureNamesTheCause(t *testing.T) {
	g := NewWithT(t)
	n, pods := readyNode()
	n.Labels[gpuv1.StateLabel(string(cw))] = string(gpuv1.StatePending)
	pods[cw] = proofPod(pods, "1", now.Add(-time.Minute), failed802)

	r := decide(t, n, pods, withProof)
	g.Expect(stateOf(r, cw)).To(Equal("failed"))
	g.Expect(r.Why[cw]).To(And(ContainSubstring("the CUDA sample failed in pod nvidia-cuda-validator-"), ContainSubstring("(exit code 1)"),
		ContainSubstring("CUDA error 802 (cudaErrorSystemNotReady)"), ContainSubstring("Fabric Manager")))
	g.Expect(reasons(r)).To(ContainElement("StateFailed"), "an event names the node's failure")
	g.Expect(r.Workload).To(BeNil(), "no new attempt before the retry")
	g.Expect(r.RequeueAfter).To(Equal(4 * time.Minute))

	n.Labels[gpuv1.StateLabel(string(cw))] = string(gpuv1.StateFailed)
	pods[cw] = proofPod(pods, "1", now.Add(-retry), failed802)
	r = decide(t, n, pods, withProof)
	g.Expect(stateOf(r, cw)).To(Equal("failed"))
	g.Expect(r.Workload).NotTo(BeNil())
	g.Expect(r.Workload.Attempt).To(Equal(2))
	g.Expect(reasons(r)).NotTo(ContainElement("StateFailed"), "told once, not at each attempt")

	pods[cw] = proofPod(pods, "2", now, nil)
	r = decide(t, n, pods, withProof)
	g.Expect(stateOf(r, cw)).To(Equal("failed"), "the last verdict stands while the next attempt runs")
	g.Expect(r.Why[cw]).To(Equal("the last CUDA workload failed (see the node's events); attempt 2 runs in pod nvidia-cuda-validator-w2"))

	pods[cw] = proofPod(pods, "2", now, passed)
	g.Expect(stateOf(decide(t, n, pods, withProof), cw)).To(Equal("ready"), "Fabric Manager came back")
}

// A pod the kubelet did not run (no GPU free) says nothing of the stack:
// the node waits and tries again, neither failed nor ready.
func TestWorkloadNotRunIsRetried(t *testing.T) {
	g := NewWithT(t)
	n, pods := readyNode()
	n.Labels[gpuv1.StateLabel(string(cw))] = string(gpuv1.StatePending)
	pods[cw] = proofPod(pods, "1", now, noGPUFree)
	r := decide(t, n, pods, withProof)
	g.Expect(stateOf(r, cw)).To(Equal("pending"))
	g.Expect(r.Why[cw]).To(ContainSubstring("the kubelet did not run pod nvidia-cuda-validator-w1 to its end: OutOfnvidia.com/gpu"))
	g.Expect(r.Workload).To(BeNil())

	pods[cw] = proofPod(pods, "1", now.Add(-retry), noGPUFree)
	r = decide(t, n, pods, withProof)
	g.Expect(stateOf(r, cw)).To(Equal("pending"))
	g.Expect(r.Workload.Attempt).To(Equal(2))
}

// A device plugin that refuses the GPU breaks the workload path: failed.
func TestWorkloadRefusedByTheDevicePluginFails(t *testing.T) {
	g := NewWithT(t)
	n, pods := readyNode()
	pods[cw] = proofPod(pods, "1", now, func(f *state.PodFacts) {
		f.Phase, f.Reason, f.Message = corev1.PodFailed, "UnexpectedAdmissionError", "Allocate failed due to rpc error"
	})
	r := decide(t, n, pods, withProof)
	g.Expect(stateOf(r, cw)).To(Equal("failed"))
	g.Expect(r.Why[cw]).To(ContainSubstring("could not give pod"))
}

// A proof that stood keeps standing while the next generation's runs: a
// device plugin rolled to a new pod taints nothing, and neither does the
// roll itself, while the new pod settles. A node that was ready before the
// proof was ever labelled on it is proved without being taken out either.
// A node whose proof was turned off and on again is proved again first.
func TestWorkloadProofStandsWhileTheNextRuns(t *testing.T) {
	taint := func(in *Input) { in.Policy.Spec.Operator.ReadinessTaint.Enabled = true }
	for name, label := range map[string]string{"proved before": "ready", "never labelled": ""} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			n, pods := readyNode()
			if label != "" {
				n.Labels[gpuv1.StateLabel(string(cw))] = label
			}
			pods[dp] = readyPod("p2", now.Add(-time.Second))
			r := decide(t, n, pods, withProof, taint)
			g.Expect(stateOf(r, cw)).To(Equal("ready"))
			g.Expect(r.Workload).To(BeNil(), "the new plugin pod settles first")
			g.Expect(r.Why[cw]).To(BeEmpty())
			g.Expect(r.RequeueAfter).To(Equal(settle-time.Second), "looked at again once it settled")

			pods[dp] = readyPod("p2", now.Add(-time.Hour))
			r = decide(t, n, pods, withProof, taint)
			g.Expect(stateOf(r, cw)).To(Equal("ready"))
			g.Expect(r.ReadinessTaint).To(BeFalse())
			g.Expect(r.Workload.Generation).To(Equal("boot=boot-1,driver=d1,plugin=p2,mig="))

			pods[cw] = proofPod(pods, "1", now, failed802)
			r = decide(t, n, pods, withProof, taint)
			g.Expect(stateOf(r, cw)).To(Equal("failed"), "until the new proof says otherwise")
			g.Expect(r.ReadinessTaint).To(BeTrue())
		})
	}
	g := NewWithT(t)
	n, pods := readyNode()
	n.Labels[gpuv1.StateLabel(string(cw))] = "disabled"
	r := decide(t, n, pods, withProof, taint)
	g.Expect(stateOf(r, cw)).To(Equal("pending"), "turned off and on: no standing proof")
	g.Expect(r.ReadinessTaint).To(BeTrue())
}

// A reboot proves again what restarted in place: the boot is part of the
// generation.
func TestRebootProvesAgain(t *testing.T) {
	g := NewWithT(t)
	n, pods := readyNode()
	n.Labels[gpuv1.StateLabel(string(cw))] = "ready"
	pods[cw] = proofPod(pods, "1", now, passed)
	g.Expect(decide(t, n, pods, withProof).Workload).To(BeNil())
	n.Status.NodeInfo.BootID = "boot-2"
	n.Annotations[AnnotationBootID] = "boot-2"
	r := decide(t, n, pods, withProof)
	g.Expect(r.Workload).NotTo(BeNil())
	g.Expect(r.Workload.Generation).To(HavePrefix("boot=boot-2,"))
}

// An eviction or a node shutdown stops the pod, whatever its container's
// exit says: not run, tried again, not failed.
func TestEvictedWorkloadIsNotAFailure(t *testing.T) {
	g := NewWithT(t)
	n, pods := readyNode()
	n.Labels[gpuv1.StateLabel(string(cw))] = string(gpuv1.StatePending)
	pods[cw] = proofPod(pods, "1", now, func(f *state.PodFacts) {
		failed802(f)
		f.Exits[0].Code = 137
		f.Reason, f.Message = "Evicted", "The node was low on resource: memory."
	})
	r := decide(t, n, pods, withProof)
	g.Expect(stateOf(r, cw)).To(Equal("pending"))
	g.Expect(r.Why[cw]).To(ContainSubstring("Evicted"))
}

// While the state cannot run (its prerequisites left, the driver being
// replaced), an unended pod of it goes: it would hold a GPU that an
// upgrade or a MIG reconfiguration waits for.
func TestWorkloadLeftBehindGoes(t *testing.T) {
	g := NewWithT(t)
	n, pods := readyNode()
	n.Labels[gpuv1.StateLabel(string(cw))] = "ready"
	pods[cw] = proofPod(pods, "1", now, nil)
	n.Labels[gpuv1.LabelUpgradeState] = string(gpuv1.UpgradePodRestart)
	r := decide(t, n, pods, withProof)
	g.Expect(stateOf(r, cw)).To(Equal("upgrading"))
	g.Expect(r.StalePods).To(ContainElement(cw))

	pods[cw] = proofPod(pods, "1", now, passed)
	g.Expect(decide(t, n, pods, withProof).StalePods).NotTo(ContainElement(cw), "a record holds nothing")
}

// On a node being proved for the first time, the device plugin's state
// turned ready only once the node advertised its GPUs: the proof starts at
// once, without the settle time a rolled plugin pod gets.
func TestFirstProofStartsAtOnce(t *testing.T) {
	g := NewWithT(t)
	n, pods := readyNode()
	n.Labels[gpuv1.StateLabel(string(cw))] = string(gpuv1.StatePending)
	pods[dp] = readyPod("p2", now.Add(-time.Second))
	r := decide(t, n, pods, withProof)
	g.Expect(r.Workload).NotTo(BeNil())
	g.Expect(r.Workload.Generation).To(Equal("boot=boot-1,driver=d1,plugin=p2,mig="))
}

// A fresh node is not ready before its first proof, whatever its labels:
// the exemption above is for nodes that were ready.
func TestFreshNodeWaitsForItsFirstProof(t *testing.T) {
	g := NewWithT(t)
	n, pods := readyNode()
	n.Labels[gpuv1.StateLabel(string(gfd))] = string(gpuv1.StatePending)
	delete(n.Labels, gpuv1.StateLabel(string(cw)))
	r := decide(t, n, pods, withProof)
	g.Expect(stateOf(r, gfd)).To(Equal("ready"))
	g.Expect(stateOf(r, cw)).To(Equal("pending"))
}

// The proof asks for what the device plugin advertises: a MIG device
// first, then a shared or whole GPU; none when nothing is allocatable.
func TestWorkloadAsksForTheAdvertisedResource(t *testing.T) {
	g := NewWithT(t)
	n, pods := readyNode()
	n.Labels[gpuv1.StateLabel(string(cw))] = string(gpuv1.StatePending)
	n.Status.Allocatable = corev1.ResourceList{"nvidia.com/mig-1g.18gb": resource.MustParse("7"), "nvidia.com/mig-7g.141gb": resource.MustParse("1"),
		"nvidia.com/gpu": resource.MustParse("0")}
	g.Expect(decide(t, n, pods, withProof).Workload.Resource).To(Equal(corev1.ResourceName("nvidia.com/mig-1g.18gb")))

	n.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu.shared": resource.MustParse("32")}
	g.Expect(decide(t, n, pods, withProof).Workload.Resource).To(Equal(corev1.ResourceName("nvidia.com/gpu.shared")))

	n.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("0")}
	r := decide(t, n, pods, withProof)
	g.Expect(r.Workload).To(BeNil())
	g.Expect(stateOf(r, cw)).To(Equal("pending"))
	g.Expect(r.Why[cw]).To(ContainSubstring("no allocatable GPU"))
}

// Turned off, on a node or in the policy, the proof is disabled and its
// pods go; on a node opted out of the device plugin it does not run.
func TestWorkloadProofOff(t *testing.T) {
	for name, mutate := range map[string]func(*corev1.Node, *Input){
		"policy":                  func(_ *corev1.Node, in *Input) { in.Enabled[cw] = false },
		"node":                    func(n *corev1.Node, _ *Input) { n.Labels[gpuv1.DeployLabel(string(cw))] = "false" },
		"device plugin opted out": func(n *corev1.Node, _ *Input) { n.Labels[gpuv1.DeployLabel(string(dp))] = "false" },
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			n, pods := readyNode()
			pods[cw] = proofPod(pods, "1", now, passed)
			r := decide(t, n, pods, withProof, func(in *Input) { mutate(n, in) })
			g.Expect(stateOf(r, cw)).To(Equal("disabled"))
			g.Expect(r.StalePods).To(ContainElement(cw), "its record goes")
			g.Expect(r.Workload).To(BeNil())
		})
	}
}

// The 802 explanation is the one Fabric Manager's users search for.
func TestExplainNamesCUDAErrors(t *testing.T) {
	g := NewWithT(t)
	g.Expect(cudaworkload.Explain("")).To(Equal("it printed nothing"))
	out := cudaworkload.Explain("[Vector addition of 50000 elements]\nFailed to allocate device vector A (error code no CUDA-capable device is detected)!\n")
	g.Expect(out).To(HavePrefix("[Vector addition of 50000 elements]; Failed to allocate"))
	g.Expect(out).To(ContainSubstring("CUDA error 100"))
	g.Expect(strings.Count(cudaworkload.Explain("a\nb\nc\nd"), ";")).To(Equal(1), "the last two lines only")
}

// A sample that runs past the retry hangs in CUDA: failed, told once, and
// replaced by the next attempt, which frees its GPU. An attempt annotation
// a person changed does not make the next attempt the same pod.
func TestHungWorkloadFailsAndIsReplaced(t *testing.T) {
	g := NewWithT(t)
	n, pods := readyNode()
	n.Labels[gpuv1.StateLabel(string(cw))] = string(gpuv1.StatePending)
	running := func(f *state.PodFacts) { f.Phase, f.Ready = corev1.PodRunning, true }
	pods[cw] = proofPod(pods, "1", now.Add(-time.Minute), running)
	g.Expect(stateOf(decide(t, n, pods, withProof), cw)).To(Equal("pending"), "a minute is within the retry")

	pods[cw] = proofPod(pods, "1", now.Add(-retry), running)
	r := decide(t, n, pods, withProof)
	g.Expect(stateOf(r, cw)).To(Equal("failed"))
	g.Expect(r.Why[cw]).To(ContainSubstring("has not ended within 5m0s (pod Running): a CUDA call hangs"))
	g.Expect(reasons(r)).To(ContainElement("StateFailed"))
	g.Expect(r.Workload.Attempt).To(Equal(2))

	gen := r.Workload.Generation
	pods[cw] = proofPod(pods, "1", now.Add(-retry), failed802)
	pods[cw].Name = cudaworkload.PodName(n.Name, cudaworkload.Request{Generation: gen, Attempt: 2})
	r = decide(t, n, pods, withProof)
	g.Expect(r.Workload.Attempt).To(Equal(3), "the pod is attempt 2's, whatever its annotation says")
}
