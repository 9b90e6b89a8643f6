package driver

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
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

// readyFile is the file the startup probe creates once nvidia-smi works;
// preStop removes it so nothing on the host trusts a driver being unloaded.
const readyFile = "/run/nvidia/validations/.driver-ctr-ready"

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
	spec := &in.Policy.Spec.Driver
	name := DaemonSetName
	if pool.Name != gpuv1.DefaultDriverPool {
		name += "-" + pool.Name
	}
	gate := append(append([]corev1.NodeSelectorRequirement{}, in.Gate...), corev1.NodeSelectorRequirement{
		Key: gpuv1.LabelDriverPool, Operator: corev1.NodeSelectorOpIn, Values: []string{pool.Name},
	})
	version := string(pool.Version)
	if strings.HasPrefix(version, "sha256:") {
		ds, err := daemonSet(in, name, render.Image(string(spec.Repository), string(spec.Image), version), pool.Version, gate)
		return []client.Object{ds}, err
	}
	var objs []client.Object
	for _, os := range pool.OSReleases {
		osGate := append(append([]corev1.NodeSelectorRequirement{}, gate...),
			corev1.NodeSelectorRequirement{Key: state.LabelOSReleaseID, Operator: corev1.NodeSelectorOpIn, Values: []string{os.ID}},
			corev1.NodeSelectorRequirement{Key: state.LabelOSVersionID, Operator: corev1.NodeSelectorOpIn, Values: []string{os.VersionID}},
		)
		image := render.Image(string(spec.Repository), string(spec.Image), version+"-"+os.String())
		ds, err := daemonSet(in, name+"-"+os.String(), image, pool.Version, osGate)
		if err != nil {
			return nil, err
		}
		objs = append(objs, ds)
	}
	return objs, nil
}

func daemonSet(in state.RenderInput, name, image string, version gpuv1.DriverVersion, gate []corev1.NodeSelectorRequirement) (client.Object, error) {
	w := in.Workload(name, state.Driver, &in.Policy.Spec.Driver.ComponentSpec, image, podSpec())
	w.Gate, w.OnDelete = gate, true
	w.PodAnnotations = map[string]string{AnnotationVersion: LabelValue(version)}
	return render.DaemonSet(w)
}

// podSpec is the driver container's pod. It loads kernel modules, so it is
// privileged and shares the host's PID namespace; /run/nvidia is shared
// both ways so the driver root it mounts there is seen by the host and by
// the toolkit.
func podSpec() corev1.PodSpec {
	return corev1.PodSpec{
		HostPID:                      true,
		ServiceAccountName:           ServiceAccountName,
		AutomountServiceAccountToken: ptr.To(false),
		Containers: []corev1.Container{{
			Name:    "nvidia-driver-ctr",
			Command: []string{"nvidia-driver"},
			Args:    []string{"init"},
			SecurityContext: &corev1.SecurityContext{
				Privileged:     ptr.To(true),
				SELinuxOptions: &corev1.SELinuxOptions{Level: "s0"},
			},
			StartupProbe: &corev1.Probe{
				ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
					Command: []string{"sh", "-c", "nvidia-smi && touch " + readyFile},
				}},
				// Building or loading a driver takes minutes: allow 20.
				InitialDelaySeconds: 60, PeriodSeconds: 10, TimeoutSeconds: 60, FailureThreshold: 120,
			},
			Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{
				Command: []string{"sh", "-c", "rm -f " + readyFile},
			}}},
			VolumeMounts: []corev1.VolumeMount{
				{Name: "run-nvidia", MountPath: "/run/nvidia", MountPropagation: ptr.To(corev1.MountPropagationBidirectional)},
				{Name: "var-log", MountPath: "/var/log"},
				{Name: "dev-log", MountPath: "/dev/log"},
				{Name: "host-os-release", MountPath: "/host-etc/os-release", ReadOnly: true},
				{Name: "firmware-search-path", MountPath: "/sys/module/firmware_class/parameters/path"},
				{Name: "lib-firmware", MountPath: "/lib/firmware"},
			},
		}},
		Volumes: []corev1.Volume{
			render.HostPathVolume("run-nvidia", "/run/nvidia", corev1.HostPathDirectoryOrCreate),
			render.HostPathVolume("var-log", "/var/log", corev1.HostPathDirectory),
			render.HostPathVolume("dev-log", "/dev/log", corev1.HostPathSocket),
			render.HostPathVolume("host-os-release", "/etc/os-release", corev1.HostPathFile),
			render.HostPathVolume("firmware-search-path", "/sys/module/firmware_class/parameters/path", corev1.HostPathFile),
			render.HostPathVolume("lib-firmware", "/lib/firmware", corev1.HostPathDirectoryOrCreate),
		},
	}
}

// Kinds lists the kinds Render returns.
func (Operand) Kinds() []schema.GroupVersionKind {
	return []schema.GroupVersionKind{render.KindServiceAccount, render.KindDaemonSet}
}
