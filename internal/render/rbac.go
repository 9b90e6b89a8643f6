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

// Access is the API access an operand's ServiceAccount gets in the
// operator namespace, from a Role of the same name bound to it.
type Access struct {
	Policy    *gpuv1.ClusterPolicy
	Name      string
	Namespace string
	State     string
	Rules     []rbacv1.PolicyRule
}

// Objects returns the ServiceAccount, and the Role and RoleBinding when
// there are rules.
func (a Access) Objects() []client.Object {
	objs := []client.Object{ServiceAccount(a.Policy, a.Name, a.Namespace, a.State)}
	if len(a.Rules) == 0 {
		return objs
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: a.Name, Namespace: a.Namespace}}
	return append(objs,
		&rbacv1.Role{TypeMeta: TypeMeta("rbac.authorization.k8s.io/v1", "Role"),
			ObjectMeta: ObjectMeta(a.Policy, a.Name, a.Namespace, a.State), Rules: a.Rules},
		&rbacv1.RoleBinding{TypeMeta: TypeMeta("rbac.authorization.k8s.io/v1", "RoleBinding"),
			ObjectMeta: ObjectMeta(a.Policy, a.Name, a.Namespace, a.State), Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: a.Name}})
}
