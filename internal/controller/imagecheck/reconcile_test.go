package imagecheck

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/driverpool"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/test/crdschema"
	"github.com/gpu-operator/gpu-operator/internal/test/envtest"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
	"github.com/gpu-operator/gpu-operator/internal/test/podindex"
)

// The controller is woken by every node label change of a rollout; where
// no pool runs precompiled drivers there is nothing to check, and it must
// not copy the fleet's nodes to find that out. With a precompiled pool it
// reads them and starts the check of the node's image.
func TestReconcileReadsNoNodeWithoutAPrecompiledPool(t *testing.T) {
	g := NewWithT(t)
	ctx := ctrl.LoggerInto(context.Background(), ctrl.Log)
	cp, err := crdschema.Defaulted(&gpuv1.ClusterPolicy{})
	g.Expect(err).NotTo(HaveOccurred())
	cp.Name = "cluster-policy"
	n := &corev1.Node{}
	n.Name = "gpu-1"
	n.Labels = map[string]string{
		"feature.node.kubernetes.io/pci-10de.present": "true",
		state.LabelKernelVersion:                      "5.15.0-1040-azure",
		state.LabelOSReleaseID:                        "ubuntu",
		state.LabelOSVersionID:                        "22.04",
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	nodeLists := 0
	api := fake.NewClientBuilder().WithScheme(envtest.NewScheme()).WithObjects(cp, n).
		WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*corev1.NodeList); ok {
				nodeLists++
			}
			return c.List(ctx, list, opts...)
		}}).Build()
	r := &Reconciler{Client: api, Pods: podindex.Fixed(t), Namespace: fixture.Namespace}

	_, err = r.Reconcile(ctx, images)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nodeLists).To(BeZero(), "no pool runs precompiled drivers")
	checks := &corev1.PodList{}
	g.Expect(api.List(ctx, checks)).To(Succeed())
	g.Expect(checks.Items).To(BeEmpty())

	cp.Spec.Driver.UsePrecompiled = ptr.To(true)
	g.Expect(api.Update(ctx, cp)).To(Succeed())
	_, err = r.Reconcile(ctx, images)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nodeLists).To(Equal(1))
	g.Expect(api.List(ctx, checks)).To(Succeed())
	g.Expect(checks.Items).To(HaveLen(1), "the node's image is checked")
	g.Expect(checks.Items[0].Annotations).To(HaveKey(driverpool.AnnotationImage))
	g.Expect(checks.Items[0].Spec.NodeName).To(Equal(n.Name))
}

// A node quarantined with a NoExecute taint runs no check of an image not
// yet trusted: the check goes to another node of the pool, and waits while
// there is none.
func TestReconcileChecksNoImageOnAQuarantinedNode(t *testing.T) {
	g := NewWithT(t)
	ctx := ctrl.LoggerInto(context.Background(), ctrl.Log)
	cp, err := crdschema.Defaulted(&gpuv1.ClusterPolicy{})
	g.Expect(err).NotTo(HaveOccurred())
	cp.Name = "cluster-policy"
	cp.Spec.Driver.UsePrecompiled = ptr.To(true)
	quarantine := corev1.Taint{Key: "security.example.com/quarantine", Effect: corev1.TaintEffectNoExecute}
	node := func(name string, taints ...corev1.Taint) *corev1.Node {
		n := &corev1.Node{}
		n.Name = name
		n.Labels = map[string]string{
			"feature.node.kubernetes.io/pci-10de.present": "true",
			state.LabelKernelVersion:                      "5.15.0-1040-azure",
			state.LabelOSReleaseID:                        "ubuntu",
			state.LabelOSVersionID:                        "22.04",
		}
		n.Spec.Taints = taints
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		return n
	}
	api := fake.NewClientBuilder().WithScheme(envtest.NewScheme()).
		WithObjects(cp, node("gpu-1", quarantine)).Build()
	r := &Reconciler{Client: api, Pods: podindex.Fixed(t), Namespace: fixture.Namespace}
	checks := &corev1.PodList{}

	_, err = r.Reconcile(ctx, images)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(api.List(ctx, checks)).To(Succeed())
	g.Expect(checks.Items).To(BeEmpty(), "the only node is quarantined")

	g.Expect(api.Create(ctx, node("gpu-2"))).To(Succeed())
	_, err = r.Reconcile(ctx, images)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(api.List(ctx, checks)).To(Succeed())
	g.Expect(checks.Items).To(HaveLen(1))
	g.Expect(checks.Items[0].Spec.NodeName).To(Equal("gpu-2"), "gpu-1 comes first by name, but is quarantined")
}
