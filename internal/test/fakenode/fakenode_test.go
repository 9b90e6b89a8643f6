package fakenode

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/driver"
	"github.com/gpu-operator/gpu-operator/internal/state/nfd"
	"github.com/gpu-operator/gpu-operator/internal/state/toolkit"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
)

func pod(s state.Name, ready bool, spec corev1.PodSpec) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{render.LabelState: string(s)}},
		Spec:       spec,
		Status:     corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
}

// pluginSpec is a device plugin pod's spec as far as the node cares: its
// kubelet directory.
func pluginSpec() corev1.PodSpec {
	return corev1.PodSpec{Volumes: []corev1.Volume{{Name: "device-plugins",
		VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/kubelet/device-plugins"}}}}}
}

// toolkitPod is the toolkit pod the operator renders for a policy.
func toolkitPod(t *testing.T, mutate func(*gpuv1.ClusterPolicy)) *corev1.Pod {
	ps, err := fixture.Policies()
	if err != nil {
		t.Fatal(err)
	}
	cp := ps["default"]
	if mutate != nil {
		mutate(cp)
	}
	objs, err := toolkit.Operand{}.Render(state.RenderInput{Policy: cp, Namespace: fixture.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if ds, ok := o.(*appsv1.DaemonSet); ok && strings.TrimSuffix(strings.TrimSuffix(ds.Name, "-host-driver"), "-crio") == toolkit.DaemonSetName {
			return pod(state.ContainerToolkit, true, ds.Spec.Template.Spec)
		}
	}
	t.Fatal("no toolkit DaemonSet")
	return nil
}

func TestGPUsFollowTheDevicePlugin(t *testing.T) {
	g := NewWithT(t)
	n := &corev1.Node{}
	Apply(n, nil, nil)
	g.Expect(n.Status.Allocatable).NotTo(HaveKey(corev1.ResourceName("nvidia.com/gpu")), "a fresh node advertises no GPU")
	g.Expect(Apply(n, nil, nil)).To(Equal(Result{}), "no change, no write")

	g.Expect(Apply(n, []*corev1.Pod{pod(state.DevicePlugin, false, pluginSpec())}, nil).Status).To(BeFalse(), "not while it is not ready")
	g.Expect(Apply(n, []*corev1.Pod{pod(state.DevicePlugin, true, pluginSpec())}, nil).Status).To(BeTrue())
	g.Expect(n.Status.Allocatable.Name("nvidia.com/gpu", "").Value()).To(BeEquivalentTo(8))
	g.Expect(Apply(n, []*corev1.Pod{pod(state.DevicePlugin, true, pluginSpec())}, nil).Status).To(BeFalse(), "no change, no write")

	g.Expect(Apply(n, nil, nil).Status).To(BeTrue(), "gone with the plugin")
	g.Expect(n.Status.Allocatable.Name("nvidia.com/gpu", "").Value()).To(BeZero())
}

// A plugin registers only through the kubelet's own device-plugins
// directory, and loads NVML only where the host keeps its driver.
func TestPluginFindsTheKubeletAndTheDriver(t *testing.T) {
	g := NewWithT(t)
	moved := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationKubeletRoot: "/data/kubelet"}}}
	gpus := func(n *corev1.Node) int64 { return n.Status.Allocatable.Name("nvidia.com/gpu", "").Value() }
	Apply(moved, []*corev1.Pod{pod(state.DevicePlugin, true, pluginSpec())}, nil)
	g.Expect(gpus(moved)).To(BeZero(), "not registered at the stock path")
	spec := pluginSpec()
	spec.Volumes[0].HostPath.Path = "/data/kubelet/device-plugins"
	Apply(moved, []*corev1.Pod{pod(state.DevicePlugin, true, spec)}, nil)
	g.Expect(gpus(moved)).To(BeEquivalentTo(8))

	cos := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationDriverDir: "/home/kubernetes/bin/nvidia"}}}
	Apply(cos, []*corev1.Pod{pod(state.DevicePlugin, true, pluginSpec())}, nil)
	g.Expect(gpus(cos)).To(BeZero(), "no driver at /")
	spec = pluginSpec()
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "driver-root",
		VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/home/kubernetes/bin/nvidia"}}})
	Apply(cos, []*corev1.Pod{pod(state.DevicePlugin, true, spec)}, nil)
	g.Expect(gpus(cos)).To(BeEquivalentTo(8))
}

