package gating

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// A state whose pod is ready is ready only once it does its job on the
// node, as the node shows it; the decision says which proof fails.
func TestProofsOfFunction(t *testing.T) {
	old := now.Add(-time.Hour)
	allPods := func() map[state.Name]*state.PodFacts {
		return map[state.Name]*state.PodFacts{
			drv: readyPod("d1", old), tk: readyPod("t1", old), dp: readyPod("p1", old),
			dcg: readyPod("e1", old), gfd: readyPod("g1", old),
		}
	}
	handlers := func(names ...string) []corev1.NodeRuntimeHandler {
		var hs []corev1.NodeRuntimeHandler
		for _, n := range names {
			hs = append(hs, corev1.NodeRuntimeHandler{Name: n})
		}
		return hs
	}
	tests := map[string]struct {
		node    func(*corev1.Node)
		policy  func(*gpuv1.ClusterPolicy)
		state   state.Name
		want    string
		wantWhy string
	}{
		"device plugin ready, no GPU advertised": {
			node: func(n *corev1.Node) {
				n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}
			},
			state:   dp,
			want:    "pending",
			wantWhy: "the device plugin runs, but the node advertises no GPU (nvidia.com/gpu or nvidia.com/mig-*)",
		},
		"device plugin ready, only another operator's nvidia.com/ resource": {
			node: func(n *corev1.Node) {
				n.Status.Allocatable = corev1.ResourceList{"nvidia.com/rdma_shared_device_a": resource.MustParse("63")}
			},
			state: dp, want: "pending",
		},
		"device plugin ready, time-slicing renamed the resource": {
			node: func(n *corev1.Node) {
				n.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu.shared": resource.MustParse("32")}
			},
			state: dp, want: "ready",
		},
		"device plugin ready, zero GPUs advertised": {
			node: func(n *corev1.Node) {
				n.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("0")}
			},
			state: dp, want: "pending",
		},
		"device plugin advertising MIG devices": {
			node: func(n *corev1.Node) {
				n.Status.Allocatable = corev1.ResourceList{"nvidia.com/mig-1g.18gb": resource.MustParse("7")}
			},
			state: dp, want: "ready",
		},
		"GFD ready, no labels yet": {
			node:    func(n *corev1.Node) { delete(n.Labels, "nvidia.com/gpu.product") },
			state:   gfd,
			want:    "pending",
			wantWhy: "GPU feature discovery runs, but the node has no nvidia.com/gpu.product label yet (NFD puts GFD's labels on the node)",
		},
		"toolkit ready, runtime reports the handler": {
			node:  func(n *corev1.Node) { n.Status.RuntimeHandlers = handlers("", "runc", "nvidia", "nvidia-cdi") },
			state: tk, want: "ready",
		},
		"toolkit ready, runtime not restarted with the handler": {
			node:    func(n *corev1.Node) { n.Status.RuntimeHandlers = handlers("", "runc") },
			state:   tk,
			want:    "pending",
			wantWhy: `the container toolkit configured containerd, but the runtime reports no "nvidia" handler yet (it reports: runc)`,
		},
		"toolkit ready, the policy's runtime class names the handler": {
			node:   func(n *corev1.Node) { n.Status.RuntimeHandlers = handlers("", "runc", "nvidia") },
			policy: func(cp *gpuv1.ClusterPolicy) { cp.Spec.Operator.RuntimeClass = "nvidia-gpu" },
			state:  tk, want: "pending",
		},
		"toolkit ready, runtime reports no handlers at all: the probe stands": {
			state: tk, want: "ready",
		},
		"toolkit with the NRI plugin: it injects GPUs, no handler to look for": {
			node:   func(n *corev1.Node) { n.Status.RuntimeHandlers = handlers("", "runc") },
			policy: func(cp *gpuv1.ClusterPolicy) { cp.Spec.CDI.NRIPluginEnabled = ptr.To(true) },
			state:  tk, want: "ready",
		},
		"toolkit on CRI-O without CDI: a hook, no handler to look for": {
			node: func(n *corev1.Node) {
				n.Status.NodeInfo.ContainerRuntimeVersion = "cri-o://1.31.0"
				n.Status.RuntimeHandlers = handlers("", "runc", "crun")
			},
			policy: func(cp *gpuv1.ClusterPolicy) { cp.Spec.CDI.Enabled = ptr.To(false) },
			state:  tk, want: "ready",
		},
		"toolkit on CRI-O with CDI: CRI-O has not restarted with the handlers": {
			node: func(n *corev1.Node) {
				n.Status.NodeInfo.ContainerRuntimeVersion = "cri-o://1.31.0"
				n.Status.RuntimeHandlers = handlers("", "runc", "crun")
			},
			state: tk, want: "pending",
		},
		"toolkit on CRI-O with CDI: CRI-O reports the handlers": {
			node: func(n *corev1.Node) {
				n.Status.NodeInfo.ContainerRuntimeVersion = "cri-o://1.31.0"
				n.Status.RuntimeHandlers = handlers("", "runc", "crun", "nvidia", "nvidia-cdi", "nvidia-legacy")
			},
			state: tk, want: "ready",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			n := node(nil, map[string]string{AnnotationBootID: "boot-1"})
			if tt.node != nil {
				tt.node(n)
			}
			r := decide(t, n, allPods(), func(in *Input) {
				in.Policy.Spec.Operator.RuntimeClass = "nvidia"
				if tt.policy != nil {
					tt.policy(in.Policy)
				}
			})
			g.Expect(stateOf(r, tt.state)).To(Equal(tt.want))
			if tt.wantWhy != "" {
				g.Expect(r.Why).To(HaveKeyWithValue(tt.state, tt.wantWhy))
			}
			if tt.want == "pending" {
				for _, after := range []state.Name{dcg, gfd} {
					if after != tt.state && tt.state == dp {
						g.Expect(stateOf(r, after)).To(Equal("pending"), "nothing after an unproven state starts")
					}
				}
			}
		})
	}
}

