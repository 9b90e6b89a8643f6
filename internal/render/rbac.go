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

// Access is the API access an operand's ServiceAccount gets: namespaced
// rules in the operator namespace and cluster-wide rules, each bound to the
// ServiceAccount of the same name.
type Access struct {
	Policy    *gpuv1.ClusterPolicy
	Name      string
	Namespace string
	State     string
	Rules     []rbacv1.PolicyRule // namespaced, in Namespace
	Cluster   []rbacv1.PolicyRule // cluster-wide
}

// Objects returns the ServiceAccount and the Roles and bindings the access
// needs; a kind of rule that is empty gets no Role.
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
	if len(a.Cluster) > 0 {
		// Cluster-wide names carry the namespace, so that two installs in
		// different namespaces do not fight over them.
		name := a.Namespace + "-" + a.Name
		objs = append(objs,
			&rbacv1.ClusterRole{TypeMeta: TypeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"),
				ObjectMeta: ObjectMeta(a.Policy, name, "", a.State), Rules: a.Cluster},
			&rbacv1.ClusterRoleBinding{TypeMeta: TypeMeta("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
				ObjectMeta: ObjectMeta(a.Policy, name, "", a.State), Subjects: subject,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}})
	}
	return objs
}
