package gating

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
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
	"github.com/gpu-operator/gpu-operator/internal/test/fakenode"
)

// addNode adds to the test a GPU node named after its first node with a
// suffix, carrying one simulator annotation that says what it is.
func addNode(f *controllertest.Fixture, suffix, annotation, value string) string {
	name := f.Nodes[0] + suffix
	f.CreateNodeWith(name, nil, map[string]string{annotation: value})
	f.Nodes = append(f.Nodes, name)
	return name
}

// readyMessage returns the policy's Ready condition message.
func readyMessage(f *controllertest.Fixture) string {
	cp := &gpuv1.ClusterPolicy{}
	if err := suite.Client.Get(f.Ctx, client.ObjectKeyFromObject(f.Policy), cp); err != nil {
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
	f := suite.Setup(t, 1)
	host := addNode(f, "-host", fakenode.AnnotationHostDriver, "550.54.15")

	f.ExpectState("disabled", "driver", host)
	f.ExpectLabel(host, gpuv1.LabelDriverRoot, "host")
	f.ExpectAllUp(f.Nodes...)
	g.Expect(f.Node(host).Annotations).To(HaveKeyWithValue(gpuv1.AnnotationHostDriver,
		"the host runs NVIDIA driver 550.54.15 (/usr/bin/nvidia-smi answers)"))
	g.Eventually(func() bool { return f.PodOn(host, "driver") == nil }, controllertest.Timeout, controllertest.Interval).Should(BeTrue(),
		"the driver container left the node")
	for _, s := range []string{"container-toolkit", "device-plugin"} {
		// Until the driver pod's check answered, the node ran the driver
		// container's variant: that pod may still be on its way out.
		g.Eventually(func() string {
			if p := f.PodOn(host, s); p != nil && strings.Contains(p.Name, "-host-driver-") {
				return controllertest.EnvOf(p, "NVIDIA_DRIVER_ROOT")
			}
			return ""
		}, controllertest.Timeout, controllertest.Interval).Should(Equal("/"), "%s runs from its host-driver DaemonSet, on the host's driver", s)
		g.Expect(controllertest.EnvOf(f.PodOn(f.Nodes[0], s), "NVIDIA_DRIVER_ROOT")).To(Equal("/run/nvidia/driver"))
	}
	g.Expect(f.EventsOf(host)).To(ContainElement(ContainSubstring("the host runs NVIDIA driver 550.54.15")))
	g.Eventually(func() string {
		cp := &gpuv1.ClusterPolicy{}
		g.Expect(suite.Client.Get(f.Ctx, client.ObjectKeyFromObject(f.Policy), cp)).To(Succeed())
		for _, s := range cp.Status.States {
			if s.Name == "driver" {
				return s.Message
			}
		}
		return ""
	}, controllertest.Timeout, controllertest.Interval).Should(Equal("1 nodes use the driver installed on their host: " + host +
		" (the host runs NVIDIA driver 550.54.15 (/usr/bin/nvidia-smi answers))"))
}

// The toolkit's pod being ready proves nothing while the runtime does not
// report the NVIDIA handler: the node waits, and the status says why.
func TestToolkitWaitsForTheRuntimeHandler(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 1)
	stuck := addNode(f, "-stuck", fakenode.AnnotationRuntime, "never-configured")

	f.ExpectAllReady(f.Nodes[0])
	g.Eventually(func() bool { p := f.PodOn(stuck, "container-toolkit"); return p != nil && fakenode.PodReady(p) }, controllertest.Timeout, controllertest.Interval).Should(BeTrue())
	f.ExpectState("pending", "container-toolkit", stuck)
	g.Expect(f.PodOn(stuck, "device-plugin")).To(BeNil(), "nothing that needs the runtime starts")
	g.Eventually(func() string { return readyMessage(f) }, controllertest.Timeout, controllertest.Interval).Should(ContainSubstring(
		`container-toolkit is ready on 1 of 2 nodes; not ready: ` + stuck +
			` (the container toolkit configured containerd, but the runtime reports no "nvidia" handler yet (it reports: runc))`))
	// The message is the decision on the ready pod: its proof failed. No
	// waiting window is needed to know the state stays pending.
	g.Expect(f.StateOf(stuck, "container-toolkit")()).To(Equal("pending"))
}