// A ready state that loses its proof gets the grace period, then restarts
// what comes after it, as an outage of its pod does, and its own pod.
func TestProofLostAfterTheGracePeriod(t *testing.T) {
	g := NewWithT(t)
	n, pods := readyNode()
	n.Status.Allocatable, n.Status.Capacity = nil, nil
	r := decide(t, n, pods)
	g.Expect(stateOf(r, dp)).To(Equal("ready"), "a short loss is covered")
	g.Expect(r.RequeueAfter).To(Equal(grace))
	g.Expect(r.Annotations).To(HaveKeyWithValue(AnnotationMissingSince, "device-plugin=2026-11-30T12:00:00Z"))
	g.Expect(r.StalePods).To(BeEmpty())

	later := node(r.Labels, r.Annotations)
	later.Status.Allocatable, later.Status.Capacity = nil, nil
	r = decide(t, later, pods, func(in *Input) { in.Now = now.Add(grace + time.Second) })
	g.Expect(stateOf(r, dp)).To(Equal("pending"))
	g.Expect(stateOf(r, dcg)).To(Equal("pending"))
	g.Expect(r.Events).To(ContainElement(HaveField("Message", ContainSubstring("has no GPU registered"))))
	g.Expect(r.Annotations).NotTo(HaveKey(AnnotationMissingSince))
	g.Expect(r.StalePods).To(Equal([]state.Name{dp}), "its own pod restarts: nothing else would")

	// Once pending, the plugin's fresh pod is judged as any new one: no
	// second restart.
	pods[dp] = readyPod("p2", now.Add(grace+2*time.Second))
	again := node(r.Labels, r.Annotations)
	again.Status.Allocatable, again.Status.Capacity = nil, nil
	r = decide(t, again, pods, func(in *Input) { in.Now = now.Add(grace + 3*time.Second) })
	g.Expect(stateOf(r, dp)).To(Equal("pending"))
	g.Expect(r.StalePods).To(BeEmpty())
}

// Unhealthy GPUs lower what the node can allocate, not what it has: the
// device plugin stays ready, and so does the exporter that reports them.
func TestUnhealthyGPUsKeepTheChain(t *testing.T) {
	g := NewWithT(t)
	n, pods := readyNode()
	n.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("0")}
	r := decide(t, n, pods, func(in *Input) { in.Now = now.Add(time.Hour) })
	g.Expect(stateOf(r, dp)).To(Equal("ready"))
	g.Expect(stateOf(r, dcg)).To(Equal("ready"))
	g.Expect(r.RequeueAfter).To(BeZero())
}

