package escalation

import (
	"context"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
	"github.com/gpu-operator/gpu-operator/internal/test/operatorrbac"
)

// The operator binds each operand's ClusterRole while the operand runs
// (issue 56: no DRA binding while DRA is off). Its bind rule names exactly
// the ClusterRoles the install ships for the operands, and the API server
// lets it bind those, and refuses it a binding of any other role whose
// rules it does not hold: cluster-admin, or a role someone made to look
// like an operand's.
func TestOperatorBindsOnlyTheOperandClusterRoles(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	rules, _, err := operatorrbac.Rules()
	g.Expect(err).NotTo(HaveOccurred())
	role := &rbacv1.ClusterRole{Rules: rules}
	var bindable []string
	for _, r := range role.Rules {
		if slices.Contains(r.Verbs, "bind") || slices.Contains(r.Verbs, "escalate") || slices.Contains(r.Verbs, "*") {
			g.Expect(r.Resources).To(Equal([]string{"clusterroles"}), "bind or escalate on anything but the operands' ClusterRoles")
			g.Expect(r.Verbs).To(Equal([]string{"bind"}))
			g.Expect(r.ResourceNames).NotTo(BeEmpty(), "bind on every ClusterRole is cluster-admin")
			bindable = append(bindable, r.ResourceNames...)
		}
	}
	var operands []string
	for sa := range registry.ClusterRules() {
		operands = append(operands, render.OperandClusterRoleName(namespace, sa))
	}
	g.Expect(bindable).To(ConsistOf(operands), "the bind rule's names are the operands' ClusterRoles, every one")
	var bindings, changeable []string
	for sa := range registry.ClusterRules() {
		bindings = append(bindings, render.OperandClusterRoleBindingName(namespace, sa))
	}
	for _, r := range role.Rules {
		if !slices.Contains(r.Resources, "clusterrolebindings") {
			continue
		}
		for _, v := range []string{"get", "patch", "update", "delete", "deletecollection", "*"} {
			if slices.Contains(r.Verbs, v) {
				g.Expect(r.ResourceNames).NotTo(BeEmpty(), "%s on every ClusterRoleBinding", v)
			}
		}
		if slices.Contains(r.Verbs, "patch") {
			changeable = append(changeable, r.ResourceNames...)
		}
	}
	g.Expect(changeable).To(ConsistOf(bindings), "it changes its own bindings of the operands' roles only")

	// The install: the operator's ClusterRole bound to its
	// ServiceAccount, and the operands' ClusterRoles, unbound.
	applyNamespaces(t, ctx)
	operatorRole := installOperatorRole(t, ctx)
	for sa, rules := range registry.ClusterRules() {
		g.Expect(client.IgnoreAlreadyExists(admin.Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: render.OperandClusterRoleName(namespace, sa)}, Rules: rules}))).To(Succeed())
	}
	operator := impersonate(t, namespace, "gpu-operator", "gpu-operator-5d4f8", "control-plane-1")
	cp := &gpuv1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "cluster-policy", UID: "11111111-2222-3333-4444-555555555555"}}
	for sa := range registry.ClusterRules() {
		for _, o := range (render.Access{Policy: cp, Name: sa, Namespace: namespace, BindClusterRole: true}).Objects() {
			b, ok := o.(*rbacv1.ClusterRoleBinding)
			if !ok {
				continue
			}
			b.OwnerReferences = nil // no ClusterPolicy here to own it
			b.Name += "-dry-run"    // the DRA tests' applied bindings hold the name
			g.Expect(operator.Create(ctx, b, client.DryRunAll)).To(Succeed(), "the operator binds %s", b.RoleRef.Name)
		}
	}

	// Someone else's binding, its own binding to the operator's role
	// here, it may neither change nor delete.
	other := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: operatorRole}}
	g.Expect(apierrors.IsForbidden(operator.Delete(ctx, other, client.DryRunAll))).To(BeTrue(), "deleting another ClusterRoleBinding")
	g.Expect(apierrors.IsForbidden(operator.Patch(ctx, other, client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"x":"y"}}}`)), client.DryRunAll))).To(BeTrue(), "patching another ClusterRoleBinding")

	// A ClusterRole whose rules the operator does not hold: one of an
	// operand's name in another install's namespace, and cluster-admin.
	g.Expect(client.IgnoreAlreadyExists(admin.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "other-namespace:nfd-master"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list"}}}}))).To(Succeed())
	for _, other := range []string{"cluster-admin", "other-namespace:nfd-master"} {
		err := operator.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "stolen-" + strings.ReplaceAll(other, ":", "-")},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "nfd-master", Namespace: namespace}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: other}}, client.DryRunAll)
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "binding %s: %v", other, err)
	}
}
