package gating

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/driver"
)

func TestVariantLabels(t *testing.T) {
	tests := map[string]struct {
		runtime  string
		labels   map[string]string
		policy   func(*gpuv1.ClusterPolicy)
		enabled  func(map[state.Name]bool)
		wantRoot string
		wantRT   string
	}{
		"containerd, driver container": {runtime: "containerd://1.7.27", wantRoot: "container", wantRT: "containerd"},
		"k3s's containerd":             {runtime: "containerd://1.7.23-k3s2", wantRoot: "container", wantRT: "containerd"},
		"CRI-O":                        {runtime: "cri-o://1.31.0", wantRoot: "container", wantRT: "crio"},
		"docker through cri-dockerd":   {runtime: "docker://27.3.1", wantRoot: "container", wantRT: "docker"},
		"no runtime reported: the policy's default": {
			runtime: "", policy: func(cp *gpuv1.ClusterPolicy) { cp.Spec.Operator.DefaultRuntime = gpuv1.RuntimeCRIO },
			wantRoot: "container", wantRT: "crio",
		},
		"NVIDIA's chart default docker means containerd": {
			runtime: "", policy: func(cp *gpuv1.ClusterPolicy) { cp.Spec.Operator.DefaultRuntime = gpuv1.RuntimeDocker },
			wantRoot: "container", wantRT: "containerd",
		},
		"driver disabled in the policy": {
			runtime: "containerd://2.0.4", enabled: func(e map[state.Name]bool) { e[drv] = false }, wantRoot: "host", wantRT: "containerd",
		},
		"pre-installed driver": {
			runtime: "containerd://2.0.4", labels: map[string]string{gpuv1.DeployLabel("driver"): "pre-installed"},
			wantRoot: "host", wantRT: "containerd",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			n := node(tt.labels, nil)
			n.Status.NodeInfo.ContainerRuntimeVersion = tt.runtime
			r := decide(t, n, nil, func(in *Input) {
				if tt.policy != nil {
					tt.policy(in.Policy)
				}
				if tt.enabled != nil {
					tt.enabled(in.Enabled)
				}
			})
			g.Expect(r.Labels).To(HaveKeyWithValue(gpuv1.LabelDriverRoot, tt.wantRoot))
			g.Expect(r.Labels).To(HaveKeyWithValue(gpuv1.LabelContainerRuntime, tt.wantRT))
		})
	}
}

// A node whose kubelet runs docker gets nothing after the driver: its
// toolkit fails, saying why and what to do.
func TestDockerNodeFailsTheToolkit(t *testing.T) {
	g := NewWithT(t)
	n := node(nil, nil)
	n.Status.NodeInfo.ContainerRuntimeVersion = "docker://27.3.1"
	pods := map[state.Name]*state.PodFacts{drv: readyPod("d", now.Add(-time.Minute))}
	r := decide(t, n, pods)
	g.Expect(stateOf(r, drv)).To(Equal("ready"))
	g.Expect(stateOf(r, tk)).To(Equal("failed"))
	g.Expect(stateOf(r, dp)).To(Equal("pending"))
	g.Expect(r.Why[tk]).To(ContainSubstring("run containerd or CRI-O"))
	g.Expect(r.Events).To(ContainElement(HaveField("Message", ContainSubstring("docker://27.3.1"))))

	// Once failed, no new event.
	again := decide(t, node(r.Labels, r.Annotations), pods, func(in *Input) {
		in.Node.Status.NodeInfo.ContainerRuntimeVersion = "docker://27.3.1"
	})
	g.Expect(again.Events).To(BeEmpty())
}

// hostDriverPod is a driver pod whose host-driver check found the host's
// driver.
func hostDriverPod() *state.PodFacts {
	return &state.PodFacts{UID: "d", Since: now, Current: true, Exits: []state.Exit{
		{Container: driver.HostDriverCheckName, Code: driver.HostDriverExitCode, Message: "the host runs NVIDIA driver 550.54.15 (/usr/bin/nvidia-smi answers)\n"},
	}}
}

