package migmanager

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/migconfig"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/toolkit"
)

// Names users know from the NVIDIA GPU Operator.
const (
	DaemonSetName      = "nvidia-mig-manager"
	ServiceAccountName = "nvidia-mig-manager"
	// ContainerName is mig-manager's container.
	ContainerName = "nvidia-mig-manager"
)

// Where the ConfigMaps are mounted, as NVIDIA's manifests mount them
// (gpu-operator v26.7.0, assets/state-mig-manager/0600_daemonset.yaml).
const (
	configDir     = "/mig-parted-config"
	gpuClientsDir = "/gpu-clients"
	hostRoot      = "/host"
)

// dimensions: mig-manager gets NVML from the NVIDIA runtime, through the
// RuntimeClass where the node's runtime has the handler; it is told the
// node's driver root, and stops the host's GPU clients only where the
// driver is the host's.
var dimensions = state.Dimensions{DriverRoot: true, Runtime: true}

// Operand renders the mig-manager state.
type Operand struct{}

// Enabled reports whether the policy manages MIG.
func (Operand) Enabled(spec *gpuv1.ClusterPolicySpec) bool { return spec.MIGManager.Manages() }

// Render returns mig-manager's ServiceAccount and Role, the default
// configuration file where the policy names none, and one DaemonSet per
// driver root. Its pods run only on nodes at the apply step of their
// reconfiguration: the operator, not mig-manager, decides when a node is
// reconfigured, within the budget.
func (Operand) Render(in state.RenderInput) ([]client.Object, error) {
	spec := &in.Policy.Spec.MIGManager
	objs := render.Access{Policy: in.Policy, Name: ServiceAccountName, Namespace: in.Namespace,
		State: string(state.MIGManager), Rules: namespaceRules, BindClusterRole: in.BindsOperandClusterRoles}.Objects()
	objs = append(objs, nodeWritePolicy(in)...)
	configMap := func(name, key, data string) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			TypeMeta:   render.TypeMeta("v1", "ConfigMap"),
			ObjectMeta: render.ObjectMeta(in.Policy, name, in.Namespace, string(state.MIGManager)),
			Data:       map[string]string{key: data},
		}
	}
	if spec.OwnConfigMap() {
		objs = append(objs, configMap(gpuv1.DefaultMIGConfigMap, migconfig.FileKey, DefaultConfig))
	}
	if spec.OwnGPUClientsConfigMap() {
		objs = append(objs, configMap(gpuv1.DefaultGPUClientsConfigMap, GPUClientsKey, DefaultGPUClients))
	}
	image := render.Image(string(spec.Repository), string(spec.Image), string(spec.Version))
	in.Gate = append(slices.Clone(in.Gate), ApplyGate)
	sets, err := in.DaemonSets(DaemonSetName, state.MIGManager, &spec.ContainerSettings, image, dimensions, podSpec)
	if err != nil {
		return nil, err
	}
	return append(objs, sets...), nil
}

// ApplyGate keeps mig-manager off every node but those whose
// reconfiguration is at its apply step, by then without GPU pods, device
// plugin, GFD or dcgm-exporter. mig-manager applies the node's
// nvidia.com/mig.config when it starts (mig-parted v0.15.0,
// cmd/nvidia-mig-manager/main.go: the informer's add event wakes the
// loop in start), so a pod is an attempt, and a new pod a retry.
var ApplyGate = corev1.NodeSelectorRequirement{Key: gpuv1.LabelMIGReconfigureState, Operator: corev1.NodeSelectorOpIn,
	Values: []string{string(gpuv1.MIGApply)}}

// namespaceRules: in DEFAULT_GPU_CLIENTS_NAMESPACE, our namespace,
// mig-manager polls with a list until NVIDIA's GPU clients' pods are gone
// from its node, and lists and deletes the validators' pods there
// (mig-parted v0.15.0, pkg/mig/reconfigure/reconfigure.go:
// waitForPodDeletion, deletePod). It neither gets nor watches pods any
// more (v0.12.1's kubectl wait did), so of NVIDIA's Role
// (gpu-operator v26.7.0, assets/state-mig-manager/0200_role.yaml) only
// these remain: its configmaps rules serve a configuration mig-manager
// generates when CONFIG_FILE is empty, which ours never is, and its
// securitycontextconstraints rule is for OpenShift.
var namespaceRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "delete"}},
}

