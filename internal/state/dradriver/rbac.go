package dradriver

import (
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// The driver's access is NVIDIA's, rule for rule and in NVIDIA's order
// (gpu-operator v26.7.0, manifests/state-dra-driver/0110-0200), so that a
// person comparing the two installs finds the same grants, but for where
// ours is narrower on purpose:
//   - pods: NVIDIA's ClusterRoles grant each component pods in every
//     namespace, while each reads them only in the driver's own (read at
//     dra-driver-nvidia-gpu 22407113, the newest commit the mirror has;
//     the pinned 95932046 is not in it): the kubelet plugin lists its MPS
//     control daemons' pods (cmd/gpu-kubelet-plugin/sharing.go:352), the
//     controller's informer watches the IMEX daemons' pods
//     (cmd/compute-domain-controller/daemonsetpods.go:55-63, 110), and the
//     daemon watches and patches its own pod
//     (cmd/compute-domain-daemon/podmanager.go:48-55, main.go:551). Their
//     pods rules are Roles in the driver's namespace here, so a token read
//     on a GPU node reaches no pod elsewhere (issue 56, finding 1);
//   - NVIDIA's 0150 Role (apps daemonsets list, for the kubelet plugin's
//     driver-validation init container) is not rendered: the plugin's pod
//     here has no validator.
//
// The operator renders the namespaced part, and binds the cluster-wide part
// (ClusterRules), which the install ships as ClusterRoles, while the
// driver runs: no DRA binding exists while DRA is off (issue 56).

// mpsRoleName names the Role the kubelet plugin runs MPS control daemons
// with, NVIDIA's name (0140_kubeletplugin-mps-role.yaml L5, L24).
const mpsRoleName = KubeletPluginServiceAccount + "-mps"

// access returns the driver's ServiceAccounts with the Roles and
// RoleBindings NVIDIA grants them in the operator's namespace:
//   - the kubelet plugin's ServiceAccount, always (0100 L1-8); with
//     compute domains, a Role of its name to read ComputeDomainCliques
//     (0130 L2-27); with the MPSSupport gate, the -mps Role (0140 L2-33);
//   - with compute domains, the controller's ServiceAccount, Role and
//     RoleBinding (0110 L2-9, L68-94, L109-121) and the IMEX daemons'
//     ServiceAccount (0120 L2-9), whose access is cluster-wide only.
func access(in state.RenderInput, d *gpuv1.DRADriverSpec) []client.Object {
	named := func(name string, rules []rbacv1.PolicyRule) render.Access {
		return render.Access{Policy: in.Policy, Name: name, Namespace: in.Namespace,
			State: string(state.DRADriver), Rules: rules, BindClusterRole: in.BindsOperandClusterRoles}
	}
	var pluginRules []rbacv1.PolicyRule
	if d.ComputeDomainsEnabled() {
		pluginRules = kubeletPluginComputeDomainRules()
	}
	objs := named(KubeletPluginServiceAccount, append(pluginRules, podRules[KubeletPluginServiceAccount])).Objects()
	if d.FeatureGate("MPSSupport") {
		objs = append(objs, boundRole(in, mpsRoleName, KubeletPluginServiceAccount, kubeletPluginMPSRules())...)
	}
	if !d.ComputeDomainsEnabled() {
		return objs
	}
	objs = append(objs, named(ControllerName, append(controllerNamespaceRules(), podRules[ControllerName])).Objects()...)
	objs = append(objs, computeDomainDaemonServiceAccount(in)...)
	return append(objs, boundRole(in, ComputeDomainDaemonServiceAccount, ComputeDomainDaemonServiceAccount,
		[]rbacv1.PolicyRule{podRules[ComputeDomainDaemonServiceAccount]})...)
}

// podRules are, by ServiceAccount, the pods rule of each NVIDIA
// ClusterRole (0200 L1-50, 0110 L11-66, 0120 L11-46), granted here in the
// driver's namespace alone: each component reads pods only there.
var podRules = map[string]rbacv1.PolicyRule{
	KubeletPluginServiceAccount:       rule("", []string{"pods"}, "get", "list", "watch"),
	ControllerName:                    rule("", []string{"pods"}, "get", "list", "watch"),
	ComputeDomainDaemonServiceAccount: rule("", []string{"pods"}, "get", "list", "watch", "patch"),
}

// computeDomainDaemonServiceAccount is the ServiceAccount of the IMEX
// daemons. The controller, not the operator, writes their pods, from a
// template that names this ServiceAccount and leaves the token to it
// (dra-driver-nvidia-gpu 95932046, templates/compute-domain-daemon.tmpl.yaml
// L20); the daemon then patches its own pod and writes ComputeDomainCliques
// (cmd/compute-domain-daemon/main.go:551, cdclique.go:219, 327). So, unlike
// every other operand's, this ServiceAccount mounts its token.
// Its cluster-wide rules are bound as every other DRA component's.
func computeDomainDaemonServiceAccount(in state.RenderInput) []client.Object {
	objs := render.Access{Policy: in.Policy, Name: ComputeDomainDaemonServiceAccount, Namespace: in.Namespace,
		State: string(state.DRADriver), BindClusterRole: in.BindsOperandClusterRoles}.Objects()
	objs[0].(*corev1.ServiceAccount).AutomountServiceAccountToken = ptr.To(true)
	return objs
}

// boundRole is a Role bound to a ServiceAccount of another name, for
// access NVIDIA grants under a Role of its own.
func boundRole(in state.RenderInput, name, serviceAccount string, rules []rbacv1.PolicyRule) []client.Object {
	meta := render.ObjectMeta(in.Policy, name, in.Namespace, string(state.DRADriver))
	return []client.Object{
		&rbacv1.Role{TypeMeta: render.TypeMeta("rbac.authorization.k8s.io/v1", "Role"), ObjectMeta: meta, Rules: rules},
		&rbacv1.RoleBinding{
			TypeMeta:   render.TypeMeta("rbac.authorization.k8s.io/v1", "RoleBinding"),
			ObjectMeta: *meta.DeepCopy(),
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: serviceAccount, Namespace: in.Namespace}},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		},
	}
}

