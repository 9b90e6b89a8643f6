package packaging

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/install"
)

// What the setup hook runs: the ClusterPolicy CRD is applied (again, here:
// envtest installed it already), and so are the DRA driver's ComputeDomain
// CRDs, which helm's crds/ would never upgrade; NFD's CRDs, which envtest
// created as another installer would, are left as they are; the namespace
// is labelled only when asked (issue 13, items 1 and 2).
func TestSetupHook(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	opts := install.Options{Namespace: "gpu-operator", NFDCRDs: true, Timeout: 30 * time.Second}
	before := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "nodefeatures.nfd.k8s-sigs.io"}, before)).To(Succeed())

	rep, err := install.Setup(ctx, k8sClient, opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rep.Applied).To(Equal([]string{"clusterpolicies.nvidia.com", "gpuclusters.nvidia.com", "nvidiadrivers.nvidia.com",
		"computedomaincliques.resource.nvidia.com", "computedomains.resource.nvidia.com"}))
	cd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "computedomains.resource.nvidia.com"}, cd)).To(Succeed())
	g.Expect(cd.Labels).To(HaveKeyWithValue(install.LabelInstalledBy, Not(BeEmpty())), "marked as setup's, for upgrades and uninstall")
	g.Expect(rep.LeftAlone).To(ConsistOf("nodefeatures.nfd.k8s-sigs.io", "nodefeaturerules.nfd.k8s-sigs.io", "nodefeaturegroups.nfd.k8s-sigs.io"))
	after := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "nodefeatures.nfd.k8s-sigs.io"}, after)).To(Succeed())
	g.Expect(after.ResourceVersion).To(Equal(before.ResourceVersion), "another installer's NFD CRD is not written")
	ns := &corev1.Namespace{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "gpu-operator"}, ns)).To(Succeed())
	g.Expect(ns.Labels).NotTo(HaveKey("pod-security.kubernetes.io/enforce"), "psa.enabled is off by default")

	opts.PodSecurity = true
	rep, err = install.Setup(ctx, k8sClient, opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rep.Labelled).To(BeTrue())
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "gpu-operator"}, ns)).To(Succeed())
	g.Expect(ns.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "privileged"))
	// Running it twice is fine: hooks run on every upgrade.
	_, err = install.Setup(ctx, k8sClient, opts)
	g.Expect(err).NotTo(HaveOccurred())

	opts.Namespace = "kube-system"
	_, err = install.Setup(ctx, k8sClient, opts)
	g.Expect(err).To(MatchError(ContainSubstring("refusing to label namespace kube-system privileged")))
}

// What the cleanup hook runs: every ClusterPolicy is deleted, and it
// returns once they are gone.
func TestCleanupHook(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	for _, name := range []string{"a", "b"} {
		g.Expect(k8sClient.Create(ctx, &gpuv1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
	}
	ran, err := install.Cleanup(ctx, k8sClient, install.CleanupOptions{Timeout: 30 * time.Second})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ran).To(BeTrue())
	list := &gpuv1.ClusterPolicyList{}
	g.Expect(k8sClient.List(ctx, list)).To(Succeed())
	g.Expect(list.Items).To(BeEmpty())
}

// The cleanup Job applied without helm (helm template | kubectl apply)
// finds the "-done" ConfigMap that came with it and deletes nothing
// (issue 13, item 3).
func TestCleanupHookAppliedWithoutHelmDeletesNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cp := &gpuv1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}
	g.Expect(k8sClient.Create(ctx, cp)).To(Succeed())
	done := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "gpu-operator-cleanup-done", Namespace: "gpu-operator"}}
	g.Expect(k8sClient.Create(ctx, done)).To(Succeed())
	defer func() {
		_ = k8sClient.Delete(ctx, done)
		_ = k8sClient.Delete(ctx, cp)
	}()
	ran, err := install.Cleanup(ctx, k8sClient, install.CleanupOptions{Timeout: 10 * time.Second,
		Namespace: "gpu-operator", SkipIfExists: done.Name, Recheck: 10 * time.Millisecond})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ran).To(BeFalse())
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(cp), cp)).To(Succeed())
	g.Expect(cp.DeletionTimestamp).To(BeNil(), "the ClusterPolicy is kept")
}

// A ClusterPolicy whose finalizer nobody removes (no operator running)
// makes cleanup fail with a message that says what to check.
func TestCleanupHookWithoutOperator(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cp := &gpuv1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "stuck", Finalizers: []string{"nvidia.com/gpu-operator-cleanup"}}}
	g.Expect(k8sClient.Create(ctx, cp)).To(Succeed())
	_, err := install.Cleanup(ctx, k8sClient, install.CleanupOptions{Timeout: 2 * time.Second})
	g.Expect(err).To(MatchError(ContainSubstring("is it running?")))

	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(cp), cp)).To(Succeed())
	base := cp.DeepCopy()
	cp.Finalizers = nil
	g.Expect(k8sClient.Patch(ctx, cp, client.MergeFrom(base))).To(Succeed())
}
