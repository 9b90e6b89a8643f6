package dra

import (
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
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
	// Never both: no node is taken by both plugins' DaemonSets, whose
	// gates decide where the pods go (there is one DaemonSet of each
	// here: one driver root, one configuration).
	never := func() {
		for _, n := range f.Nodes {
			var taking []string
			for _, s := range []string{"device-plugin", "dra-driver"} {
				for _, ds := range f.DaemonSets(s) {
					if f.Selects(&ds, n) {
						taking = append(taking, ds.Name)
					}
				}
			}
			g.Expect(len(taking)).To(BeNumerically("<=", 1), "%s is taken by %v", n, taking)
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
	g.Eventually(func() []resourcev1.ResourceSlice {
		slices := &resourcev1.ResourceSliceList{}
		g.Expect(suite.Client.List(f.Ctx, slices, client.MatchingFields{"spec.nodeName": node})).To(Succeed())
		return slices.Items
	}, controllertest.Timeout, controllertest.Interval).ShouldNot(BeEmpty(), "the simulated plugin publishes its pool")
	// The status says why. A reason that changes while the label stays
	// pending does not refresh the status by itself: a label of no meaning
	// to the operator, changed at each look, makes the status decide
	// again.
	cp := &gpuv1.ClusterPolicy{}
	look := 0
	g.Eventually(func() string {
		look++
		f.SetLabel(node, "example.com/look", strconv.Itoa(look))
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

// A DRA node that serves keeps its DRA driver when its pool moves back to
// the device plugin while a PodDisruptionBudget holds its GPU pods: the
// driver's objects stay while a node is in mode dra, and the node waits
// in its switch's eviction, saying so. Nothing takes its plugin from
// under the pods holding its GPUs.
func TestServingDRANodeKeepsItsDriverWhenThePoolMovesBack(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 0, func(cp *gpuv1.ClusterPolicy) { cp.Spec.Driver.AllocationMode = gpuv1.AllocationDRA })
	node := "dra-moves-back-0"
	f.CreateNode(node, nil)
	f.Nodes = append(f.Nodes, node)
	f.ExpectState("ready", "dra-driver", node)
	f.ExpectState("ready", "gpu-feature-discovery", node)
	plugin := f.PodOn(node, "dra-driver")
	held := f.HeldGPUPod("dra-moves-back-trainer", node)

	f.UpdatePolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.Driver.AllocationMode = gpuv1.AllocationDevicePlugin })
	g.Eventually(func() string { return f.Node(node).Annotations[gating.AnnotationAllocationModeWaiting] },
		controllertest.Timeout, controllertest.Interval).Should(ContainSubstring("its pool's allocation mode is device-plugin"))
	g.Eventually(func() string { return f.Node(node).Labels[gpuv1.LabelModeSwitchState] }, controllertest.Timeout, controllertest.Interval).
		Should(Equal(string(gpuv1.ModeSwitchEviction)))
	// The policy was reconciled after the change (the waiting note comes
	// from the node controller, the DaemonSets from the policy's): its
	// status reflects this generation.
	cp := &gpuv1.ClusterPolicy{}
	g.Eventually(func() bool {
		g.Expect(suite.Client.Get(f.Ctx, client.ObjectKeyFromObject(f.Policy), cp)).To(Succeed())
		return cp.Status.ObservedGeneration == cp.Generation
	}, controllertest.Timeout, controllertest.Interval).Should(BeTrue())
	g.Expect(f.DaemonSets("dra-driver")).To(HaveLen(1), "the DRA driver's DaemonSet stays while a node runs it")
	g.Expect(f.DaemonSetMatches("dra-driver", node)).To(BeTrue())
	g.Expect(f.DaemonSetMatches("device-plugin", node)).To(BeFalse())
	g.Expect(f.PodOn(node, "dra-driver").UID).To(Equal(plugin.UID))
	g.Expect(f.Node(node).Labels).To(HaveKeyWithValue(gpuv1.LabelAllocationMode, "dra"))
	f.ExpectState("ready", "dra-driver", node)

	// The budget lets go: the node moves to the device plugin.
	g.Expect(suite.Client.Delete(f.Ctx, held)).To(Succeed())
	g.Eventually(func() map[string]string { return f.Node(node).Labels }, 3*time.Minute, controllertest.Interval).
		Should(And(HaveKeyWithValue(gpuv1.LabelModeSwitchState, string(gpuv1.ModeSwitchDone)),
			HaveKeyWithValue(gpuv1.LabelAllocationMode, string(gpuv1.AllocationDevicePlugin))))
	f.ExpectState("ready", "device-plugin", node)
	g.Eventually(func() []appsv1.DaemonSet { return f.DaemonSets("dra-driver") }, controllertest.Timeout, controllertest.Interval).
		Should(BeEmpty(), "pruned once no node runs it")
}
