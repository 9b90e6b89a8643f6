package policy

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state/nfd"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
)

// A RuntimeClass of the name GPU pods use that someone else made first (an
// administrator's; k3s ships an nvidia one) is used as it is when its
// handler is the toolkit's: never labelled, adopted or deleted. One with
// another handler is left as well, and the policy says what to change.
func TestSomeoneElsesRuntimeClassIsLeftAlone(t *testing.T) {
	g := NewWithT(t)
	tctx := t.Context()
	matching := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "k3s-nvidia"}, Handler: "k3s-nvidia"}
	wrong := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu-runc"}, Handler: "runc"}
	for _, rc := range []*nodev1.RuntimeClass{matching, wrong} {
		g.Expect(suite.Client.Create(tctx, rc)).To(Succeed())
		t.Cleanup(func() { g.Expect(client.IgnoreNotFound(suite.Client.Delete(context.Background(), rc))).To(Succeed()) })
	}
	untouched := func(name, handler string) {
		rc := &nodev1.RuntimeClass{}
		g.Expect(suite.Client.Get(tctx, client.ObjectKey{Name: name}, rc)).To(Succeed(), "%s was deleted", name)
		g.Expect(rc.Handler).To(Equal(handler))
		g.Expect(rc.Labels).To(BeEmpty(), "%s was labelled", name)
		g.Expect(rc.OwnerReferences).To(BeEmpty(), "%s was adopted", name)
		g.Expect(rc.ManagedFields).To(HaveEach(HaveField("Manager", Not(Equal("gpu-operator")))), "%s was written", name)
	}

	f := suite.Setup(t, 1, func(cp *gpuv1.ClusterPolicy) { cp.Spec.Operator.RuntimeClass = "k3s-nvidia" })
	f.ExpectAllReady(f.Nodes...)
	g.Expect(*f.PodOn(f.Nodes[0], "device-plugin").Spec.RuntimeClassName).To(Equal("k3s-nvidia"))
	f.Reconciled()
	untouched("k3s-nvidia", "k3s-nvidia")

	f.UpdatePolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.Operator.RuntimeClass = "gpu-runc" })
	g.Eventually(func() string {
		cp := &gpuv1.ClusterPolicy{}
		g.Expect(suite.Client.Get(tctx, client.ObjectKeyFromObject(f.Policy), cp)).To(Succeed())
		if c := meta.FindStatusCondition(cp.Status.Conditions, gpuv1.ConditionDegraded); c != nil {
			return c.Message
		}
		return ""
	}, controllertest.Timeout, controllertest.Interval).Should(And(ContainSubstring(`RuntimeClass gpu-runc exists, not created by the operator, with handler "runc"`),
		ContainSubstring("set spec.operator.runtimeClass to another name")))
	untouched("gpu-runc", "runc")

	g.Expect(suite.Client.Delete(tctx, f.Policy)).To(Succeed())
	g.Eventually(f.Policies, controllertest.Timeout, controllertest.Interval).Should(BeEmpty())
	untouched("k3s-nvidia", "k3s-nvidia")
	untouched("gpu-runc", "runc")
}

// OLM creates the ServiceAccounts its CSV grants cluster roles to (nfd-master
// and nfd-gc) before the operator runs: the operator uses them as they are
// and its NFD comes up, instead of failing on an object it did not make.
func TestServiceAccountsMadeByTheInstallAreUsed(t *testing.T) {
	g := NewWithT(t)
	olmMade := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: nfd.GCName, Namespace: controllertest.Namespace,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "operators.coreos.com/v1alpha1", Kind: "ClusterServiceVersion",
			Name: "gpu-operator.v0.1.0", UID: "csv-uid"}}}}
	// A previous test's ServiceAccount of that name may still be going.
	g.Eventually(func() error { return suite.Client.Create(context.Background(), olmMade) }, controllertest.Timeout, controllertest.Interval).Should(Succeed())
	t.Cleanup(func() {
		g.Expect(client.IgnoreNotFound(suite.Client.Delete(context.Background(), olmMade))).To(Succeed())
	})

	f := suite.Setup(t, 1)
	f.ExpectAllReady(f.Nodes...)
	f.Reconciled()
	cp := &gpuv1.ClusterPolicy{}
	g.Expect(suite.Client.Get(context.Background(), client.ObjectKeyFromObject(f.Policy), cp)).To(Succeed())
	g.Expect(meta.IsStatusConditionTrue(cp.Status.Conditions, gpuv1.ConditionDegraded)).To(BeFalse(),
		"%v", meta.FindStatusCondition(cp.Status.Conditions, gpuv1.ConditionDegraded))
	sa := &corev1.ServiceAccount{}
	g.Expect(suite.Client.Get(context.Background(), client.ObjectKeyFromObject(olmMade), sa)).To(Succeed())
	g.Expect(sa.Labels).To(BeEmpty(), "the install's ServiceAccount is not adopted")
	g.Expect(sa.OwnerReferences).To(HaveLen(1))
}