// A host driver is found, not only declared: the node remembers it, uses
// the host's driver, shows the driver disabled, and says so.
func TestHostDriverFound(t *testing.T) {
	g := NewWithT(t)
	r := decide(t, node(nil, nil), map[state.Name]*state.PodFacts{drv: hostDriverPod()})
	g.Expect(r.Labels).To(HaveKeyWithValue(gpuv1.LabelDriverRoot, "host"))
	g.Expect(stateOf(r, drv)).To(Equal("disabled"))
	g.Expect(r.Annotations).To(HaveKeyWithValue(gpuv1.AnnotationHostDriver,
		"the host runs NVIDIA driver 550.54.15 (/usr/bin/nvidia-smi answers)"))
	g.Expect(r.Events).To(ContainElement(And(HaveField("Reason", "HostDriverFound"),
		HaveField("Message", ContainSubstring("550.54.15")))))

	// Remembered once the driver pod is gone: the node never gets it back.
	again := decide(t, node(r.Labels, r.Annotations), nil)
	g.Expect(again.Labels).To(HaveKeyWithValue(gpuv1.LabelDriverRoot, "host"))
	g.Expect(stateOf(again, drv)).To(Equal("disabled"))
	g.Expect(again.Events).To(BeEmpty())

	// Any other failure of the check is a crash, not a finding.
	crashed := hostDriverPod()
	crashed.Exits = []state.Exit{{Container: driver.HostDriverCheckName, Code: 1, Message: "chroot: cannot run"}}
	r = decide(t, node(nil, nil), map[state.Name]*state.PodFacts{drv: crashed})
	g.Expect(r.Labels).To(HaveKeyWithValue(gpuv1.LabelDriverRoot, "container"))
	g.Expect(r.Annotations).NotTo(HaveKey(gpuv1.AnnotationHostDriver))
}

// A node whose driver moves between the driver container and the host
// restarts, in order, everything that uses the driver root: a driver going
// from ready to disabled is no exception.
func TestDriverRootChangeRestartsTheChain(t *testing.T) {
	tests := map[string]func(n *corev1.Node, pods map[state.Name]*state.PodFacts){
		"driver opted out on the node": func(n *corev1.Node, _ map[state.Name]*state.PodFacts) {
			n.Labels[gpuv1.DeployLabel("driver")] = "false"
		},
		"host driver found": func(_ *corev1.Node, pods map[state.Name]*state.PodFacts) { pods[drv] = hostDriverPod() },
		"pre-installed driver declared": func(n *corev1.Node, _ map[state.Name]*state.PodFacts) {
			n.Labels[gpuv1.DeployLabel("driver")] = "pre-installed"
		},
	}
	for name, change := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			n, pods := readyNode()
			change(n, pods)
			r := decide(t, n, pods)
			g.Expect(r.Labels).To(HaveKeyWithValue(gpuv1.LabelDriverRoot, "host"))
			g.Expect(stateOf(r, drv)).To(Equal("disabled"))
			for _, s := range []state.Name{tk, dp, dcg, gfd} {
				g.Expect(stateOf(r, s)).To(Equal("pending"), "state %s restarts with the host's driver root", s)
			}
			g.Expect(reasons(r)).To(ContainElement("VariantChanged"))

			// The old pods do not count: the new variant's pods must start.
			r = decide(t, node(r.Labels, r.Annotations), pods, func(in *Input) {
				in.Node.Labels[gpuv1.DeployLabel("driver")] = n.Labels[gpuv1.DeployLabel("driver")]
				in.Now = now.Add(time.Second)
			})
			g.Expect(stateOf(r, tk)).To(Equal("pending"))
			g.Expect(reasons(r)).NotTo(ContainElement("VariantChanged"), "reset once")
			pods[tk] = readyPod("t2", now.Add(2*time.Second))
			r = decide(t, node(r.Labels, r.Annotations), pods, func(in *Input) {
				in.Node.Labels[gpuv1.DeployLabel("driver")] = n.Labels[gpuv1.DeployLabel("driver")]
				in.Now = now.Add(3 * time.Second)
			})
			g.Expect(stateOf(r, tk)).To(Equal("ready"))
		})
	}
}
