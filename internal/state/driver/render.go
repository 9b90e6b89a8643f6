package driver

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// ServiceAccountName is the driver pods' ServiceAccount. The driver needs
// no API access.
const ServiceAccountName = "nvidia-driver"

// Operand renders the driver state.
type Operand struct{}

// Enabled reports whether the policy deploys the driver.
func (Operand) Enabled(spec *gpuv1.ClusterPolicySpec) bool { return spec.Driver.IsEnabled() }

// Render returns the driver's ServiceAccount and one DaemonSet per node
// pool and OS of its GPU nodes, each with the image tag for its OS
// (<version>-ubuntu22.04). A digest pins one image for every OS, so it
// gives one DaemonSet per pool. The update strategy is always OnDelete: the
// operator decides when a node's driver pod is replaced.
func (Operand) Render(in state.RenderInput) ([]client.Object, error) {
	objs := []client.Object{render.ServiceAccount(in.Policy, ServiceAccountName, in.Namespace, string(state.Driver))}
	for _, pool := range in.DriverPools {
		ds, err := poolDaemonSets(in, pool)
		if err != nil {
			return nil, err
		}
		objs = append(objs, ds...)
	}
	return objs, nil
}

func poolDaemonSets(in state.RenderInput, pool state.DriverPool) ([]client.Object, error) {
	spec := pool.Driver
	if kmc := spec.KernelModuleConfig; kmc != nil && kmc.Name != "" && (pool.ModuleParams == nil || pool.ModuleParams.ConfigMap != kmc.Name) {
		// Never a driver without the parameters asked for: GB200's
		// coherent memory mode is one.
		return nil, fmt.Errorf("driver pool %s: the files of kernelModuleConfig's ConfigMap %s were not read", pool.Name, kmc.Name)
	}
	// Only on nodes whose driver is the driver container's, in the pool.
	gate := append(in.Gated(state.Variant{DriverRoot: gpuv1.DriverRootContainer}, state.Dimensions{DriverRoot: true}), corev1.NodeSelectorRequirement{
		Key: gpuv1.LabelDriverPool, Operator: corev1.NodeSelectorOpIn, Values: []string{pool.Name},
	})
	version := string(spec.Version)
	if pool.Precompiled {
		return precompiledDaemonSets(in, pool, gate)
	}
	if IsDigest(spec.Version) {
		name, _ := DaemonSetOf(pool.Name, spec.Version, state.OSRelease{}, false)
		ds, err := daemonSet(in, pool, name, render.Image(string(spec.Repository), string(spec.Image), version), gate, state.OSRelease{})
		return []client.Object{ds}, err
	}
	var objs []client.Object
	for _, os := range pool.OSReleases {
		osGate := append(append([]corev1.NodeSelectorRequirement{}, gate...),
			corev1.NodeSelectorRequirement{Key: state.LabelOSReleaseID, Operator: corev1.NodeSelectorOpIn, Values: []string{os.ID}},
			corev1.NodeSelectorRequirement{Key: state.LabelOSVersionID, Operator: corev1.NodeSelectorOpIn, Values: []string{os.VersionID}},
		)
		image := render.Image(string(spec.Repository), string(spec.Image), version+"-"+os.String())
		name, _ := DaemonSetOf(pool.Name, spec.Version, os, true)
		ds, err := daemonSet(in, pool, name, image, osGate, os)
		if err != nil {
			return nil, err
		}
		objs = append(objs, ds)
	}
	return objs, nil
}

// precompiledDaemonSets renders a precompiled pool: one DaemonSet per
// kernel and OS, each on the nodes whose nvidia.com/gpu.driver-kernel label
// names its kernel, with NVIDIA's image for that kernel
// (<branch>-<kernel>-<os>).
func precompiledDaemonSets(in state.RenderInput, pool state.DriverPool, gate []corev1.NodeSelectorRequirement) ([]client.Object, error) {
	var objs []client.Object
	for _, k := range pool.Kernels {
		kernelGate := append(append([]corev1.NodeSelectorRequirement{}, gate...),
			corev1.NodeSelectorRequirement{Key: state.LabelOSReleaseID, Operator: corev1.NodeSelectorOpIn, Values: []string{k.OS.ID}},
			corev1.NodeSelectorRequirement{Key: state.LabelOSVersionID, Operator: corev1.NodeSelectorOpIn, Values: []string{k.OS.VersionID}},
			corev1.NodeSelectorRequirement{Key: gpuv1.LabelDriverKernel, Operator: corev1.NodeSelectorOpIn, Values: []string{k.Version}},
		)
		ds, err := daemonSet(in, pool, PrecompiledDaemonSetOf(pool.Name, k), PrecompiledImage(pool.Driver, k), kernelGate, k.OS)
		if err != nil {
			return nil, err
		}
		objs = append(objs, ds)
	}
	return objs, nil
}

func daemonSet(in state.RenderInput, pool state.DriverPool, name, image string, gate []corev1.NodeSelectorRequirement,
	os state.OSRelease) (client.Object, error) {
	pod, err := podSpec(in.Policy, pool, os)
	if err != nil {
		return nil, fmt.Errorf("driver pool %s: %w", pool.Name, err)
	}
	w := in.Workload(name, state.Driver, &pool.Driver.ContainerSettings, image, pod)
	w.Gate, w.OnDelete, w.Daemonsets = gate, true, pool.Daemonsets
	// NVIDIA's labels: a ClusterPolicy's drivers are found by
	// app=nvidia-driver-daemonset, whatever their pool, OS or kernel (as
	// NVIDIA names precompiled ones); an NVIDIADriver's app is its
	// DaemonSet's name, so that app=nvidia-driver-daemonset finds none of
	// them, as NVIDIA's move to NVIDIADriver checks; every driver pod is
	// app.kubernetes.io/component=nvidia-driver (gpu-operator v26.7.0
	// assets/state-driver/0500_daemonset.yaml; manifests/state-driver/
	// 0500_daemonset.yaml, internal/state/driver.go getDriverAppName).
	w.App, w.AppComponent = DaemonSetName, AppComponent
	// The template's hash is the driver's configuration digest: a pod
	// replaced by one of the same template keeps the loaded modules. The
	// precompiled images' script has no such path
	// (ubuntu22.04/precompiled/nvidia-driver at d10b41a).
	if !pool.Precompiled {
		w.HashEnv = state.DriverConfigDigestEnv
	}
	if pool.NVIDIADriver {
		w.App = name
	}
	// The pool's DaemonSets are found by it when the pool cannot render
	// (its module parameters missing) and they must stay as they are.
	w.ObjectLabels = map[string]string{gpuv1.LabelDriverPool: pool.Name}
	w.PodAnnotations = map[string]string{AnnotationVersion: LabelValue(pool.Driver.Version)}
	if pool.ModuleParams != nil {
		w.Inputs = map[string]string{AnnotationModuleParams: pool.ModuleParams.Digest}
	}
	return render.DaemonSet(w)
}

// Kinds lists the kinds Render returns.
func (Operand) Kinds() []schema.GroupVersionKind {
	return []schema.GroupVersionKind{render.KindServiceAccount, render.KindDaemonSet}
}
