package render

import (
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// ServiceAccount is an operand's own ServiceAccount. Its token is not
// mounted unless the operand's pod spec asks for it.
func ServiceAccount(policy *gpuv1.ClusterPolicy, name, namespace, state string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{
		TypeMeta:                     TypeMeta("v1", "ServiceAccount"),
		ObjectMeta:                   ObjectMeta(policy, name, namespace, state),
		AutomountServiceAccountToken: ptr.To(false),
	}
}

// Access is the API access an operand's ServiceAccount gets: in the
// operator namespace, from a Role of the same name bound to it, and
// cluster-wide, where BindClusterRole says so, from the operand's
// ClusterRole that the install ships.
type Access struct {
	Policy    *gpuv1.ClusterPolicy
	Name      string
	Namespace string
	State     string
	Rules     []rbacv1.PolicyRule
	// BindClusterRole binds the ServiceAccount to OperandClusterRoleName
	// with a ClusterRoleBinding of the operator's, rendered with the
	// operand and pruned with it: while the operand is off, no token holds
	// its cluster-wide rules, even one minted for a ServiceAccount of the
	// same name that someone else creates.
	BindClusterRole bool
}

// Objects returns the ServiceAccount, the Role and RoleBinding when there
// are rules, and the ClusterRoleBinding when BindClusterRole is set.
func (a Access) Objects() []client.Object {
	objs := []client.Object{ServiceAccount(a.Policy, a.Name, a.Namespace, a.State)}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: a.Name, Namespace: a.Namespace}}
	if len(a.Rules) > 0 {
		objs = append(objs,
			&rbacv1.Role{TypeMeta: TypeMeta("rbac.authorization.k8s.io/v1", "Role"),
				ObjectMeta: ObjectMeta(a.Policy, a.Name, a.Namespace, a.State), Rules: a.Rules},
			&rbacv1.RoleBinding{TypeMeta: TypeMeta("rbac.authorization.k8s.io/v1", "RoleBinding"),
				ObjectMeta: ObjectMeta(a.Policy, a.Name, a.Namespace, a.State), Subjects: subject,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: a.Name}})
	}
	if a.BindClusterRole {
		// Labelled after the ServiceAccount: a label value holds no ':'.
		meta := ObjectMeta(a.Policy, a.Name, "", a.State)
		meta.Name = OperandClusterRoleBindingName(a.Namespace, a.Name)
		objs = append(objs, &rbacv1.ClusterRoleBinding{TypeMeta: TypeMeta("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
			ObjectMeta: meta, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: OperandClusterRoleName(a.Namespace, a.Name)}})
	}
	return objs
}

// OperandClusterRoleName names the ClusterRole an install ships for an
// operand's ServiceAccount: the operator's namespace first, so that two
// installs do not share one.
func OperandClusterRoleName(namespace, serviceAccount string) string {
	return namespace + ":" + serviceAccount
}

// OperandClusterRoleBindingName names the operator's binding of that
// role. It is not the role's name, which the bindings the chart shipped
// before carry: helm deletes those after an upgrade starts the operator
// that renders these, and would delete a binding of the same name with
// them.
func OperandClusterRoleBindingName(namespace, serviceAccount string) string {
	return OperandClusterRoleName(namespace, serviceAccount) + "-binding"
}
