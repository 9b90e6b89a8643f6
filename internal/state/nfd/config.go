package nfd

import (
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
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

// masterConfig lets GFD's nvidia.com labels through nfd-master.
const masterConfig = `extraLabelNs: ["nvidia.com"]
`

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

// The operator can only grant what it holds, so it holds NFD's rules too.
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch;update
// +kubebuilder:rbac:groups="",resources=nodes/status,verbs=patch;update
// +kubebuilder:rbac:groups=nfd.k8s-sigs.io,resources=nodefeatures;nodefeaturerules;nodefeaturegroups,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=nfd.k8s-sigs.io,resources=nodefeaturegroups/status,verbs=patch;update
// +kubebuilder:rbac:groups=topology.node.k8s.io,resources=noderesourcetopologies,verbs=list;delete
// +kubebuilder:rbac:groups="",namespace=gpu-operator,resources=pods,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=gpu-operator,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",namespace=gpu-operator,resources=serviceaccounts;configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,namespace=gpu-operator,resources=roles;rolebindings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles;clusterrolebindings,verbs=get;list;watch;create;update;patch;delete

// access is what each NFD component may do.
func access(in state.RenderInput) []render.Access {
	a := func(name string, ns, cluster []rbacv1.PolicyRule) render.Access {
		return render.Access{Policy: in.Policy, Name: name, Namespace: in.Namespace,
			State: string(state.NodeFeatureDiscovery), Rules: ns, Cluster: cluster}
	}
	return []render.Access{
		a(MasterName,
			[]rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create", "get", "update"}}},
			[]rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch", "patch", "update"}},
				{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch", "update"}},
				{APIGroups: []string{nfdGroup}, Resources: []string{"nodefeatures", "nodefeaturerules", "nodefeaturegroups"}, Verbs: []string{"get", "list", "watch"}},
				{APIGroups: []string{nfdGroup}, Resources: []string{"nodefeaturegroups/status"}, Verbs: []string{"patch", "update"}},
			}),
		a(WorkerName,
			[]rbacv1.PolicyRule{
				{APIGroups: []string{nfdGroup}, Resources: []string{"nodefeatures"}, Verbs: []string{"create", "get", "update"}},
				{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
			}, nil),
		a(GCName, nil,
			[]rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list", "watch"}},
				{APIGroups: []string{nfdGroup}, Resources: []string{"nodefeatures"}, Verbs: []string{"list", "delete"}},
				{APIGroups: []string{"topology.node.k8s.io"}, Resources: []string{"noderesourcetopologies"}, Verbs: []string{"list", "delete"}},
			}),
	}
}