func TestUnhealthyGPUsLeaveAllocatable(t *testing.T) {
	g := NewWithT(t)
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationUnhealthyGPUs: "3"}}}
	plugin := []*corev1.Pod{pod(state.DevicePlugin, true, pluginSpec())}
	g.Expect(Apply(n, plugin, nil).Status).To(BeTrue())
	g.Expect(n.Status.Capacity.Name("nvidia.com/gpu", "").Value()).To(BeEquivalentTo(8))
	g.Expect(n.Status.Allocatable.Name("nvidia.com/gpu", "").Value()).To(BeEquivalentTo(5))
	g.Expect(Apply(n, plugin, nil).Status).To(BeFalse(), "no change, no write")

	delete(n.Annotations, AnnotationUnhealthyGPUs)
	g.Expect(Apply(n, plugin, nil).Status).To(BeTrue(), "healthy again")
	g.Expect(n.Status.Allocatable.Name("nvidia.com/gpu", "").Value()).To(BeEquivalentTo(8))
}

func nfdWorker() *corev1.Pod { return pod(state.NodeFeatureDiscovery, true, corev1.PodSpec{}) }

// GFD's labels come and go with GFD's file while NFD runs, and NFD names
// them in its annotation; once NFD is gone, they stay, as on a real node.
func TestGFDLabelsFollowGFDThroughNFD(t *testing.T) {
	g := NewWithT(t)
	n := &corev1.Node{}
	gfd := pod(state.GPUFeatureDiscovery, true, corev1.PodSpec{})
	g.Expect(Apply(n, []*corev1.Pod{gfd}, nil).Labels).To(BeFalse(), "no NFD, no labels")
	g.Expect(Apply(n, []*corev1.Pod{gfd, nfdWorker()}, nil).Labels).To(BeTrue())
	g.Expect(n.Labels).To(HaveKeyWithValue("nvidia.com/gpu.product", "NVIDIA-H200"))
	g.Expect(n.Labels).To(HaveKeyWithValue("nvidia.com/gpu.count", "8"))
	g.Expect(nfd.PublishedLabels(n.Annotations)).To(ContainElements("nvidia.com/gpu.product", "nvidia.com/gpu.count"))
	g.Expect(Apply(n, []*corev1.Pod{nfdWorker()}, nil).Labels).To(BeTrue(), "GFD removed its file")
	g.Expect(n.Labels).NotTo(HaveKey("nvidia.com/gpu.product"))
	g.Expect(n.Annotations).NotTo(HaveKey(nfd.FeatureLabelsAnnotation))

	g.Expect(Apply(n, []*corev1.Pod{gfd, nfdWorker()}, nil).Labels).To(BeTrue())
	g.Expect(Apply(n, nil, nil).Labels).To(BeFalse(), "NFD went first: nothing removes the labels")
	g.Expect(n.Labels).To(HaveKey("nvidia.com/gpu.product"))

	external := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationNFD: "external"}}}
	Apply(external, []*corev1.Pod{gfd}, nil)
	g.Expect(external.Labels).To(HaveKey("nvidia.com/gpu.product"), "the cluster's own NFD publishes them")
	Apply(external, nil, nil)
	g.Expect(external.Labels).NotTo(HaveKey("nvidia.com/gpu.product"))
}

