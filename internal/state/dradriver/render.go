package dradriver

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// dimensions: the plugin loads NVML from the node's driver root and
// writes CDI specs naming its libraries there. It needs no RuntimeClass:
// it is privileged and sees no GPU through the runtime
// (NVIDIA_VISIBLE_DEVICES=void).
var dimensions = state.Dimensions{DriverRoot: true}

// The operator applies the driver's DeviceClasses and its admission
// policies (and the toolkit's NRI guard), and holds what it grants the
// driver in its namespace (a Role grants nothing its writer lacks). It
// changes and deletes those cluster-wide objects by name only: no one
// else's DeviceClass or admission policy (create, list and watch take no
// names; TestClusterScopedWritesNameTheOperatorsObjects keeps the names
// equal to what the states render).
// +kubebuilder:rbac:groups=resource.k8s.io,resources=deviceclasses,verbs=list;watch;create
// +kubebuilder:rbac:groups=resource.k8s.io,resources=deviceclasses,verbs=get;patch;delete,resourceNames=compute-domain-daemon.nvidia.com;compute-domain-default-channel.nvidia.com;gpu.nvidia.com;mig.nvidia.com;vfio.gpu.nvidia.com
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings,verbs=list;watch;create
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings,verbs=get;patch;delete,resourceNames=compute-domain-daemon-pods-nvidia-dra-driver;controller-nodes-nvidia-dra-driver;kubelet-plugin-nodes-nvidia-dra-driver;kubelet-plugin-slices-nvidia-dra-driver;nvidia-mig-manager-nodes-gpu-operator;nvidia-nfd-worker-features-gpu-operator;nvidia-nri-devices-gpu-operator;resourceslices-policy-nvidia-dra-driver;workloads-nvidia-dra-driver
// +kubebuilder:rbac:groups=apps,namespace=gpu-operator,resources=daemonsets;deployments,verbs=update
// +kubebuilder:rbac:groups=resource.nvidia.com,namespace=gpu-operator,resources=computedomaincliques,verbs=get;list;watch;update

// Operand renders the dra-driver state.
type Operand struct{}

// Enabled is true: the state is part of every policy and is disabled per
// node, on the nodes not in allocation mode dra. Render says whether it
// has anything to run.
func (Operand) Enabled(*gpuv1.ClusterPolicySpec) bool { return true }

// Render returns nothing while no node is in allocation mode dra (so a
// cluster that never uses DRA holds none of the driver's objects), and
// otherwise the driver's RBAC, DeviceClasses, ResourceSlice admission
// policy, one kubelet plugin DaemonSet per driver root in use and, with
// compute domains on, the compute-domain controller.
func (Operand) Render(in state.RenderInput) ([]client.Object, error) {
	if !in.DRAInUse {
		return nil, nil
	}
	d := in.DRA()
	image := render.Image(string(d.Repository), string(d.Image), string(d.Version))
	objs := access(in, d)
	objs = append(objs, deviceClasses(in.Policy, d.ComputeDomainsEnabled())...)
	objs = append(objs, sliceAdmissionPolicy(in.Policy, in.Namespace)...)
	objs = append(objs, pluginSlicePolicy(in.Policy, in.Namespace)...)
	objs = append(objs, workloadPolicy(in.Policy, in.Namespace, render.RepositoryImage(string(d.Repository), string(d.Image)))...)
	objs = append(objs, nodeWritePolicies(in.Policy, in.Namespace, d.ComputeDomainsEnabled())...)
	if d.ComputeDomainsEnabled() {
		objs = append(objs, daemonPodPolicy(in.Policy, in.Namespace)...)
	}

	gpus := containerSettings(d, d.GPUs.KubeletPlugin.DRAContainerSpec)
	sets, err := in.DaemonSets(KubeletPluginName, state.DRADriver, &gpus, image, dimensions, kubeletPluginPod(d, image))
	if err != nil {
		return nil, err
	}
	objs = append(objs, sets...)
	if d.ComputeDomainsEnabled() {
		controller, err := controllerDeployment(in, d, image)
		if err != nil {
			return nil, err
		}
		objs = append(objs, controller)
	}
	return objs, nil
}

// containerSettings are the pull settings every container of the driver
// shares, with one container's env and resources.
func containerSettings(d *gpuv1.DRADriverSpec, c gpuv1.DRAContainerSpec) gpuv1.ContainerSettings {
	return gpuv1.ContainerSettings{
		ImagePullPolicy:  d.ImagePullPolicy,
		ImagePullSecrets: d.ImagePullSecrets,
		Env:              c.Env,
		Resources:        c.Resources,
	}
}

// featureGates is FEATURE_GATES as the driver parses it
// (pkg/flags/featuregates.go: k8s.io/component-base's Name=bool list),
// sorted so that the pod template does not depend on map order.
func featureGates(d *gpuv1.DRADriverSpec) string {
	names := slices.Sorted(maps.Keys(d.FeatureGates))
	pairs := make([]string, len(names))
	for i, n := range names {
		pairs[i] = n + "=" + strconv.FormatBool(d.FeatureGates[n])
	}
	return strings.Join(pairs, ",")
}

// Kinds lists the kinds Render returns.
func (Operand) Kinds() []schema.GroupVersionKind {
	return append(slices.Clone(render.RBACKinds), render.KindDaemonSet, render.KindDeployment, render.KindDeviceClass,
		render.KindValidatingAdmissionPolicy, render.KindValidatingAdmissionPolicyBinding)
}
