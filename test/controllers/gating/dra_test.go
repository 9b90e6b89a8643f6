package gating

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
	"github.com/gpu-operator/gpu-operator/internal/test/fakenode"
)

// rackLabel puts a node in the DRA pool of withDRAPool.
const rackLabel = "example.com/rack"

// withDRAPool adds a driver pool in allocation mode dra: the nodes labelled
// example.com/rack=nvl72.
func withDRAPool(cp *gpuv1.ClusterPolicy) {
	cp.Spec.Driver.NodePools = append(cp.Spec.Driver.NodePools, gpuv1.DriverNodePool{Name: "nvl72",
		NodeSelector: map[string]gpuv1.LabelValue{rackLabel: "nvl72"}, AllocationMode: gpuv1.AllocationDRA})
}

// A DRA pool beside a device-plugin pool: the DRA node runs the DRA
// driver in the device plugin's place, is ready once its ResourceSlices
// name its GPUs, and keeps dcgm-exporter and GFD; the other node is as it
// always was. Neither ever runs both plugins.
func TestDRAPoolBesideADevicePluginPool(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 0, withDRAPool)
	draNode, dpNode := "dra-pool-0", "device-plugin-pool-0"
	f.CreateNode(draNode, map[string]string{rackLabel: "nvl72"})
	f.CreateNode(dpNode, nil)
	f.Nodes = append(f.Nodes, draNode, dpNode)
	never := func() {
		for _, n := range f.Nodes {
			g.Expect(f.PodOn(n, "device-plugin") != nil && f.PodOn(n, "dra-driver") != nil).To(BeFalse(), "%s runs both plugins", n)
		}
	}

	f.ExpectState("ready", "dra-driver", draNode)
	never()
	for _, s := range []string{"driver", "container-toolkit", "dcgm-exporter", "gpu-feature-discovery"} {
		f.ExpectState("ready", s, draNode, dpNode)
	}
	f.ExpectState("ready", "device-plugin", dpNode)
	f.ExpectState("disabled", "device-plugin", draNode)
	f.ExpectState("disabled", "dra-driver", dpNode)
	never()
	g.Expect(f.PodOn(draNode, "device-plugin")).To(BeNil())
	g.Expect(f.PodOn(dpNode, "dra-driver")).To(BeNil())
	g.Expect(f.Node(draNode).Labels).To(HaveKeyWithValue(gpuv1.LabelAllocationMode, "dra"))
	g.Expect(f.Node(dpNode).Labels).To(HaveKeyWithValue(gpuv1.LabelAllocationMode, "device-plugin"))
	g.Expect(f.Node(draNode).Annotations).To(HaveKeyWithValue(gpuv1.AnnotationServed, "true"), "the DRA driver serves the node")

	// The readiness is the slices', not the pod's: without them the
	// state leaves ready once the grace period is over.
	slices := &resourcev1.ResourceSliceList{}
	g.Expect(suite.Client.List(f.Ctx, slices, client.MatchingFields{"spec.nodeName": draNode})).To(Succeed())
	g.Expect(slices.Items).NotTo(BeEmpty())
	g.Expect(f.Node(dpNode).Status.Allocatable).To(HaveKey(corev1.ResourceName("nvidia.com/gpu")))
	g.Expect(f.Node(draNode).Status.Allocatable).NotTo(HaveKey(corev1.ResourceName("nvidia.com/gpu")))
	t.Logf("kubectl get nodes -L nvidia.com/gpu.state.*:\n%s", f.LabelTable())
}

// A node whose DRA driver pod is ready but publishes no slice is not
// ready: the plugin has no readiness probe, and only its slices prove it.
func TestDRADriverWithoutSlicesIsNotReady(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 0, func(cp *gpuv1.ClusterPolicy) { cp.Spec.Driver.AllocationMode = gpuv1.AllocationDRA })
	node := "dra-no-slices-0"
	// A node whose profile has no GPU: the simulated plugin publishes a
	// pool naming none.
	f.CreateNodeWith(node, nil, map[string]string{fakenode.AnnotationGPUs: "0"})
	f.Nodes = append(f.Nodes, node)
	f.ExpectState("pending", "dra-driver", node)
	g.Eventually(func() *corev1.Pod { return f.PodOn(node, "dra-driver") }, controllertest.Timeout, controllertest.Interval).ShouldNot(BeNil())
	// The status says why: the slices, once the pod is ready.
	cp := &gpuv1.ClusterPolicy{}
	g.Eventually(func() string {
		g.Expect(suite.Client.Get(f.Ctx, client.ObjectKeyFromObject(f.Policy), cp)).To(Succeed())
		if c := meta.FindStatusCondition(cp.Status.Conditions, gpuv1.ConditionReady); c != nil {
			return c.Message
		}
		return ""
	}, controllertest.Timeout, controllertest.Interval).Should(ContainSubstring("the DRA driver runs, but its ResourceSlices name no GPU"))
	g.Expect(controllertest.ReadyCondition(f.PodOn(node, "dra-driver")).Status).To(Equal(corev1.ConditionTrue))
	g.Expect(f.StateOf(node, "dra-driver")()).To(Equal("pending"))
	g.Expect(f.PodOn(node, "dcgm-exporter")).To(BeNil(), "dcgm-exporter waits for a proven plugin")
}

// A node that serves GPUs through the device plugin keeps it when its
// pool moves to dra: only the allocation mode switch, which evicts its
// GPU pods first, moves it. The node says so.
func TestServingNodeWaitsForItsSwitch(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 1)
	node := f.Nodes[0]
	f.ExpectAllReady(node)
	f.UpdatePolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.Driver.AllocationMode = gpuv1.AllocationDRA })
	g.Eventually(func() string { return f.Node(node).Annotations[gating.AnnotationAllocationModeWaiting] },
		controllertest.Timeout, controllertest.Interval).Should(ContainSubstring("waits for its allocation mode switch"))
	g.Expect(f.Node(node).Labels).To(HaveKeyWithValue(gpuv1.LabelAllocationMode, "device-plugin"))
	f.ExpectAllReady(node)
	g.Expect(f.PodOn(node, "dra-driver")).To(BeNil())
}
