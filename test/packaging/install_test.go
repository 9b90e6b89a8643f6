package packaging

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/install"
)

// What the setup hook runs: the CRDs are applied (again, here: envtest
// installed them already) and the namespace admits privileged pods.
func TestSetupHook(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(install.Setup(ctx, k8sClient, "gpu-operator", 30*time.Second)).To(Succeed())
	ns := &corev1.Namespace{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "gpu-operator"}, ns)).To(Succeed())
	g.Expect(ns.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "privileged"))
	// Running it twice is fine: hooks run on every upgrade.
	g.Expect(install.Setup(ctx, k8sClient, "gpu-operator", 30*time.Second)).To(Succeed())
}

// What the cleanup hook runs: every ClusterPolicy is deleted, and it
// returns once they are gone.
func TestCleanupHook(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	for _, name := range []string{"a", "b"} {
		g.Expect(k8sClient.Create(ctx, &gpuv1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
	}
	g.Expect(install.Cleanup(ctx, k8sClient, false, 30*time.Second)).To(Succeed())
	list := &gpuv1.ClusterPolicyList{}
	g.Expect(k8sClient.List(ctx, list)).To(Succeed())
	g.Expect(list.Items).To(BeEmpty())
}

// A ClusterPolicy whose finalizer nobody removes (no operator running)
// makes cleanup fail with a message that says what to check.
func TestCleanupHookWithoutOperator(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cp := &gpuv1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "stuck", Finalizers: []string{"nvidia.com/gpu-operator-cleanup"}}}
	g.Expect(k8sClient.Create(ctx, cp)).To(Succeed())
	err := install.Cleanup(ctx, k8sClient, false, 2*time.Second)
	g.Expect(err).To(MatchError(ContainSubstring("is it running?")))

	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(cp), cp)).To(Succeed())
	base := cp.DeepCopy()
	cp.Finalizers = nil
	g.Expect(k8sClient.Patch(ctx, cp, client.MergeFrom(base))).To(Succeed())
}
