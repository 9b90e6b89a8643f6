package policy

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
)

// The NRI plugin injects whatever devices a pod's nvidia.cdi.k8s.io/
// annotations name. Turned on by an edit of the ClusterPolicy, with no
// chart involved, the operator's admission policy refuses those
// annotations on a tenant's pod and lets the operator's namespace set
// them, and a pod annotated before it stood be labelled but not given
// other devices; turned off, the guard goes with the plugin's pods.
func TestNRIGuardFollowsThePolicy(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 1)
	f.EnsureNamespace("tenant")
	annotated := func(namespace string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "nri-", Namespace: namespace,
				Annotations: map[string]string{state.NRIDevicesAnnotation("main"): "k8s.device-plugin.nvidia.com/gpu=all"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
		}
	}
	create := func(namespace string) error {
		p := annotated(namespace)
		err := suite.Client.Create(f.Ctx, p)
		if err == nil {
			_ = suite.Client.Delete(f.Ctx, p)
		}
		return err
	}
	g.Expect(create("tenant")).To(Succeed(), "no guard without the NRI plugin")
	// A pod annotated while no guard stood.
	before := annotated("tenant")
	g.Expect(suite.Client.Create(f.Ctx, before)).To(Succeed())
	t.Cleanup(func() { _ = suite.Client.Delete(f.Ctx, before) })

	f.UpdatePolicy(func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.CDI.Enabled = ptr.To(true)
		cp.Spec.CDI.NRIPluginEnabled = ptr.To(true)
	})
	g.Eventually(func() error { return create("tenant") }, controllertest.Timeout, controllertest.Interval).
		Should(MatchError(ContainSubstring("only the GPU operator's namespace " + controllertest.Namespace + " may set them")))
	g.Expect(create(controllertest.Namespace)).To(Succeed(), "the operator's management pods name their devices")
	// The pod from before may be labelled, finalized, deleted; it may not
	// name other devices.
	g.Expect(suite.Client.Patch(f.Ctx, before, client.RawPatch(types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"team":"ml"}}}`)))).To(Succeed())
	g.Expect(suite.Client.Patch(f.Ctx, before, client.RawPatch(types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+state.NRIDevicesAnnotation("main")+`":"management.nvidia.com/gpu=all"}}}`)))).
		To(MatchError(ContainSubstring("may set them")))

	f.UpdatePolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.CDI.NRIPluginEnabled = ptr.To(false) })
	g.Eventually(func() error { return create("tenant") }, controllertest.Timeout, controllertest.Interval).Should(Succeed(),
		"the guard goes with the plugin")
}