// The runtime reports the NVIDIA handler only when the toolkit writes the
// node's own config through its own socket.
func TestHandlerFollowsTheToolkitsMounts(t *testing.T) {
	g := NewWithT(t)
	stock := toolkitPod(t, nil)
	k3s := toolkitPod(t, func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.Toolkit.Env = []gpuv1.EnvVar{
			{Name: "CONTAINERD_CONFIG", Value: "/var/lib/rancher/k3s/agent/etc/containerd/config.toml.tmpl"},
			{Name: "CONTAINERD_SOCKET", Value: "/run/k3s/containerd/containerd.sock"},
		}
	})
	names := func(n *corev1.Node) []string {
		var out []string
		for _, h := range n.Status.RuntimeHandlers {
			out = append(out, h.Name)
		}
		return out
	}

	n := &corev1.Node{}
	Apply(n, []*corev1.Pod{stock}, nil)
	g.Expect(names(n)).To(ContainElement("nvidia"))

	k3sNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		AnnotationContainerdConfig: "/var/lib/rancher/k3s/agent/etc/containerd/config.toml.tmpl",
		AnnotationContainerdSocket: "/run/k3s/containerd/containerd.sock",
	}}}
	Apply(k3sNode, []*corev1.Pod{stock}, nil)
	g.Expect(names(k3sNode)).To(Equal([]string{"", "runc"}), "the stock paths miss k3s's containerd")
	Apply(k3sNode, []*corev1.Pod{k3s}, nil)
	g.Expect(names(k3sNode)).To(ContainElement("nvidia"))

	never := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationRuntime: "never-configured"}}}
	Apply(never, []*corev1.Pod{stock}, nil)
	g.Expect(names(never)).To(Equal([]string{"", "runc"}))

	cos := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		AnnotationReadOnlyUsr: "true", AnnotationDriverDir: "/home/kubernetes/bin/nvidia"}}}
	Apply(cos, []*corev1.Pod{stock}, nil)
	g.Expect(names(cos)).To(Equal([]string{"", "runc"}), "/usr is read-only there, and the driver is elsewhere")
	cosToolkit := toolkitPod(t, func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.Driver.Enabled = new(bool)
		cp.Spec.Toolkit.InstallDir = "/home/kubernetes/bin/nvidia"
		cp.Spec.HostPaths.DriverInstallDir = "/home/kubernetes/bin/nvidia"
	})
	Apply(cos, []*corev1.Pod{cosToolkit}, nil)
	g.Expect(names(cos)).To(ContainElement("nvidia"))

	legacy := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationRuntime: "legacy"}}}
	Apply(legacy, []*corev1.Pod{stock}, nil)
	g.Expect(legacy.Status.RuntimeHandlers).To(BeEmpty(), "containerd 1.7 reports none")

	// CRI-O gets the handlers in config mode (CDI on), none from the hook.
	crio := func(cdi bool) *corev1.Pod {
		return toolkitPod(t, func(cp *gpuv1.ClusterPolicy) {
			cp.Spec.Operator.DefaultRuntime = gpuv1.RuntimeCRIO
			cp.Spec.CDI.Enabled = ptr.To(cdi)
		})
	}
	crioNode := &corev1.Node{}
	Apply(crioNode, []*corev1.Pod{crio(false)}, nil)
	g.Expect(names(crioNode)).To(Equal([]string{"", "runc"}), "the hook registers no handler")
	Apply(crioNode, []*corev1.Pod{crio(true)}, nil)
	g.Expect(names(crioNode)).To(Equal([]string{"", "runc", "nvidia", "nvidia-cdi", "nvidia-legacy"}))
}

func TestHostDriverAnswersTheCheck(t *testing.T) {
	g := NewWithT(t)
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationHostDriver: "550.54.15"}}}
	st := DriverCheck(n, pod(state.Driver, false, corev1.PodSpec{}))
	g.Expect(st).NotTo(BeNil())
	term := st.InitContainerStatuses[0].LastTerminationState.Terminated
	g.Expect(term.ExitCode).To(BeEquivalentTo(driver.HostDriverExitCode))
	g.Expect(term.Message).To(ContainSubstring("550.54.15"))
	g.Expect(DriverCheck(&corev1.Node{}, pod(state.Driver, false, corev1.PodSpec{}))).To(BeNil())
}