// rule is one PolicyRule on one API group.
func rule(group string, resources []string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: resources, Verbs: verbs}
}

// The driver's API groups: its own CRDs', and Kubernetes' DRA API.
const (
	nvidiaGroup   = "resource.nvidia.com"
	resourceGroup = "resource.k8s.io"
)

// kubeletPluginComputeDomainRules: the compute-domain plugin reads the
// ComputeDomainClique of its node's clique, in the driver's namespace,
// when it prepares a channel (cmd/compute-domain-kubelet-plugin/computedomain.go:342).
// 0130_kubeletplugin-computedomain-role.yaml L8-13.
func kubeletPluginComputeDomainRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{rule(nvidiaGroup, []string{"computedomaincliques"}, "get")}
}

// kubeletPluginMPSRules: with MPSSupport the GPU plugin runs one MPS
// control daemon Deployment per shared claim in the driver's namespace,
// and waits on it (cmd/gpu-kubelet-plugin/sharing.go:192-441).
// 0140_kubeletplugin-mps-role.yaml L8-19.
func kubeletPluginMPSRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		rule("apps", []string{"deployments"}, "get", "list", "watch", "create", "update", "patch", "delete"),
	}
}

// controllerNamespaceRules: the compute-domain controller runs a DaemonSet
// of IMEX daemons per ComputeDomain and reconciles the cliques they
// report, both in the driver's namespace (cmd/compute-domain-controller/
// daemonset.go:243-348, cdclique.go:52-133). 0110_controller-rbac.yaml L73-94.
func controllerNamespaceRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		rule("apps", []string{"daemonsets"}, "get", "list", "watch", "create", "update", "patch", "delete"),
		rule(nvidiaGroup, []string{"computedomaincliques"}, "get", "list", "watch", "update"),
	}
}

// ClusterRules are the driver's cluster-wide rules, by ServiceAccount
// name, as NVIDIA's ClusterRoles grant them but for pods, which are
// namespaced here (podRules; the chart, kustomize config and OLM bundle
// ship them, bound to those ServiceAccounts):
//   - the kubelet plugin publishes its node's ResourceSlices (the
//     admission policy keeps it to its own node), reads the claims it
//     prepares and the ComputeDomains they name, and labels its node with
//     its clique and ComputeDomain (0200_kubeletplugin-clusterrole.yaml
//     L6-50; cmd/compute-domain-kubelet-plugin/computedomain.go:393-471);
//   - the controller watches ComputeDomains in every namespace, writes
//     their status and ResourceClaimTemplates beside them, elects a leader
//     and removes its label from nodes (0110_controller-rbac.yaml L15-66;
//     cmd/compute-domain-controller/node.go:137);
//   - the IMEX daemons report to their ComputeDomain and clique and label
//     their own pods (0120_compute-domain-daemon-rbac.yaml L14-46).
//
// The kubelet plugin's rules include compute domains whether or not they
// are enabled, as NVIDIA's do: the install cannot know the policy.
func ClusterRules() map[string][]rbacv1.PolicyRule {
	return map[string][]rbacv1.PolicyRule{
		KubeletPluginServiceAccount: {
			rule(nvidiaGroup, []string{"computedomains"}, "get", "list", "watch"),
			rule(resourceGroup, []string{"resourceclaims"}, "get", "list", "watch"),
			rule(resourceGroup, []string{"resourceslices"}, "get", "list", "watch", "create", "update", "delete"),
			rule("", []string{"nodes"}, "get", "list", "watch", "update", "patch"),
		},
		ControllerName: {
			rule(nvidiaGroup, []string{"computedomains"}, "get", "list", "watch", "update"),
			rule(nvidiaGroup, []string{"computedomains/status"}, "update"),
			rule(resourceGroup, []string{"resourceclaimtemplates"}, "get", "list", "watch", "create", "update", "delete"),
			rule("coordination.k8s.io", []string{"leases"}, "get", "create", "update"),
			rule("", []string{"nodes"}, "get", "list", "watch", "update"),
		},
		ComputeDomainDaemonServiceAccount: {
			rule(nvidiaGroup, []string{"computedomains", "computedomains/status"}, "get", "list", "watch", "update", "patch"),
			rule(nvidiaGroup, []string{"computedomaincliques"}, "get", "list", "watch", "create", "update", "patch"),
		},
	}
}