// ClusterRules are mig-manager's cluster-wide rules. It watches its node
// and patches nvidia.com/mig.config.state and the deploy labels it pauses
// (mig-parted v0.15.0, cmd/nvidia-mig-manager/main.go: the node informer;
// pkg/mig/reconfigure/reconfigure.go: getCurrentNodeLabels,
// setNodeLabels); it never updates a node, which NVIDIA's ClusterRole
// also grants. Before it applies, it lists the pods of every namespace on
// its node, waiting for any DaemonSet's pod selected by
// nvidia.com/gpu.deploy.client to go (waitForPodsWithNodeSelector): a
// failed list ends the attempt with no state reported and the deploy
// labels left paused, so pods list is granted cluster-wide, as NVIDIA's
// ClusterRole does (gpu-operator v26.7.0,
// assets/state-mig-manager/0210_clusterrole.yaml). The install ships
// these rules as a ClusterRole; the operator binds it to ServiceAccountName
// while mig-manager runs.
func ClusterRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}},
	}
}

// podSpec is mig-manager's pod for one driver root, as NVIDIA's manifests
// run it, without their validator's marker files: the operator starts it
// only once the driver and the toolkit are ready on the node, and gives it
// the driver root the validator's driver-ready file would (gpu-operator
// v26.7.0, cmd/nvidia-validator/main.go; assets/state-mig-manager/0420_configmap.yaml
// sources it). It is privileged with the host's PID and IPC namespaces:
// it stops the host's GPU clients and, if asked to (WITH_REBOOT), reboots
// the node.
func podSpec(cp *gpuv1.ClusterPolicy, v state.Variant) corev1.PodSpec {
	spec := &cp.Spec.MIGManager
	host := v.DriverRoot == gpuv1.DriverRootHost
	root, rootCtr := cp.Spec.DriverRootPath(v.DriverRoot), toolkit.DriverRootInContainer(&cp.Spec, v.DriverRoot)
	env := []corev1.EnvVar{
		render.FieldEnv("NODE_NAME", "spec.nodeName"),
		// Always set: mig-manager v0.15.0 reads the file it names, and
		// only without one generates a configuration from the node's
		// GPUs into a ConfigMap of its own (cmd/nvidia-mig-manager/main.go:
		// setupMigConfig), which would make the operator's checks of the
		// name against migManager.config's file wrong.
		{Name: "CONFIG_FILE", Value: configDir + "/" + migconfig.FileKey},
		render.FieldEnv("DEFAULT_GPU_CLIENTS_NAMESPACE", "metadata.namespace"),
		{Name: "NVIDIA_DRIVER_ROOT", Value: root},
		{Name: "DRIVER_ROOT_CTR_PATH", Value: rootCtr},
		// The host's services that use the GPUs (nvidia-persistenced,
		// dcgm) run only beside a host driver.
		{Name: "WITH_SHUTDOWN_HOST_GPU_CLIENTS", Value: boolString(host)},
		{Name: "GPU_CLIENTS_FILE", Value: gpuClientsDir + "/" + GPUClientsKey},
	}
	mounts := []corev1.VolumeMount{
		// The host's / (mig-parted v0.15.0: --host-root-mount, /host).
		// mig-manager reaches the host's systemd through
		// /host/run/dbus/system_bus_socket on every node, to stop GPU
		// clients and to persist the configuration; where it stops them it
		// also copies nvidia-mig-parted and the configuration under
		// /host/usr/local/nvidia/mig-manager and runs them chrooted there,
		// and WITH_REBOOT reboots through chroot. Hence writable; the
		// hostPath bind is recursive, so the host's /run, a mount of its
		// own, is in it.
		{Name: "host-root", MountPath: hostRoot, MountPropagation: ptr.To(corev1.MountPropagationHostToContainer)},
		{Name: "host-sys", MountPath: "/sys"},
		{Name: "mig-parted-config", MountPath: configDir, ReadOnly: true},
		{Name: "gpu-clients", MountPath: gpuClientsDir, ReadOnly: true},
	}
	volumes := []corev1.Volume{
		render.HostPathVolume("host-root", cp.Spec.HostRoot(), corev1.HostPathDirectory),
		render.HostPathVolume("host-sys", "/sys", corev1.HostPathDirectory),
		render.ConfigMapVolume("mig-parted-config", spec.ConfigMapName()),
		render.ConfigMapVolume("gpu-clients", spec.GPUClientsConfigMapName()),
	}
	cdi := cp.Spec.CDI.IsEnabled() && cp.Spec.Toolkit.IsEnabled()
	if rootCtr != hostRoot {
		driverRoot := render.ReadOnlyHostMount("driver-root", rootCtr)
		// With CDI, mig-manager runs the driver's nvidia-smi chrooted in
		// the driver root, which makes the new MIG devices' nodes there.
		driverRoot.ReadOnly = !cdi
		mounts = append(mounts, driverRoot)
		volumes = append(volumes, render.HostPathVolume("driver-root", root, corev1.HostPathDirectoryOrCreate))
	}
	if cdi {
		// After a change it writes the management CDI spec again, naming
		// the new MIG devices, as the toolkit writes it (mig-parted
		// v0.15.0, pkg/mig/reconfigure/reconfigure.go: createCDISpec,
		// runNvidiaSMI; NVIDIA's operator sets the same, gpu-operator
		// v26.7.0 controllers/object_controls.go), with the device nodes
		// where the toolkit's spec has them.
		env = append(env,
			corev1.EnvVar{Name: "CDI_ENABLED", Value: "true"},
			corev1.EnvVar{Name: "NVIDIA_CDI_HOOK_PATH", Value: toolkit.CDIHook(cp.Spec.ToolkitInstallDir())},
		)
		env = append(env, toolkit.DevRootEnv(&cp.Spec, v.DriverRoot)...)
		mounts = append(mounts, corev1.VolumeMount{Name: "cdi-root", MountPath: toolkit.CDISpecDir})
		volumes = append(volumes, render.HostPathVolume("cdi-root", toolkit.CDISpecDir, corev1.HostPathDirectoryOrCreate))
	}
	// Under CDI the runtime hands it the management spec's files: after a
	// driver upgrade, only once the spec names the new driver.
	var inits []corev1.Container
	if wait, waitVolumes := toolkit.WaitForSpec(&cp.Spec, render.Image(string(cp.Spec.MIGManager.Repository), string(cp.Spec.MIGManager.Image), string(cp.Spec.MIGManager.Version)),
		cp.Spec.MIGManager.ImagePullPolicy); wait != nil {
		inits = append(inits, *wait)
		volumes = render.AddVolumes(volumes, waitVolumes...)
	}
	return corev1.PodSpec{
		InitContainers:     inits,
		ServiceAccountName: ServiceAccountName,
		// mig-parted loads libnvidia-ml.so.1 by name: the image asks the
		// NVIDIA runtime for every GPU with the utility capability, so the
		// runtime must be the NVIDIA one even where it is not the node's
		// default (mig-parted v0.15.0 deployments/container/Dockerfile).
		RuntimeClassName: state.RuntimeClassName(&cp.Spec, v.Runtime),
		// mig-manager watches its node and labels it through the API.
		AutomountServiceAccountToken: ptr.To(true),
		HostPID:                      true,
		HostIPC:                      true,
		Containers: []corev1.Container{{
			Name:            ContainerName,
			Command:         []string{"nvidia-mig-manager"},
			Env:             env,
			SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
			VolumeMounts:    mounts,
		}},
		Volumes: volumes,
	}
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// Kinds lists the kinds Render returns.
func (Operand) Kinds() []schema.GroupVersionKind {
	return append(slices.Clone(render.RBACKinds), render.KindConfigMap, render.KindDaemonSet,
		render.KindValidatingAdmissionPolicy, render.KindValidatingAdmissionPolicyBinding)
}

// NodeWritePolicyName names the admission policy and binding that hold
// mig-manager's node writes, after the namespace: they are cluster-scoped.
func NodeWritePolicyName(namespace string) string { return "nvidia-mig-manager-nodes-" + namespace }

// nodeWritePolicy holds mig-manager's token to what k8s-mig-manager
// v0.15.0 writes (pkg/mig/reconfigure/reconfigure.go:600-609, a merge
// patch of its own node's labels, NODE_NAME): nvidia.com/mig.config.state
// and the nvidia.com/gpu.deploy.* labels that pause the GPU clients
// (reconfigure.go:41-47). Its ClusterRole lets it patch every node; the
// token is on every MIG node.
func nodeWritePolicy(in state.RenderInput) []client.Object {
	meta := render.ObjectMeta(in.Policy, NodeWritePolicyName(in.Namespace), "", string(state.MIGManager))
	meta.Labels[render.LabelName] = "nvidia-mig-manager-nodes" // a label value holds 63 characters, a namespace as many
	return render.NodeWritePolicy(meta, render.NodeWrites{
		Operand: "mig-manager", Namespace: in.Namespace, ServiceAccount: ServiceAccountName, OwnNodeOnly: true,
		Label:  `k == "nvidia.com/mig.config.state" || k.startsWith("nvidia.com/gpu.deploy.")`,
		Labels: "nvidia.com/mig.config.state and nvidia.com/gpu.deploy.*",
	})
}
