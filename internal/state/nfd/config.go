package nfd

import (
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/gfd"
)

// workerConfig makes nfd-worker label NVIDIA devices by vendor alone, so
// that every NVIDIA GPU node gets feature.node.kubernetes.io/pci-10de.present
// whatever its PCI class (3D controller 0302 or VGA 0300). The system source
// adds the OS labels (system-os_release.ID, VERSION_ID) the driver pools use.
const workerConfig = `sources:
  pci:
    deviceClassWhitelist: ["02", "0200", "0207", "0300", "0302"]
    deviceLabelFields: ["vendor"]
`

// LabelWhiteList is every label name (the part after the prefix, which is
// what nfd-master v0.19.0 matches: pkg/nfd-master/nfd-master.go:536-551)
// nfd-master may set: NFD's own feature labels, and the labels GFD v0.20.0
// writes (k8s-device-plugin internal/lm), with MIG profiles in the mixed
// strategy's keys. nfd-master denies only kubernetes.io prefixes by
// itself, so without it any file in a node's features.d, or any
// NodeFeature, could set the nvidia.com labels the operator gates on
// (gpu.deploy.*, gpu.state.*, gpu-operator.*), on any node.
const LabelWhiteList = `^(` +
	// NFD's sources, and the rdma labels of its custom source.
	`(cpu|kernel|memory|network|pci|storage|system|usb)-.+|rdma\.(capable|available)` +
	`|` + gfd.LabelNames + `)$`

// masterConfig admits only LabelWhiteList's names, and no labels from
// NodeFeature objects other than nfd-worker's own (where GFD's labels
// arrive, read from features.d): another namespace's NodeFeature cannot
// label nodes (v0.19.0 pkg/nfd-master/nfd-master.go:676-690, 709-711).
var masterConfig = "labelWhiteList: '" + LabelWhiteList + "'\n" +
	"restrictions:\n  denyNodeFeatureLabels: true\n"

func configMaps(in state.RenderInput) []client.Object {
	cm := func(name, key, data string) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			TypeMeta:   render.TypeMeta("v1", "ConfigMap"),
			ObjectMeta: render.ObjectMeta(in.Policy, name, in.Namespace, string(state.NodeFeatureDiscovery)),
			Data:       map[string]string{key: data},
		}
	}
	return []client.Object{
		cm(WorkerName+"-conf", "nfd-worker.conf", workerConfig),
		cm(MasterName+"-conf", "nfd-master.conf", masterConfig),
	}
}

const nfdGroup = "nfd.k8s-sigs.io"

// masterLease is the Lease nfd-master elects its leader with
// (node-feature-discovery v0.19.0 pkg/nfd-master/nfd-master.go:1494); its Role
// may read and renew that one and no other, such as the operator's own.
const masterLease = "nfd-master.nfd.kubernetes.io"

// The operator holds what it grants in its namespace: Kubernetes refuses a
// Role with rules its creator lacks (hence update on leases and
// NodeFeatures, which it never calls itself: it writes by server-side
// apply, a patch). The cluster-wide rules below are not
// the operator's to grant: the install ships them (ClusterRules), so the
// operator needs no write access to ClusterRoles, ClusterRoleBindings or
// NFD's cluster-wide objects.
// +kubebuilder:rbac:groups="",namespace=gpu-operator,resources=pods,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=gpu-operator,resources=leases,verbs=get;create;update
// +kubebuilder:rbac:groups=nfd.k8s-sigs.io,namespace=gpu-operator,resources=nodefeatures,verbs=get;create;update;delete
// +kubebuilder:rbac:groups="",namespace=gpu-operator,resources=serviceaccounts;configmaps,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,namespace=gpu-operator,resources=roles;rolebindings,verbs=get;list;watch;create;patch;delete

// access is what each NFD component may do in the operator's namespace;
// the operator renders these Roles. A component with cluster-wide rules
// (ClusterRules) is bound to the install's ClusterRole by the operator,
// while NFD runs (OLM binds them itself).
func access(in state.RenderInput) []render.Access {
	cluster := ClusterRules()
	a := func(name string, rules ...rbacv1.PolicyRule) render.Access {
		_, bind := cluster[name]
		return render.Access{Policy: in.Policy, Name: name, Namespace: in.Namespace,
			State: string(state.NodeFeatureDiscovery), Rules: rules, BindClusterRole: bind && in.BindsOperandClusterRoles}
	}
	return []render.Access{
		a(MasterName,
			rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
			rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
				ResourceNames: []string{masterLease}, Verbs: []string{"get", "update"}}),
		a(WorkerName,
			rbacv1.PolicyRule{APIGroups: []string{nfdGroup}, Resources: []string{"nodefeatures"}, Verbs: []string{"create", "get", "update", "delete"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}),
		a(GCName),
	}
}

// ClusterRules are the cluster-wide rules of NFD's components, by
// ServiceAccount name: nfd-master labels nodes from the NodeFeatures
// workers report, nfd-gc deletes the NodeFeatures of deleted nodes. The
// chart, kustomize config and OLM bundle ship them as ClusterRoles named
// render.OperandClusterRoleName (make manifests); the operator binds them
// while NFD runs, OLM at install.
func ClusterRules() map[string][]rbacv1.PolicyRule {
	return map[string][]rbacv1.PolicyRule{
		MasterName: {
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "patch", "update"}},
			{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch", "update"}},
			{APIGroups: []string{nfdGroup}, Resources: []string{"nodefeatures", "nodefeaturerules", "nodefeaturegroups"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{nfdGroup}, Resources: []string{"nodefeaturegroups/status"}, Verbs: []string{"patch", "update"}},
		},
		GCName: {
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{nfdGroup}, Resources: []string{"nodefeatures"}, Verbs: []string{"list", "delete"}},
			{APIGroups: []string{"topology.node.k8s.io"}, Resources: []string{"noderesourcetopologies"}, Verbs: []string{"list", "delete"}},
		},
	}
}
