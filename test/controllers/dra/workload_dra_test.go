package dra

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state/cudaworkload"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
	"github.com/gpu-operator/gpu-operator/internal/test/fakenode"
)

// On a node of a DRA pool the proof claims its GPU through the DRA
// driver, as DRA workloads do: its pod is made unbound, pinned to the
// node, and bound by the (simulated) scheduler once the node's slices
// name a device of its class. The node is ready, its readiness taint
// lifted, once the sample ran; a DRA node whose Fabric Manager is down is
// held out with the cause named. A cordoned DRA node's proof waits for
// the scheduler.
func TestDRANodeIsProvedThroughAClaim(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 0, withDRAPool, controllertest.WithReadinessTaint)
	good, down := "dra-pool-0", "dra-pool-fm"
	f.CreateNode(good, map[string]string{rackLabel: "nvl72"})
	f.CreateNodeWith(down, map[string]string{rackLabel: "nvl72"}, map[string]string{fakenode.AnnotationFabricManager: "down"})
	f.Nodes = append(f.Nodes, good, down)

	f.ExpectAllUp(good)
	f.ExpectState("ready", "cuda-workload", good)
	g.Eventually(f.TaintsOf(good), controllertest.Timeout, controllertest.Interval).Should(BeEmpty())
	proof := f.PodOn(good, "cuda-workload")
	g.Expect(proof).NotTo(BeNil())
	g.Expect(proof.Spec.ResourceClaims).To(ConsistOf(HaveField("ResourceClaimTemplateName",
		Equal(ptr.To(cudaworkload.ClaimTemplateName(cudaworkload.GPUDeviceClass))))))
	g.Expect(proof.Spec.PriorityClassName).To(Equal(cudaworkload.PriorityClassName))
	g.Expect(proof.Spec.Containers[0].Resources.Limits).To(BeEmpty(), "the DRA node advertises no extended resource")

	class := &schedulingv1.PriorityClass{}
	g.Expect(suite.Client.Get(f.Ctx, client.ObjectKey{Name: cudaworkload.PriorityClassName}, class)).To(Succeed())
	g.Expect(class.PreemptionPolicy).To(Equal(ptr.To(corev1.PreemptNever)))
	templates := &resourcev1.ResourceClaimTemplateList{}
	g.Expect(suite.Client.List(f.Ctx, templates, client.InNamespace(controllertest.Namespace))).To(Succeed())
	g.Expect(templates.Items).To(HaveLen(2))

	// A cordoned DRA node gets no proof: the scheduler does not place
	// it there, which says nothing of CUDA. The node waits, its pod
	// kept, and is proved once uncordoned.
	cordoned := "dra-pool-cordoned"
	f.CreateNode(cordoned, map[string]string{rackLabel: "nvl72"})
	f.Nodes = append(f.Nodes, cordoned)
	cordon(f, cordoned, true)
	f.ExpectState("ready", "dra-driver", cordoned)
	var waiting *corev1.Pod
	g.Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(suite.Client.List(f.Ctx, pods, client.InNamespace(controllertest.Namespace),
			client.MatchingLabels{render.LabelApp: cudaworkload.App})).To(Succeed())
		for i := range pods.Items {
			if pods.Items[i].Annotations[cudaworkload.AnnotationNode] == cordoned {
				waiting = &pods.Items[i]
			}
		}
		g.Expect(waiting).NotTo(BeNil())
		g.Expect(waiting.Status.Conditions).To(ContainElement(And(HaveField("Type", corev1.PodScheduled),
			HaveField("Message", ContainSubstring("untolerated taint {node.kubernetes.io/unschedulable")))))
	}, controllertest.Timeout, controllertest.Interval).Should(Succeed())
	f.ExpectState("pending", "cuda-workload", cordoned)
	cordon(f, cordoned, false)
	f.ExpectState("ready", "cuda-workload", cordoned)
	g.Expect(f.PodOn(cordoned, "cuda-workload").UID).To(Equal(waiting.UID), "the waiting pod ran, not a new one")

	f.ExpectState("ready", "dra-driver", down)
	f.ExpectState("failed", "cuda-workload", down)
	g.Eventually(func() string { return strings.Join(f.EventsOf(down), "\n") }, controllertest.Timeout, controllertest.Interval).Should(
		And(ContainSubstring("CUDA error 802"), ContainSubstring("Fabric Manager")))
	g.Expect(f.TaintsOf(down)()).To(Equal([]string{gpuv1.TaintGPUNotReady + ":NoSchedule"}))
}

// cordon sets a node's spec.unschedulable, as kubectl cordon does: a
// patch, which the operator's own writes of the node do not conflict with.
func cordon(f *controllertest.Fixture, node string, on bool) {
	n := f.Node(node)
	base := n.DeepCopy()
	n.Spec.Unschedulable = on
	NewWithT(f.T).Expect(suite.Client.Patch(f.Ctx, n, client.MergeFrom(base))).To(Succeed())
}
