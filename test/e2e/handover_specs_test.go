//go:build e2e

package e2e

import (
	"context"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
)

// successorName is the ClusterPolicy HandOverSpec hands over to, and back.
const successorName = "cluster-policy-successor"

// HandOverSpec deletes the active ClusterPolicy while a second one with
// the same spec exists. The successor must adopt every operand object
// before the first lets go: with the garbage collector running, an object
// still owned by the deleted policy alone is deleted, and every driver
// with it (issue 12, finding 2). No operand pod may be replaced. Then the
// same back: helm upgrade makes the chart's policy again, the successor
// is deleted, and the chart's policy takes over.
func HandOverSpec(ctx context.Context, nodes []string) {
	before := operandPods(ctx, nodes)
	var active *gpuv1.ClusterPolicy
	Eventually(func(g Gomega) { active = policy(g, ctx) }).Should(Succeed())
	successor := handOver(ctx, nodes, active, func() {
		successor := &gpuv1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: successorName}, Spec: *active.Spec.DeepCopy()}
		Expect(k8s.Create(ctx, successor)).To(Succeed())
	}, successorName)
	// helm upgrade makes the policy the release holds again, as it makes
	// any object of it that is missing.
	handOver(ctx, nodes, successor, func() { helmUpgrade("--reuse-values") }, active.Name)
	Expect(operandPods(ctx, nodes)).To(Equal(before), "no operand pod was replaced, there and back")
}

// handOver makes the next policy with create, waits until it is ignored,
// deletes the active one, and checks that the next one took every operand
// over without replacing any pod. It returns the next policy.
func handOver(ctx context.Context, nodes []string, active *gpuv1.ClusterPolicy, create func(), next string) *gpuv1.ClusterPolicy {
	before := operandPods(ctx, nodes)
	Expect(before).NotTo(BeEmpty())
	create()
	successor := &gpuv1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: next}}
	// The successor is the younger: ignored while the first is active.
	Eventually(func(g Gomega) gpuv1.PolicyState {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(successor), successor)).To(Succeed())
		return successor.Status.State
	}).WithTimeout(time.Minute).Should(Equal(gpuv1.PolicyIgnored))

	Expect(k8s.Delete(ctx, active)).To(Succeed())
	Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(active), &gpuv1.ClusterPolicy{}))
	}).WithTimeout(time.Minute).Should(BeTrue())
	// Nothing the garbage collector could delete: no object names the
	// deleted policy as an owner, each names the successor.
	sets := &appsv1.DaemonSetList{}
	Expect(k8s.List(ctx, sets, client.MatchingLabels{render.LabelManagedBy: render.ManagedBy})).To(Succeed())
	Expect(sets.Items).NotTo(BeEmpty())
	for _, ds := range sets.Items {
		Expect(ds.OwnerReferences).To(ConsistOf(HaveField("UID", successor.UID)), "DaemonSet %s", ds.Name)
	}
	Expect(operandPods(ctx, nodes)).To(Equal(before), "no operand pod was replaced")
	// The successor reports the fleet as the first did.
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(successor), successor)).To(Succeed())
		g.Expect(successor.Status.State).To(Equal(active.Status.State))
		g.Expect(successor.Status.ReadyNodes).To(Equal(active.Status.ReadyNodes))
	}).WithTimeout(time.Minute).Should(Succeed())
	return successor
}

// operandPods maps each live operand pod on the nodes to its UID.
func operandPods(ctx context.Context, nodes []string) map[string]types.UID {
	on := map[string]bool{}
	for _, n := range nodes {
		on[n] = true
	}
	pods := &corev1.PodList{}
	Expect(k8s.List(ctx, pods, client.InNamespace("gpu-operator"), client.HasLabels{render.LabelState})).To(Succeed())
	out := map[string]types.UID{}
	for _, p := range pods.Items {
		if on[p.Spec.NodeName] && p.DeletionTimestamp == nil {
			out[p.Name] = p.UID
		}
	}
	return out
}
