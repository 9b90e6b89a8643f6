//go:build e2e

package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/test/fakenode"
)

// The extra nodes of the e2e cluster (hack/sim/nodes.sh, SIM_NODE_KINDS).
const (
	hostDriverNode   = "gpu-host-driver"
	crioNode         = "gpu-crio"
	k3sNode          = "gpu-k3s"
	unconfiguredNode = "gpu-unconfigured"
	cosNode          = "gpu-cos"
	kubeletRootNode  = "gpu-kubelet-root"
	fabricDownNode   = "gpu-fabric-manager-down"
)

// nodeKinds are the kinds of extra nodes the suite's cluster has.
var nodeKinds = "host-driver,crio,k3s,unconfigured,gke-cos,kubelet-root,fabric-manager-down"

// HostDriverSpec checks a node whose host runs its own driver: the driver
// pod's check finds it, the node uses it (driver disabled, the toolkit and
// device plugin on the host's driver root), the rest of its stack is ready,
// and the node event and the policy's status say so.
func HostDriverSpec(ctx context.Context) {
	Eventually(func(g Gomega) {
		n := node(g, ctx, hostDriverNode)
		g.Expect(n.Labels).To(HaveKeyWithValue(gpuv1.StateLabel("driver"), "disabled"))
		g.Expect(n.Labels).To(HaveKeyWithValue(gpuv1.LabelDriverRoot, "host"))
		g.Expect(n.Annotations).To(HaveKeyWithValue(gpuv1.AnnotationHostDriver, ContainSubstring("550.54.15")))
		for _, s := range states[1:] {
			g.Expect(n.Labels).To(HaveKeyWithValue(gpuv1.StateLabel(s), "ready"), "state %s", s)
		}
	}).WithTimeout(rolloutTimeout).WithPolling(time.Second).Should(Succeed())
	Expect(podOn(ctx, hostDriverNode, "driver")).To(BeNil(), "the driver container left the node")
	for _, s := range []string{"container-toolkit", "device-plugin"} {
		// A pod of the driver container's variant may still be leaving.
		Eventually(func(g Gomega) {
			p := podOn(ctx, hostDriverNode, s)
			g.Expect(p).NotTo(BeNil(), "%s pod", s)
			g.Expect(owner(p)).To(HaveSuffix("-host-driver"), "%s from its host-driver DaemonSet", s)
			g.Expect(envOf(p, "NVIDIA_DRIVER_ROOT")).To(Equal("/"), "%s on the host's driver", s)
		}).WithTimeout(30 * time.Second).Should(Succeed())
	}
	Eventually(func(g Gomega) {
		g.Expect(stateMessage(g, ctx, "driver")).To(ContainSubstring(hostDriverNode + " (the host runs NVIDIA driver 550.54.15"))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(nodeEventReasons(g, ctx, hostDriverNode)).To(ContainElement("HostDriverFound"))
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

// FabricManagerDownSpec checks an NVSwitch node whose Fabric Manager is
// down: every operand runs and is ready there, nvidia-smi answers, but the
// CUDA workload fails with error 802, so the node never counts as ready;
// the policy's status and the node's events name the node and the cause.
func FabricManagerDownSpec(ctx context.Context) {
	Eventually(func(g Gomega) {
		n := node(g, ctx, fabricDownNode)
		for _, s := range states {
			g.Expect(n.Labels).To(HaveKeyWithValue(gpuv1.StateLabel(s), "ready"), "state %s", s)
		}
		g.Expect(n.Labels).To(HaveKeyWithValue(gpuv1.StateLabel(proofState), "failed"))
		g.Expect(stateMessage(g, ctx, proofState)).To(And(ContainSubstring(fabricDownNode), ContainSubstring("CUDA error 802"),
			ContainSubstring("Fabric Manager")))
		g.Expect(nodeEventReasons(g, ctx, fabricDownNode)).To(ContainElement("StateFailed"))
	}).WithTimeout(rolloutTimeout).WithPolling(time.Second).Should(Succeed())
	// Each attempt's pod fails and is kept as the record until the next
	// attempt's pod exists (after the workload retry), which then runs
	// for a moment: the record is the newest pod once it has failed.
	Eventually(func(g Gomega) {
		p := podOn(ctx, fabricDownNode, proofState)
		g.Expect(p).NotTo(BeNil(), "the failed proof is kept as the record")
		g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
		g.Expect(p.Spec.Containers[0].Resources.Limits).To(HaveKey(corev1.ResourceName("nvidia.com/gpu")), "asked the device plugin for its GPU")
	}).WithTimeout(30 * time.Second).Should(Succeed())
	Expect(node(Default, ctx, fabricDownNode).Labels).To(HaveKeyWithValue(gpuv1.StateLabel(proofState), "failed"),
		"still failed while the next attempt runs")
}

// CRIOSpec checks a CRI-O node under CDI: the toolkit registers NVIDIA's
// three runtimes in a CRI-O drop-in (config mode, as NVIDIA's operator does
// with CDI) and restarts CRI-O, the node reports their handlers, the GPU
// operands name the RuntimeClass as on containerd, and a pod naming each
// of the three RuntimeClasses is admitted and runs there.
func CRIOSpec(ctx context.Context) {
	AllReadySpec(ctx, AllReadyInput{Nodes: []string{crioNode}})
	tk := podOn(ctx, crioNode, "container-toolkit")
	Expect(envOf(tk, "RUNTIME")).To(Equal("crio"))
	Expect(envOf(tk, "CRIO_CONFIG_MODE")).To(Equal("config"))
	Expect(envOf(tk, "RUNTIME_DROP_IN_CONFIG_HOST_PATH")).To(Equal("/etc/crio/crio.conf.d/99-nvidia.conf"))
	Expect(hostPaths(tk)).To(ContainElement("/etc/crio/crio.conf.d"))
	Expect(owner(tk)).To(HaveSuffix("-crio"))
	classes := []string{"nvidia", "nvidia-cdi", "nvidia-legacy"}
	Eventually(func(g Gomega) {
		var handlers []string
		for _, h := range node(g, ctx, crioNode).Status.RuntimeHandlers {
			handlers = append(handlers, h.Name)
		}
		g.Expect(handlers).To(ContainElements(classes))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	for _, s := range []string{"device-plugin", "dcgm-exporter", "gpu-feature-discovery"} {
		Expect(podOn(ctx, crioNode, s).Spec.RuntimeClassName).To(HaveValue(Equal("nvidia")), "%s on CRI-O", s)
	}
	for _, class := range classes {
		rc := &nodev1.RuntimeClass{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: class}, rc)).To(Succeed())
		Expect(rc.Handler).To(Equal(class))
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "runs-" + class, Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: crioNode, RuntimeClassName: &class,
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				Containers:  []corev1.Container{{Name: "main", Image: "cuda"}}},
		}
		Expect(k8s.Create(ctx, pod)).To(Succeed(), "the RuntimeClass %s admits the pod", class)
		DeferCleanup(func(ctx context.Context) {
			Expect(client.IgnoreNotFound(k8s.Delete(ctx, pod, client.GracePeriodSeconds(0)))).To(Succeed())
		})
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
			g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
		}).WithTimeout(30*time.Second).Should(Succeed(), "a pod naming %s runs on the CRI-O node", class)
	}
}