// Unhealthy GPUs heal by their recovery mode: on a device plugin restart,
// a driver reload, a reboot, or never; what they wait for is the pod (or
// boot) they went bad under being replaced.
func TestUnhealthyGPUsHealByTheirMode(t *testing.T) {
	withUID := func(s state.Name, uid string) *corev1.Pod {
		p := pod(s, true, pluginSpec())
		p.UID = types.UID(uid)
		return p
	}
	tests := map[string]struct {
		mode        string
		after       []*corev1.Pod
		rebooted    bool
		wantHealthy bool
	}{
		"plugin restart heals the plugin mode":     {mode: HealOnDevicePluginRestart, after: []*corev1.Pod{withUID(state.DevicePlugin, "plugin-2"), withUID(state.Driver, "driver-1")}, wantHealthy: true},
		"a driver reload heals the plugin mode":    {mode: HealOnDevicePluginRestart, after: []*corev1.Pod{withUID(state.DevicePlugin, "plugin-3"), withUID(state.Driver, "driver-2")}, wantHealthy: true},
		"plugin restart leaves the driver mode":    {mode: HealOnDriverReload, after: []*corev1.Pod{withUID(state.DevicePlugin, "plugin-2"), withUID(state.Driver, "driver-1")}},
		"driver reload heals the driver mode":      {mode: HealOnDriverReload, after: []*corev1.Pod{withUID(state.DevicePlugin, "plugin-2"), withUID(state.Driver, "driver-2")}, wantHealthy: true},
		"a reload leaves the reboot mode":          {mode: HealOnReboot, after: []*corev1.Pod{withUID(state.DevicePlugin, "plugin-2"), withUID(state.Driver, "driver-2")}},
		"a reboot heals the reboot mode":           {mode: HealOnReboot, after: []*corev1.Pod{withUID(state.DevicePlugin, "plugin-1"), withUID(state.Driver, "driver-1")}, rebooted: true, wantHealthy: true},
		"nothing heals never":                      {mode: HealNever, after: []*corev1.Pod{withUID(state.DevicePlugin, "plugin-2"), withUID(state.Driver, "driver-2")}, rebooted: true},
		"nothing heals without a mode":             {after: []*corev1.Pod{withUID(state.DevicePlugin, "plugin-2"), withUID(state.Driver, "driver-2")}, rebooted: true},
		"the same plugin, unready and back, stays": {mode: HealOnDevicePluginRestart, after: []*corev1.Pod{withUID(state.DevicePlugin, "plugin-1"), withUID(state.Driver, "driver-1")}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationUnhealthyGPUs: "2"}}}
			if tt.mode != "" {
				n.Annotations[AnnotationUnhealthyUntil] = tt.mode
			}
			n.Status.NodeInfo.BootID = "boot-1"
			before := []*corev1.Pod{withUID(state.DevicePlugin, "plugin-1"), withUID(state.Driver, "driver-1")}
			first := Apply(n, before, nil)
			g.Expect(n.Status.Allocatable.Name("nvidia.com/gpu", "").Value()).To(BeEquivalentTo(6))
			g.Expect(first.Labels).To(Equal(tt.mode != "" && tt.mode != HealNever), "the anchor is recorded once")
			g.Expect(Apply(n, nil, nil).Labels).To(BeFalse(), "the plugin gone heals nothing")
			if tt.rebooted {
				n.Status.NodeInfo.BootID = "boot-2"
			}
			Apply(n, tt.after, nil)
			if tt.wantHealthy {
				g.Expect(n.Status.Allocatable.Name("nvidia.com/gpu", "").Value()).To(BeEquivalentTo(8))
				g.Expect(n.Annotations).NotTo(HaveKey(AnnotationUnhealthyGPUs))
				g.Expect(n.Annotations).NotTo(HaveKey(AnnotationUnhealthyAnchor))
			} else {
				g.Expect(n.Status.Allocatable.Name("nvidia.com/gpu", "").Value()).To(BeEquivalentTo(6))
			}
		})
	}
}
