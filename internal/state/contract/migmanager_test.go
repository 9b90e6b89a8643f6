package contract

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/migconfig"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/migmanager"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
	"github.com/gpu-operator/gpu-operator/internal/state/toolkit"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
)

// Sources of mig-manager's requirements: mig-parted v0.15.0, which ported
// reconfigure-mig.sh to Go, and the manifests NVIDIA's operator v26.7.0
// runs it with.
const (
	migMain        = "NVIDIA/mig-parted@v0.15.0:cmd/nvidia-mig-manager/main.go"
	migReconfigure = "NVIDIA/mig-parted@v0.15.0:pkg/mig/reconfigure/reconfigure.go"
	migSystemd     = "NVIDIA/mig-parted@v0.15.0:internal/systemd/systemd.go"
	migImage       = "NVIDIA/mig-parted@v0.15.0:deployments/container/Dockerfile"
	migDaemonSet   = "NVIDIA/gpu-operator@v26.7.0:assets/state-mig-manager/0600_daemonset.yaml"
	migEntrypoint  = "NVIDIA/gpu-operator@v26.7.0:assets/state-mig-manager/0420_configmap.yaml (sources the validator's driver-ready file)"
	migRuntime     = "NVIDIA/gpu-operator@v26.7.0:controllers/object_controls.go (setRuntimeClassName on mig-manager's DaemonSet)"
	migRole        = "NVIDIA/gpu-operator@v26.7.0:assets/state-mig-manager/0200_role.yaml"
	migClusterRole = "NVIDIA/gpu-operator@v26.7.0:assets/state-mig-manager/0210_clusterrole.yaml"
)

const mm = migmanager.ContainerName

