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
	"github.com/gpu-operator/gpu-operator/internal/test/operatorrbac"
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

// installOperatorRole binds the operator's ClusterRole, as role.yaml has
// it, to its ServiceAccount, as the install does; it returns the role's
// name, which its binding has too.
func installOperatorRole(t *testing.T, ctx context.Context) string {
	t.Helper()
	g := NewWithT(t)
	rules, _, err := operatorrbac.Rules()
	g.Expect(err).NotTo(HaveOccurred())
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "escalation-test:gpu-operator"}, Rules: rules}
	g.Expect(client.IgnoreAlreadyExists(admin.Create(ctx, role))).To(Succeed())
	g.Expect(client.IgnoreAlreadyExists(admin.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "gpu-operator", Namespace: namespace}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}}))).To(Succeed())
	return role.Name
}