// RuntimeProofInput names nodes whose runtime never gets the NVIDIA handler.
type RuntimeProofInput struct {
	Nodes []string
}

// RuntimeProofSpec checks that a toolkit pod being ready is not enough: on
// nodes whose runtime reports no NVIDIA handler (one that never loads it,
// and k3s's containerd while the toolkit writes the stock paths), the
// toolkit stays pending, nothing after it starts, and the policy's status
// names the nodes and the proof that fails.
func RuntimeProofSpec(ctx context.Context, in RuntimeProofInput) {
	for _, n := range in.Nodes {
		Eventually(func(g Gomega) {
			p := podOn(ctx, n, "container-toolkit")
			g.Expect(p).NotTo(BeNil())
			g.Expect(fakenode.PodReady(p)).To(BeTrue())
		}).WithTimeout(rolloutTimeout).Should(Succeed())
	}
	Consistently(func(g Gomega) {
		for _, n := range in.Nodes {
			g.Expect(node(g, ctx, n).Labels).To(HaveKeyWithValue(gpuv1.StateLabel("container-toolkit"), "pending"), "node %s", n)
			g.Expect(podOn(ctx, n, "device-plugin")).To(BeNil(), "node %s", n)
		}
	}).WithTimeout(10 * time.Second).WithPolling(time.Second).Should(Succeed())
	Eventually(func(g Gomega) {
		msg := stateMessage(g, ctx, "container-toolkit")
		for _, n := range in.Nodes {
			g.Expect(msg).To(ContainSubstring(n + ` (the container toolkit configured containerd, but the runtime reports no "nvidia" handler yet`))
		}
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

// K3sPathsInput is the toolkit env that points at k3s's containerd.
type K3sPathsInput struct {
	Config, Socket string
	// Nodes are nodes at the stock paths.
	Nodes []string
}

// K3sPathsSpec sets the toolkit's containerd paths to k3s's with helm: the
// toolkit's host mounts follow, the k3s node comes up, and stock nodes whose
// runtime reports handlers show the toolkit unproven (it now writes files
// their containerd does not read). Setting the values back restores them.
func K3sPathsSpec(ctx context.Context, in K3sPathsInput) {
	var reporting []string
	for _, n := range in.Nodes {
		if !fakenode.ProfileOf(node(Default, ctx, n)).Legacy {
			reporting = append(reporting, n)
		}
	}
	Expect(reporting).NotTo(BeEmpty(), "a stock node whose runtime reports its handlers")
	helmUpgrade("--set", "toolkit.env[0].name=CONTAINERD_CONFIG", "toolkit.env[0].value="+in.Config,
		"toolkit.env[1].name=CONTAINERD_SOCKET", "toolkit.env[1].value="+in.Socket)
	AllReadySpec(ctx, AllReadyInput{Nodes: []string{k3sNode}})
	tk := podOn(ctx, k3sNode, "container-toolkit")
	Expect(hostPaths(tk)).To(ContainElements("/var/lib/rancher/k3s/agent/etc/containerd", "/run/k3s/containerd"))
	Expect(envOf(tk, "CONTAINERD_CONFIG")).To(Equal("/runtime/config-dir/config.toml.tmpl"))
	Eventually(func(g Gomega) {
		for _, n := range reporting {
			g.Expect(node(g, ctx, n).Labels).To(HaveKeyWithValue(gpuv1.StateLabel("container-toolkit"), "pending"), "node %s", n)
		}
	}).WithTimeout(rolloutTimeout).Should(Succeed())

	// --set toolkit.env=null is lost to --reuse-values (helm keeps the
	// old list); an explicit empty list is not.
	helmUpgrade("--set-json", "toolkit.env=[]")
	AllReadySpec(ctx, AllReadyInput{Nodes: in.Nodes})
}

// ToolkitDisabledSpec disables the toolkit (one installed on the hosts):
// its DaemonSets go, and the RuntimeClass stays while operands name it.
// Enabling it again brings it back.
func ToolkitDisabledSpec(ctx context.Context, nodes []string) {
	helmSet("toolkit.enabled=false")
	Eventually(func(g Gomega) {
		for _, n := range nodes {
			g.Expect(node(g, ctx, n).Labels).To(HaveKeyWithValue(gpuv1.StateLabel("container-toolkit"), "disabled"))
			g.Expect(podOn(ctx, n, "container-toolkit")).To(BeNil())
		}
		list := &appsv1.DaemonSetList{}
		g.Expect(k8s.List(ctx, list, client.MatchingLabels{render.LabelState: "container-toolkit"})).To(Succeed())
		g.Expect(list.Items).To(BeEmpty())
	}).WithTimeout(rolloutTimeout).Should(Succeed())
	Consistently(func(g Gomega) {
		rc := &nodev1.RuntimeClass{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "nvidia"}, rc)).To(Succeed())
		g.Expect(rc.Handler).To(Equal("nvidia"))
		for _, n := range nodes {
			g.Expect(node(g, ctx, n).Labels).To(HaveKeyWithValue(gpuv1.StateLabel("device-plugin"), "ready"))
		}
	}).WithTimeout(5 * time.Second).Should(Succeed())
	helmSet("toolkit.enabled=true")
	AllReadySpec(ctx, AllReadyInput{Nodes: nodes})
}

// RuntimeClassSpec renames the RuntimeClass: the new one has the handler
// of its name, the toolkit registers that handler, operands name it, the
// old class is pruned.
func RuntimeClassSpec(ctx context.Context, nodes []string) {
	helmSet("operator.runtimeClass=nvidia-gpu")
	expectRuntimeClass(ctx, nodes, "nvidia-gpu", "nvidia")
	AllReadySpec(ctx, AllReadyInput{Nodes: nodes})
	// Back: every node was ready before the change reached it, so the
	// rename is waited for first, or the order check reads pods the
	// rollout is replacing.
	helmSet("operator.runtimeClass=nvidia")
	expectRuntimeClass(ctx, nodes, "nvidia", "nvidia-gpu")
	AllReadySpec(ctx, AllReadyInput{Nodes: nodes})
}

// expectRuntimeClass waits until the RuntimeClass name exists with the
// handler of its name, old is gone, the toolkit registers the handler and
// every GPU operand's pod on the nodes names the class.
func expectRuntimeClass(ctx context.Context, nodes []string, name, old string) {
	Eventually(func(g Gomega) {
		rc := &nodev1.RuntimeClass{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, rc)).To(Succeed())
		g.Expect(rc.Handler).To(Equal(name))
		g.Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Name: old}, &nodev1.RuntimeClass{}))).To(BeTrue())
		for _, n := range nodes {
			g.Expect(envOf(podOn(ctx, n, "container-toolkit"), "NVIDIA_RUNTIME_NAME")).To(Equal(name))
			for _, s := range []string{"device-plugin", "dcgm-exporter", "gpu-feature-discovery"} {
				// Nil while the rename replaces it: the poll must fail,
				// not panic.
				pod := podOn(ctx, n, s)
				g.Expect(pod).NotTo(BeNil(), "%s pod on %s", s, n)
				g.Expect(pod.Spec.RuntimeClassName).To(HaveValue(Equal(name)), "%s pod on %s", s, n)
			}
		}
	}).WithTimeout(rolloutTimeout).WithPolling(time.Second).Should(Succeed())
}