var migManagerContract = []requirement{
	{source: migMain + " (flags --node-name, --config-file: env NODE_NAME, required, and CONFIG_FILE; setupMigConfig ~366-404: " +
		"a CONFIG_FILE set is read, and mig-manager exits if it is missing; an empty one makes it generate a configuration from the GPUs)",
		need: "knows its node and reads the configuration file from the ConfigMap, never one it generates",
		check: all(fieldEnv(mm, "NODE_NAME", "spec.nodeName"),
			env(mm, "CONFIG_FILE", "/mig-parted-config/"+migconfig.FileKey),
			configMapAtBy(mm, "/mig-parted-config", func(s *gpuv1.ClusterPolicySpec) string { return s.MIGManager.ConfigMapName() }))},
	{source: migMain + " (--gpu-clients-file, env GPU_CLIENTS_FILE); " + migDaemonSet,
		need: "reads the host's GPU clients to stop from their ConfigMap",
		check: all(env(mm, "GPU_CLIENTS_FILE", "/gpu-clients/"+migmanager.GPUClientsKey),
			configMapAtBy(mm, "/gpu-clients", func(s *gpuv1.ClusterPolicySpec) string { return s.MIGManager.GPUClientsConfigMapName() }))},
	{source: migMain + " (--default-gpu-clients-namespace, env DEFAULT_GPU_CLIENTS_NAMESPACE, default \"default\"); " +
		migReconfigure + " (waitForPodDeletion, deletePod ~613-644: pods in that namespace); " + migDaemonSet,
		need:  "looks for NVIDIA's GPU clients and validators in the operator's namespace, where its Role lets it",
		check: fieldEnv(mm, "DEFAULT_GPU_CLIENTS_NAMESPACE", "metadata.namespace")},
	{source: migImage + " (ENTRYPOINT nvidia-mig-manager, in /usr/bin; a distroless base with busybox: no bash)",
		need:  "runs nvidia-mig-manager itself, no shell script",
		check: commandPrefix(mm, "nvidia-mig-manager")},
	{source: migImage + " (ENV NVIDIA_VISIBLE_DEVICES=all, NVIDIA_MIG_CONFIG_DEVICES=all, NVIDIA_DRIVER_CAPABILITIES=utility; NVML loaded by name); " + migRuntime,
		need:  "gets NVML from the NVIDIA runtime: the RuntimeClass where the runtime has the NVIDIA handler, whatever the runtime's default",
		check: runtimeClass},
	{source: migMain + " (--nvidia-driver-root, env NVIDIA_DRIVER_ROOT; --driver-root-ctr-path, env DRIVER_ROOT_CTR_PATH: read only with --cdi-enabled, getPathsForCDI); " + migEntrypoint,
		need: "is told the node's driver root, for CDI: the driver container's (or hostPaths.driverInstallDir's) at /driver-root, the host's at /host",
		check: all(
			envBy(mm, "NVIDIA_DRIVER_ROOT", func(p *podCase) string { return p.spec.DriverRootPath(p.variant.DriverRoot) }),
			envBy(mm, "DRIVER_ROOT_CTR_PATH", func(p *podCase) string { return toolkit.DriverRootInContainer(p.spec, p.variant.DriverRoot) }),
			func(p *podCase) error {
				at := toolkit.DriverRootInContainer(p.spec, p.variant.DriverRoot)
				if at == "/host" {
					return nil // the host's / is mounted at /host
				}
				// Writable with CDI: nvidia-smi, chrooted there, makes
				// the new MIG devices' nodes.
				return hostMount(mm, mount{host: p.spec.DriverRootPath(p.variant.DriverRoot), at: at, readOnly: !p.spec.CDI.IsEnabled(),
					propagation: corev1.MountPropagationHostToContainer})(p)
			})},
	{source: migMain + " (--cdi-enabled, env CDI_ENABLED; NVIDIA_DEV_ROOT, DEV_ROOT_CTR_PATH; --nvidia-cdi-hook-path); " + migReconfigure +
		" (createCDISpec: nvidia-ctk cdi generate --mode=management, transform root to the host's paths, into /var/run/cdi/management.nvidia.com-gpu.yaml; runNvidiaSMI)",
		need: "with CDI, writes the management spec again after a change, naming the new MIG devices, with the hook the toolkit installed",
		check: all(env(mm, "CDI_ENABLED", "true"),
			envBy(mm, "NVIDIA_CDI_HOOK_PATH", func(p *podCase) string { return toolkit.CDIHook(p.spec.ToolkitInstallDir()) }),
			envBy(mm, "NVIDIA_DEV_ROOT", func(p *podCase) string { return toolkit.DevRootPath(p.spec, p.variant.DriverRoot) }),
			envBy(mm, "DEV_ROOT_CTR_PATH", func(p *podCase) string { return toolkit.DevRootInContainer(p.variant.DriverRoot) }),
			hostMount(mm, mount{host: toolkit.CDISpecDir, at: toolkit.CDISpecDir})),
		where: cdiOn},
	{source: migMain + " (--cdi-enabled defaults to false)", need: "without CDI, writes no CDI spec",
		check: noEnv(mm, "CDI_ENABLED"), where: cdiOff},
	{source: migImage + " (NVIDIA_VISIBLE_DEVICES=all: under CDI the runtime hands it the management spec's files); " + toolkitInstall,
		need: "with CDI, starts only once the management spec names the driver that runs", check: waitsForManagementSpec, where: cdiOn},
	{source: migEntrypoint + " (WITH_SHUTDOWN_HOST_GPU_CLIENTS=$IS_HOST_DRIVER)",
		need:  "stops the host's GPU services only beside a host driver",
		check: envBy(mm, "WITH_SHUTDOWN_HOST_GPU_CLIENTS", func(p *podCase) string { return fmt.Sprint(p.variant.DriverRoot == gpuv1.DriverRootHost) })},
	{source: migMain + " (--host-root-mount, default /host); " + migReconfigure + " (New ~106-115: DBUS_SYSTEM_BUS_ADDRESS=" +
		"unix:path=/host/run/dbus/system_bus_socket on every node, and no attempt without the connection; Run ~196: chroot /host reboot); " +
		migSystemd + " (NewManager ~38-48: the system bus, which stops, starts and reloads the host's services)",
		need: "reaches the host's systemd through the host's / at /host on every node, to stop its GPU services and reboot, " +
			"and /sys to reset GPUs, privileged in the host's PID namespace",
		check: all(hostMount(mm, mount{host: "/", at: "/host", propagation: corev1.MountPropagationHostToContainer}),
			hostMount(mm, mount{host: "/sys", at: "/sys"}), privileged(mm, true), hostPID(true))},
	{source: migMain + " (migReconfigure ~538-546, copyMigPartedToHost ~587-614: with --with-shutdown-host-gpu-clients it writes " +
		"nvidia-mig-parted and the configuration to /host/usr/local/nvidia/mig-manager and runs them as chroot /host ...)",
		need: "writes into the host's / where it stops the host's GPU services",
		only: func(v state.Variant) bool { return v.DriverRoot == gpuv1.DriverRootHost },
		check: all(env(mm, "WITH_SHUTDOWN_HOST_GPU_CLIENTS", "true"),
			hostMount(mm, mount{host: "/", at: "/host", propagation: corev1.MountPropagationHostToContainer}))},
	{source: migMain + " (start: in-cluster config); " + migReconfigure + " (setNodeLabels: node patches; waitForPodDeletion, deletePod, " +
		"waitForPodsWithNodeSelector: pod lists and deletes); " + migDaemonSet + " (serviceAccountName)",
		need:  "talks to the API server with its ServiceAccount's token",
		check: token(true)},
	{source: migMain + " (ContinuouslySyncMigConfigChanges: the node informer's add event hands the label it finds to start's loop)",
		need:  "runs only where the operator lets an apply attempt start, so that a pod is an attempt",
		check: gated(migmanager.ApplyGate)},
}

func TestMIGManagerContract(t *testing.T) { checkAll(t, state.MIGManager, migManagerContract) }

// access is what mig-manager does through the API, and the rules that let
// it: cluster-wide ones the install ships, or namespaced ones in the Role
// the operator renders.
type access struct {
	source, need string
	clusterWide  bool
	rules        []rbacv1.PolicyRule
}

