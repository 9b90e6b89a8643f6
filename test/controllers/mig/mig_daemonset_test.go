package mig

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
)

// A DaemonSet's pod that holds a GPU leaves the node for its MIG change
// (issue 52, finding 5): the reconfiguring taint keeps its controller
// from putting it back, and left in place it would hold the GPU through
// mig-manager's apply, which fails then. Before, the MIG change counted
// and evicted only the other GPU pods, and applied with this one running.
func TestMIGEvictsADaemonSetsGPUPod(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 0, withMIGPool)
	node := "mig-daemonset-0"
	f.CreateNode(node, map[string]string{"gpu-type": "h200"})
	f.Nodes = append(f.Nodes, node)
	f.ExpectAllReady(f.Nodes...)
	f.EnsureNamespace("workloads")
	agent := f.GPUPod("gpu-agent", node, func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "gpu-agent", UID: "0001",
			Controller: ptr.To(true)}}
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": controllertest.ResourceOne}
	})

	f.UpdatePolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.MIGManager.Enabled = ptr.To(true) })
	g.Eventually(func() bool {
		p := &corev1.Pod{}
		err := suite.Client.Get(f.Ctx, client.ObjectKeyFromObject(agent), p)
		return apierrors.IsNotFound(err) || err == nil && p.DeletionTimestamp != nil
	}, time.Minute, controllertest.Interval).Should(BeTrue(), "the DaemonSet's GPU pod is evicted")
	g.Eventually(func() map[string]string { return f.Node(node).Labels }, 3*time.Minute, controllertest.Interval).
		Should(HaveKeyWithValue(gpuv1.LabelMIGReconfigureState, string(gpuv1.MIGReconfigureDone)))
}
