package driver

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// DaemonSetName is the name users know from the NVIDIA GPU Operator; a
// per-OS DaemonSet appends the OS: nvidia-driver-daemonset-ubuntu22.04.
const DaemonSetName = "nvidia-driver-daemonset"

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

// poolPrefix is the name of a pool's DaemonSets, before the OS.
func poolPrefix(pool string) string {
	if pool == gpuv1.DefaultDriverPool {
		return DaemonSetName
	}
	return DaemonSetName + "-" + pool
}

// DaemonSetFor names the DaemonSet whose pod a node should run under the
// policy: its pool's, for its OS unless the pool pins a digest. A driver
// pod of any other DaemonSet (a pool the node left, a digest switched to a
// tag) is outdated and replaced through the upgrade. It is false when the
// node's OS, which the name needs, is not known.
func DaemonSetFor(spec *gpuv1.DriverSpec, labels map[string]string) (string, bool) {
	pool := PoolOf(spec, labels)
	name := poolPrefix(pool)
	if IsDigest(VersionOf(spec, pool)) {
		return name, true
	}
	os, ok := state.OSReleaseOf(labels)
	return name + "-" + os.String(), ok
}

// IsDigest reports whether a driver version pins an image digest, which
// serves every OS.
func IsDigest(v gpuv1.DriverVersion) bool { return strings.HasPrefix(string(v), "sha256:") }

func poolDaemonSets(in state.RenderInput, pool state.DriverPool) ([]client.Object, error) {
	spec := &in.Policy.Spec.Driver
	name := poolPrefix(pool.Name)
	// Only on nodes whose driver is the driver container's, in the pool.
	gate := append(in.Gated(state.Variant{DriverRoot: gpuv1.DriverRootContainer}, state.Dimensions{DriverRoot: true}), corev1.NodeSelectorRequirement{
		Key: gpuv1.LabelDriverPool, Operator: corev1.NodeSelectorOpIn, Values: []string{pool.Name},
	})
	version := string(pool.Version)
	if IsDigest(pool.Version) {
		ds, err := daemonSet(in, name, render.Image(string(spec.Repository), string(spec.Image), version), pool.Version, gate, state.OSRelease{})
		return []client.Object{ds}, err
	}
	var objs []client.Object
	for _, os := range pool.OSReleases {
		osGate := append(append([]corev1.NodeSelectorRequirement{}, gate...),
			corev1.NodeSelectorRequirement{Key: state.LabelOSReleaseID, Operator: corev1.NodeSelectorOpIn, Values: []string{os.ID}},
			corev1.NodeSelectorRequirement{Key: state.LabelOSVersionID, Operator: corev1.NodeSelectorOpIn, Values: []string{os.VersionID}},
		)
		image := render.Image(string(spec.Repository), string(spec.Image), version+"-"+os.String())
		ds, err := daemonSet(in, name+"-"+os.String(), image, pool.Version, osGate, os)
		if err != nil {
			return nil, err
		}
		objs = append(objs, ds)
	}
	return objs, nil
}

func daemonSet(in state.RenderInput, name, image string, version gpuv1.DriverVersion, gate []corev1.NodeSelectorRequirement,
	os state.OSRelease) (client.Object, error) {
	w := in.Workload(name, state.Driver, &in.Policy.Spec.Driver.ContainerSettings, image, podSpec(in.Policy, os))
	w.Gate, w.OnDelete = gate, true
	w.PodAnnotations = map[string]string{AnnotationVersion: LabelValue(version)}
	return render.DaemonSet(w)
}

// Kinds lists the kinds Render returns.
func (Operand) Kinds() []schema.GroupVersionKind {
	return []schema.GroupVersionKind{render.KindServiceAccount, render.KindDaemonSet}
}