// migManagerAccess is every API call mig-manager v0.15.0 makes with
// CONFIG_FILE set. NVIDIA's Role and ClusterRole grant more: pods get and
// watch in the namespace (v0.12.1's kubectl wait; v0.15.0 polls with
// lists), configmaps (for the configuration it generates without
// CONFIG_FILE), nodes update (it patches), and OpenShift's
// securitycontextconstraints.
var migManagerAccess = []access{
	{source: migMain + " (ContinuouslySyncMigConfigChanges: an informer on its node, by field selector)",
		need: "follows its node's nvidia.com/mig.config", clusterWide: true,
		rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list", "watch"}}}},
	{source: migReconfigure + " (getCurrentNodeLabels: get; setNodeLabels: merge patch); " + migClusterRole,
		need: "reads its node's deploy labels and writes them and nvidia.com/mig.config.state", clusterWide: true,
		rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "patch"}}}},
	{source: migReconfigure + " (waitForPodsToBeDeleted ~412-415, waitForPodsWithNodeSelector ~648-673: lists the pods of every namespace " +
		"on its node; a failed list ends Run before any state is set, the deploy labels left paused-for-mig-change); " + migClusterRole,
		need: "waits for other GPU clients' DaemonSet pods (nodeSelector nvidia.com/gpu.deploy.client) to leave its node", clusterWide: true,
		rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}}}},
	{source: migReconfigure + " (waitForPodDeletion, deletePod, restartValidatorPod: in DEFAULT_GPU_CLIENTS_NAMESPACE); " + migRole,
		need:  "waits for NVIDIA's GPU clients' pods to go, and deletes the validators' pods, in the operator's namespace",
		rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "delete"}}}},
}

// mig-manager gets what it uses and nothing more: cluster-wide what it
// does across namespaces or on its node, and in the operator's namespace
// the rest.
func TestMIGManagerAccessContract(t *testing.T) {
	g := NewWithT(t)
	graph, err := registry.Graph()
	g.Expect(err).NotTo(HaveOccurred())
	s, _ := graph.Get(state.MIGManager)
	cp := policies(t)["full"]
	g.Expect(s.Operand.Enabled(&cp.Spec)).To(BeTrue(), "the full policy runs mig-manager")
	objs, err := s.Operand.Render(state.RenderInput{Policy: cp, Namespace: fixture.Namespace, Variants: fixture.Variants(cp)})
	g.Expect(err).NotTo(HaveOccurred())

	cluster := grants(migmanager.ClusterRules())
	var roleRules []rbacv1.PolicyRule
	for _, o := range objs {
		switch r := o.(type) {
		case *rbacv1.Role:
			g.Expect(r.Name).To(Equal(migmanager.ServiceAccountName))
			roleRules = append(roleRules, r.Rules...)
		case *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding:
			t.Errorf("the operator renders %T %s: cluster-wide RBAC is the install's to ship", o, o.GetName())
		}
	}
	namespaced := grants(roleRules)

	needed := map[bool]map[grant]bool{true: {}, false: {}}
	for _, a := range migManagerAccess {
		have := namespaced
		if a.clusterWide {
			have = cluster
		}
		for w := range grants(a.rules) {
			needed[a.clusterWide][w] = true
			g.Expect(covers(have, w)).To(BeTrue(), "mig-manager %s: needs %+v (cluster-wide: %v; %s)", a.need, w, a.clusterWide, a.source)
		}
	}
	for h := range cluster {
		g.Expect(needed[true][h]).To(BeTrue(), "mig-manager is granted %+v cluster-wide, which it does not use", h)
	}
	for h := range namespaced {
		g.Expect(needed[false][h]).To(BeTrue(), "mig-manager is granted %+v in its namespace, which it does not use", h)
	}
}

// configMapAtBy checks the ConfigMap the policy names is mounted
// read-only at a path.
func configMapAtBy(ctr, at string, name func(*gpuv1.ClusterPolicySpec) string) func(*podCase) error {
	return func(p *podCase) error { return configMapAt(ctr, name(p.spec), at)(p) }
}

func token(want bool) func(*podCase) error {
	return func(p *podCase) error {
		got := p.pod.AutomountServiceAccountToken != nil && *p.pod.AutomountServiceAccountToken
		if got != want {
			return fmt.Errorf("automountServiceAccountToken=%v, want %v", got, want)
		}
		return nil
	}
}

// gated checks the pod's node affinity requires a node selector
// requirement.
func gated(req corev1.NodeSelectorRequirement) func(*podCase) error {
	return func(p *podCase) error {
		aff := p.pod.Affinity
		if aff != nil && aff.NodeAffinity != nil && aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			for _, term := range aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
				for _, r := range term.MatchExpressions {
					if r.Key == req.Key && r.Operator == req.Operator && fmt.Sprint(r.Values) == fmt.Sprint(req.Values) {
						return nil
					}
				}
			}
		}
		return fmt.Errorf("the node affinity does not require %s %s %v", req.Key, req.Operator, req.Values)
	}
}
