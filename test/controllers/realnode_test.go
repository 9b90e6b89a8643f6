package controllers

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/test/fakenode"
)

// addNode adds to the test a GPU node named after its first node with a
// suffix, carrying one simulator annotation that says what it is.
func (f *fixture) addNode(suffix, annotation, value string) string {
	name := f.nodes[0] + suffix
	f.createNodeWith(name, nil, map[string]string{annotation: value})
	f.nodes = append(f.nodes, name)
	return name
}

// readyMessage returns the policy's Ready condition message.
func (f *fixture) readyMessage() string {
	cp := &gpuv1.ClusterPolicy{}
	if err := k8sClient.Get(f.ctx, client.ObjectKeyFromObject(f.policy), cp); err != nil {
		return ""
	}
	if c := meta.FindStatusCondition(cp.Status.Conditions, gpuv1.ConditionReady); c != nil {
		return c.Message
	}
	return ""
}

// A node whose host already runs a driver never gets the driver container:
// the driver pod's check finds the host's driver, the node uses it, and the
// operator says so on the node and in the policy's status.
func TestHostDriverIsFoundAndUsed(t *testing.T) {
	g := NewWithT(t)
	f := setup(t, 1)
	host := f.addNode("-host", fakenode.AnnotationHostDriver, "550.54.15")

	f.expectState("disabled", "driver", host)
	f.expectLabel(host, gpuv1.LabelDriverRoot, "host")
	f.expectAllUp(f.nodes...)
	g.Expect(f.node(host).Annotations).To(HaveKeyWithValue(gpuv1.AnnotationHostDriver,
		"the host runs NVIDIA driver 550.54.15 (/usr/bin/nvidia-smi answers)"))
	g.Eventually(func() bool { return f.podOn(host, "driver") == nil }, timeout, interval).Should(BeTrue(),
		"the driver container left the node")
	for _, s := range []string{"container-toolkit", "device-plugin"} {
		// Until the driver pod's check answered, the node ran the driver
		// container's variant: that pod may still be on its way out.
		g.Eventually(func() string {
			if p := f.podOn(host, s); p != nil && strings.Contains(p.Name, "-host-driver-") {
				return envOf(p, "NVIDIA_DRIVER_ROOT")
			}
			return ""
		}, timeout, interval).Should(Equal("/"), "%s runs from its host-driver DaemonSet, on the host's driver", s)
		g.Expect(envOf(f.podOn(f.nodes[0], s), "NVIDIA_DRIVER_ROOT")).To(Equal("/run/nvidia/driver"))
	}
	g.Expect(f.eventsOf(host)).To(ContainElement(ContainSubstring("the host runs NVIDIA driver 550.54.15")))
	g.Eventually(func() string {
		cp := &gpuv1.ClusterPolicy{}
		g.Expect(k8sClient.Get(f.ctx, client.ObjectKeyFromObject(f.policy), cp)).To(Succeed())
		for _, s := range cp.Status.States {
			if s.Name == "driver" {
				return s.Message
			}
		}
		return ""
	}, timeout, interval).Should(Equal("1 nodes use the driver installed on their host: " + host +
		" (the host runs NVIDIA driver 550.54.15 (/usr/bin/nvidia-smi answers))"))
}

// The toolkit's pod being ready proves nothing while the runtime does not
// report the NVIDIA handler: the node waits, and the status says why.
func TestToolkitWaitsForTheRuntimeHandler(t *testing.T) {
	g := NewWithT(t)
	f := setup(t, 1)
	stuck := f.addNode("-stuck", fakenode.AnnotationRuntime, "never-configured")

	f.expectAllReady(f.nodes[0])
	g.Eventually(func() bool { p := f.podOn(stuck, "container-toolkit"); return p != nil && fakenode.PodReady(p) }, timeout, interval).Should(BeTrue())
	f.expectState("pending", "container-toolkit", stuck)
	g.Expect(f.podOn(stuck, "device-plugin")).To(BeNil(), "nothing that needs the runtime starts")
	g.Eventually(f.readyMessage, timeout, interval).Should(ContainSubstring(
		`container-toolkit is ready on 1 of 2 nodes; not ready: ` + stuck +
			` (the container toolkit configured containerd, but the runtime reports no "nvidia" handler yet (it reports: runc))`))
	// The message is the decision on the ready pod: its proof failed. No
	// waiting window is needed to know the state stays pending.
	g.Expect(f.stateOf(stuck, "container-toolkit")()).To(Equal("pending"))
}

// The device plugin's pod being ready proves nothing while the node
// advertises no GPU.
func TestDevicePluginWaitsForTheNodesGPUs(t *testing.T) {
	g := NewWithT(t)
	f := setup(t, 1)
	name := f.addNode("-nogpu", fakenode.AnnotationGPUs, "0")

	f.expectState("ready", "container-toolkit", name)
	g.Eventually(func() bool { p := f.podOn(name, "device-plugin"); return p != nil && fakenode.PodReady(p) }, timeout, interval).Should(BeTrue())
	f.expectState("pending", "device-plugin", name)
	g.Eventually(f.readyMessage, timeout, interval).Should(ContainSubstring(
		"device-plugin is ready on 1 of 2 nodes; not ready: " + name + " (the device plugin runs, but the node advertises no GPU (nvidia.com/gpu or nvidia.com/mig-*))"))
	// The message is the decision on the ready pod: its proof failed.
	g.Expect(f.stateOf(name, "device-plugin")()).To(Equal("pending"))
}

// One RuntimeClass, with the handler of its own name, whenever an operand
// uses it: also with the toolkit disabled (a toolkit on the host), and
// under another name.
func TestRuntimeClassFollowsItsUsers(t *testing.T) {
	g := NewWithT(t)
	f := setup(t, 1)
	node := f.nodes[0]
	f.expectAllReady(node)
	handler := func(name string) func() string {
		return func() string {
			rc := &nodev1.RuntimeClass{}
			if err := k8sClient.Get(f.ctx, client.ObjectKey{Name: name}, rc); err != nil {
				return err.Error()
			}
			return rc.Handler
		}
	}
	g.Eventually(handler("nvidia"), timeout, interval).Should(Equal("nvidia"))

	f.updatePolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.Toolkit.Enabled = ptr.To(false) })
	f.expectState("disabled", "container-toolkit", node)
	// Applied and pruned for the change: the class is kept, not awaited.
	f.reconciled()
	g.Expect(handler("nvidia")()).To(Equal("nvidia"), "the device plugin still needs it")
	g.Expect(*f.podOn(node, "device-plugin").Spec.RuntimeClassName).To(Equal("nvidia"))

	f.updatePolicy(func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.Toolkit.Enabled = ptr.To(true)
		cp.Spec.Operator.RuntimeClass = "nvidia-gpu"
	})
	g.Eventually(handler("nvidia-gpu"), timeout, interval).Should(Equal("nvidia-gpu"))
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8sClient.Get(f.ctx, client.ObjectKey{Name: "nvidia"}, &nodev1.RuntimeClass{}))
	}, timeout, interval).Should(BeTrue(), "the old RuntimeClass is pruned")
	g.Eventually(func() string {
		p := f.podOn(node, "container-toolkit")
		if p == nil {
			return ""
		}
		return envOf(p, "NVIDIA_RUNTIME_NAME")
	}, timeout, interval).Should(Equal("nvidia-gpu"), "the toolkit registers the handler the class names")
	f.expectAllReady(node)
	g.Expect(*f.podOn(node, "device-plugin").Spec.RuntimeClassName).To(Equal("nvidia-gpu"))
}