// stateMessage returns what the policy's status says of a state.
func stateMessage(g Gomega, ctx context.Context, name string) string {
	for _, s := range policy(g, ctx).Status.States {
		if s.Name == name {
			return s.Message
		}
	}
	return ""
}

// helmSet changes one value of the release.
func helmSet(value string) { helmUpgrade("--set", value) }

// helmUpgrade upgrades the release, keeping its values but those given,
// each with flag (--set, --set-json); the setup hook runs again.
func helmUpgrade(flag string, values ...string) {
	args := []string{"upgrade", "gpu-operator", "deployments/gpu-operator", "-n", "gpu-operator", "--reuse-values"}
	for _, v := range values {
		args = append(args, flag, v)
	}
	_, err := sh("bin/helm", args...)
	Expect(err).NotTo(HaveOccurred())
}

func envOf(p *corev1.Pod, name string) string {
	if p == nil {
		return ""
	}
	for _, e := range p.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func hostPaths(p *corev1.Pod) []string {
	var out []string
	for _, v := range p.Spec.Volumes {
		if v.HostPath != nil {
			out = append(out, v.HostPath.Path)
		}
	}
	return out
}

// owner names the DaemonSet a pod belongs to.
func owner(p *corev1.Pod) string {
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return o.Name
		}
	}
	return ""
}

