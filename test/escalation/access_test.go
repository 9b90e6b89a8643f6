package escalation

import (
	"context"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// testPolicy is the policy the operands are rendered from, mutated.
func testPolicy(mutate func(*gpuv1.ClusterPolicy)) *gpuv1.ClusterPolicy {
	cp := &gpuv1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "cluster-policy", UID: "11111111-2222-3333-4444-555555555555"}}
	mutate(cp)
	return cp
}

// applyAccess applies what the operator and the install grant an operand:
// the RBAC and admission policies the operator renders for it (its
// ClusterRoleBindings included), and the ClusterRoles the install ships
// for it (clusterRules, by ServiceAccount).
func applyAccess(t *testing.T, ctx context.Context, operand state.Operand, cp *gpuv1.ClusterPolicy,
	clusterRules map[string][]rbacv1.PolicyRule) {
	t.Helper()
	g := NewWithT(t)
	applyNamespaces(t, ctx)
	objs, err := operand.Render(state.RenderInput{Policy: cp, Namespace: namespace, DRAInUse: true, BindsOperandClusterRoles: true})
	g.Expect(err).NotTo(HaveOccurred())
	kinds := append(slices.Clone(render.RBACKinds), render.KindValidatingAdmissionPolicy, render.KindValidatingAdmissionPolicyBinding)
	for _, o := range objs {
		if !slices.Contains(kinds, o.GetObjectKind().GroupVersionKind()) {
			continue
		}
		o.SetOwnerReferences(nil) // no ClusterPolicy here to own them
		g.Expect(client.IgnoreAlreadyExists(admin.Create(ctx, o))).To(Succeed(), "%T %s", o, o.GetName())
	}
	for sa, rules := range clusterRules {
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: render.OperandClusterRoleName(namespace, sa)}, Rules: rules}
		g.Expect(client.IgnoreAlreadyExists(admin.Create(ctx, role))).To(Succeed())
	}
}
