package render

import "k8s.io/apimachinery/pkg/runtime/schema"

// Kinds of the objects operands render.
var (
	KindServiceAccount = schema.GroupVersionKind{Version: "v1", Kind: "ServiceAccount"}
	KindConfigMap      = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	KindService        = schema.GroupVersionKind{Version: "v1", Kind: "Service"}
	KindDaemonSet      = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"}
	KindDeployment     = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	KindRole           = schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"}
	KindRoleBinding    = schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"}

	KindClusterRoleBinding = schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"}
	KindRuntimeClass       = schema.GroupVersionKind{Group: "node.k8s.io", Version: "v1", Kind: "RuntimeClass"}
	KindServiceMonitor     = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}
	KindDeviceClass        = schema.GroupVersionKind{Group: "resource.k8s.io", Version: "v1", Kind: "DeviceClass"}
	KindPriorityClass      = schema.GroupVersionKind{Group: "scheduling.k8s.io", Version: "v1", Kind: "PriorityClass"}

	KindResourceClaimTemplate = schema.GroupVersionKind{Group: "resource.k8s.io", Version: "v1", Kind: "ResourceClaimTemplate"}

	KindValidatingAdmissionPolicy        = schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicy"}
	KindValidatingAdmissionPolicyBinding = schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicyBinding"}
)

// RBACKinds are the kinds of an Access.
var RBACKinds = []schema.GroupVersionKind{KindServiceAccount, KindRole, KindRoleBinding, KindClusterRoleBinding}