// GKECOSSpec checks a node of GKE's Container-Optimized OS: Google's driver
// lives in /home/kubernetes/bin/nvidia and /usr is read-only, so with the
// default host paths its toolkit cannot configure the runtime. With
// NVIDIA's documented settings (hostPaths.driverInstallDir and
// toolkit.installDir in /home/kubernetes/bin/nvidia) the node comes up on
// its host's driver, and the other nodes stay up. Setting them back
// restores the defaults.
func GKECOSSpec(ctx context.Context, nodes []string) {
	const dir = "/home/kubernetes/bin/nvidia"
	Eventually(func(g Gomega) {
		g.Expect(node(g, ctx, cosNode).Labels).To(HaveKeyWithValue(gpuv1.StateLabel("container-toolkit"), "pending"))
	}).WithTimeout(rolloutTimeout).Should(Succeed())
	helmUpgrade("--set", "hostPaths.driverInstallDir="+dir, "toolkit.installDir="+dir)
	Eventually(func(g Gomega) {
		labels := node(g, ctx, cosNode).Labels
		g.Expect(labels).To(HaveKeyWithValue(gpuv1.StateLabel("driver"), "disabled"))
		for _, s := range states[1:] {
			g.Expect(labels).To(HaveKeyWithValue(gpuv1.StateLabel(s), "ready"), "state %s", s)
		}
	}).WithTimeout(rolloutTimeout).WithPolling(time.Second).Should(Succeed())
	tk, dp := podOn(ctx, cosNode, "container-toolkit"), podOn(ctx, cosNode, "device-plugin")
	Expect(envOf(tk, "ROOT")).To(Equal(dir))
	Expect(envOf(tk, "NVIDIA_DRIVER_ROOT")).To(Equal(dir))
	Expect(envOf(dp, "NVIDIA_DRIVER_ROOT")).To(Equal(dir))
	Expect(envOf(dp, "NVIDIA_CDI_HOOK_PATH")).To(Equal(dir + "/toolkit/nvidia-cdi-hook"))
	Expect(hostPaths(tk)).To(ContainElement(dir))
	waitAllReady(ctx, nodes)

	helmUpgrade("--set", "hostPaths.driverInstallDir=/run/nvidia/driver", "toolkit.installDir=/usr/local/nvidia")
	waitAllReady(ctx, nodes)
}