// The device plugin's pod being ready proves nothing while the node
// advertises no GPU.
func TestDevicePluginWaitsForTheNodesGPUs(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 1)
	name := addNode(f, "-nogpu", fakenode.AnnotationGPUs, "0")

	f.ExpectState("ready", "container-toolkit", name)
	g.Eventually(func() bool { p := f.PodOn(name, "device-plugin"); return p != nil && fakenode.PodReady(p) }, controllertest.Timeout, controllertest.Interval).Should(BeTrue())
	f.ExpectState("pending", "device-plugin", name)
	g.Eventually(func() string { return readyMessage(f) }, controllertest.Timeout, controllertest.Interval).Should(ContainSubstring(
		"device-plugin is ready on 1 of 2 nodes; not ready: " + name + " (the device plugin runs, but the node advertises no GPU (nvidia.com/gpu or nvidia.com/mig-*))"))
	// The message is the decision on the ready pod: its proof failed.
	g.Expect(f.StateOf(name, "device-plugin")()).To(Equal("pending"))
}

// One RuntimeClass, with the handler of its own name, whenever an operand
// uses it: also with the toolkit disabled (a toolkit on the host), and
// under another name.
func TestRuntimeClassFollowsItsUsers(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 1)
	node := f.Nodes[0]
	f.ExpectAllReady(node)
	handler := func(name string) func() string {
		return func() string {
			rc := &nodev1.RuntimeClass{}
			if err := suite.Client.Get(f.Ctx, client.ObjectKey{Name: name}, rc); err != nil {
				return err.Error()
			}
			return rc.Handler
		}
	}
	g.Eventually(handler("nvidia"), controllertest.Timeout, controllertest.Interval).Should(Equal("nvidia"))

	f.UpdatePolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.Toolkit.Enabled = ptr.To(false) })
	f.ExpectState("disabled", "container-toolkit", node)
	// Applied and pruned for the change: the class is kept, not awaited.
	f.Reconciled()
	g.Expect(handler("nvidia")()).To(Equal("nvidia"), "the device plugin still needs it")
	// The plugin's pod rolls: without the operator's toolkit it names the
	// hook's default path and waits for no management spec.
	g.Eventually(func() *string {
		if p := f.PodOn(node, "device-plugin"); p != nil {
			return p.Spec.RuntimeClassName
		}
		return nil
	}, controllertest.Timeout, controllertest.Interval).Should(HaveValue(Equal("nvidia")))

	f.UpdatePolicy(func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.Toolkit.Enabled = ptr.To(true)
		cp.Spec.Operator.RuntimeClass = "nvidia-gpu"
	})
	g.Eventually(handler("nvidia-gpu"), controllertest.Timeout, controllertest.Interval).Should(Equal("nvidia-gpu"))
	g.Eventually(func() bool {
		return apierrors.IsNotFound(suite.Client.Get(f.Ctx, client.ObjectKey{Name: "nvidia"}, &nodev1.RuntimeClass{}))
	}, controllertest.Timeout, controllertest.Interval).Should(BeTrue(), "the old RuntimeClass is pruned")
	g.Eventually(func() string {
		p := f.PodOn(node, "container-toolkit")
		if p == nil {
			return ""
		}
		return controllertest.EnvOf(p, "NVIDIA_RUNTIME_NAME")
	}, controllertest.Timeout, controllertest.Interval).Should(Equal("nvidia-gpu"), "the toolkit registers the handler the class names")
	f.ExpectAllReady(node)
	// The device plugin may stay ready on its old pod for the grace
	// period while the new one starts.
	g.Eventually(func() *string {
		if p := f.PodOn(node, "device-plugin"); p != nil {
			return p.Spec.RuntimeClassName
		}
		return nil
	}, controllertest.Timeout, controllertest.Interval).Should(HaveValue(Equal("nvidia-gpu")))
}