// A toolkit whose probe fails past the grace period (its runtime config was
// reverted under it) is restarted, so that it configures the runtime again.
func TestNotReadyPodIsRestartedPastTheGracePeriod(t *testing.T) {
	g := NewWithT(t)
	n, pods := readyNode()
	pods[tk] = notReadyPod(now.Add(-time.Minute))
	r := decide(t, n, pods)
	g.Expect(stateOf(r, tk)).To(Equal("pending"))
	g.Expect(r.StalePods).To(Equal([]state.Name{tk}))

	// Never the driver's: only the upgrade state machine replaces it.
	n, pods = readyNode()
	pods[drv] = notReadyPod(now.Add(-time.Minute))
	r = decide(t, n, pods)
	g.Expect(stateOf(r, drv)).To(Equal("pending"))
	g.Expect(r.StalePods).NotTo(ContainElement(drv))
}

// A ready state's outdated pod, being rolled by its DaemonSet, keeps the
// state ready without proving the new spec: a renamed RuntimeClass's
// handler comes with the toolkit's new pod.
func TestOutdatedPodKeepsItsStateWithoutTheNewProof(t *testing.T) {
	g := NewWithT(t)
	n, pods := readyNode()
	n.Status.RuntimeHandlers = []corev1.NodeRuntimeHandler{{Name: ""}, {Name: "runc"}, {Name: "nvidia"}}
	pods[tk].Current = false
	r := decide(t, n, pods, func(in *Input) { in.Policy.Spec.Operator.RuntimeClass = "nvidia-gpu" })
	g.Expect(stateOf(r, tk)).To(Equal("ready"))
	g.Expect(r.RequeueAfter).To(BeZero())

	pods[tk] = readyPod("t2", now)
	r = decide(t, n, pods, func(in *Input) { in.Policy.Spec.Operator.RuntimeClass = "nvidia-gpu" })
	g.Expect(r.RequeueAfter).To(Equal(grace), "the new pod must prove the new handler")
}

// A grace count lasts only while its state is kept ready by it: the pod or
// proof coming back, or the state going anywhere else, ends it, so a later
// outage gets a full grace period of its own.
func TestGraceCountEndsWithItsCause(t *testing.T) {
	g := NewWithT(t)
	n, pods := readyNode()
	n.Annotations[AnnotationMissingSince] = "container-toolkit=2026-11-30T11:59:50Z,device-plugin=2026-11-30T11:59:50Z"
	r := decide(t, n, pods)
	g.Expect(stateOf(r, tk)).To(Equal("ready"))
	g.Expect(stateOf(r, dp)).To(Equal("ready"))
	g.Expect(r.Annotations).NotTo(HaveKey(AnnotationMissingSince), "pods and proofs are back")

	// A count still running is kept, from its start, beside one that ends
	// because its state failed.
	n, pods = readyNode()
	n.Annotations[AnnotationMissingSince] = "dcgm-exporter=2026-11-30T11:59:50Z,gpu-feature-discovery=2026-11-30T11:59:50Z"
	pods[dcg] = &state.PodFacts{UID: "e1", Since: now, Current: true, Failure: "crash loop"}
	delete(pods, gfd)
	r = decide(t, n, pods)
	g.Expect(stateOf(r, dcg)).To(Equal("failed"))
	g.Expect(stateOf(r, gfd)).To(Equal("ready"))
	g.Expect(r.Annotations).To(HaveKeyWithValue(AnnotationMissingSince, "gpu-feature-discovery=2026-11-30T11:59:50Z"))
	g.Expect(r.RequeueAfter).To(Equal(grace - 10*time.Second))
}

// A pod holds a device when any container, init containers included, asks
// for an nvidia.com/ resource, as a limit or a request.
func TestRequestsNVIDIAResource(t *testing.T) {
	g := NewWithT(t)
	with := func(init bool, l corev1.ResourceList, req bool) *corev1.Pod {
		c := corev1.Container{Name: "c"}
		if req {
			c.Resources.Requests = l
		} else {
			c.Resources.Limits = l
		}
		p := &corev1.Pod{}
		if init {
			p.Spec.InitContainers = []corev1.Container{c}
		} else {
			p.Spec.Containers = []corev1.Container{c}
		}
		return p
	}
	gpu := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	g.Expect(RequestsNVIDIAResource(with(false, gpu, false))).To(BeTrue())
	g.Expect(RequestsNVIDIAResource(with(false, gpu, true))).To(BeTrue())
	g.Expect(RequestsNVIDIAResource(with(true, gpu, false))).To(BeTrue())
	g.Expect(RequestsNVIDIAResource(with(false, corev1.ResourceList{"nvidia.com/mig-1g.18gb": resource.MustParse("1")}, false))).To(BeTrue())
	g.Expect(RequestsNVIDIAResource(with(false, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}, false))).To(BeFalse())
}