// KubeletRootSpec checks a node whose kubelet keeps its root in
// /data/kubelet: the device plugin registers there only once
// hostPaths.kubeletRootDir says so. Setting it back restores the other
// nodes.
func KubeletRootSpec(ctx context.Context, nodes []string) {
	Eventually(func(g Gomega) {
		g.Expect(stateMessage(g, ctx, "device-plugin")).To(ContainSubstring(kubeletRootNode + " (the device plugin runs, but the node advertises no GPU"))
	}).WithTimeout(rolloutTimeout).Should(Succeed())
	helmSet("hostPaths.kubeletRootDir=/data/kubelet")
	waitAllReady(ctx, []string{kubeletRootNode})
	Expect(hostPaths(podOn(ctx, kubeletRootNode, "device-plugin"))).To(ContainElement("/data/kubelet/device-plugins"))
	Expect(hostPaths(podOn(ctx, kubeletRootNode, "dcgm-exporter"))).To(ContainElement("/data/kubelet/pod-resources"))

	helmSet("hostPaths.kubeletRootDir=/var/lib/kubelet")
	waitAllReady(ctx, nodes)
}

// CDISwitchSpec switches a running cluster from CDI to the older mode and
// back while GPU pods run: the device plugin rolls to the other way of
// handing out GPUs on every node, every node's stack comes back, and no
// running GPU pod is deleted or restarted (docs/cdi.md says what a
// container restarted across the switch gets).
func CDISwitchSpec(ctx context.Context, nodes []string) {
	const ns = "cdi-switch"
	createGPUDeployment(ctx, ns, "inference", 4, nil)
	running := func(g Gomega) map[string]string {
		list := &corev1.PodList{}
		g.Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		pods := map[string]string{}
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				pods[string(p.UID)] = p.Spec.NodeName
			}
		}
		return pods
	}
	var before map[string]string
	Eventually(func(g Gomega) {
		before = running(g)
		g.Expect(before).To(HaveLen(4))
	}).WithTimeout(time.Minute).Should(Succeed())
	for _, step := range []struct{ enabled, strategy string }{{"false", "volume-mounts"}, {"true", "cdi-annotations,cdi-cri"}} {
		helmSet("cdi.enabled=" + step.enabled)
		Eventually(func(g Gomega) {
			for _, n := range nodes {
				p := podOn(ctx, n, "device-plugin")
				g.Expect(p).NotTo(BeNil(), "device plugin on %s", n)
				g.Expect(envOf(p, "DEVICE_LIST_STRATEGY")).To(Equal(step.strategy), "device plugin on %s", n)
			}
		}).WithTimeout(rolloutTimeout).WithPolling(time.Second).Should(Succeed())
		waitAllReady(ctx, nodes)
		Expect(running(Default)).To(Equal(before), "cdi.enabled=%s: every GPU pod still runs", step.enabled)
	}
	Expect(k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
}
