package driver

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
)

// Where MOFED is seen from the driver pod: the network operator's driver
// container shares its root under /run/mellanox/drivers and marks it ready
// there; the sources nvidia-peermem is built against are under usr/src,
// the host's own /usr/src when MOFED is the host's.
const (
	mellanoxDir     = "/run/mellanox/drivers"
	mellanoxSrcDir  = mellanoxDir + "/usr/src"
	driverReadyFile = "/run/nvidia/validations/.driver-ctr-ready"
)

// driverReadyProbe is the driver's startup probe with GPUDirect RDMA: the
// peermem container waits for driverReadyFile (gpu-driver-container
// d10b41a reload_nvidia_peermem), which nothing else writes in this
// operator, before it loads nvidia-peermem into the running driver.
const driverReadyProbe = "nvidia-smi && mkdir -p /run/nvidia/validations && touch " + driverReadyFile

// addRDMA sets the driver container up for GPUDirect RDMA and returns the
// volumes it needs: the script builds nvidia-peermem against MOFED's
// sources and loads it when GPU_DIRECT_RDMA_ENABLED is true and a Mellanox
// device is present.
func addRDMA(main *corev1.Container, rdma *gpuv1.GPUDirectRDMASpec) []corev1.Volume {
	main.Env = append(main.Env, corev1.EnvVar{Name: "GPU_DIRECT_RDMA_ENABLED", Value: "true"})
	if rdma.HostMOFED() {
		main.Env = append(main.Env, corev1.EnvVar{Name: "USE_HOST_MOFED", Value: "true"})
	}
	main.VolumeMounts = append(main.VolumeMounts,
		corev1.VolumeMount{Name: "mlnx-ofed-usr-src", MountPath: mellanoxSrcDir, MountPropagation: ptr.To(corev1.MountPropagationHostToContainer)},
		corev1.VolumeMount{Name: "run-mellanox-drivers", MountPath: mellanoxDir, MountPropagation: ptr.To(corev1.MountPropagationHostToContainer)})
	main.StartupProbe.Exec.Command = []string{"sh", "-c", driverReadyProbe}
	src := mellanoxSrcDir
	if rdma.HostMOFED() {
		src = "/usr/src"
	}
	return []corev1.Volume{
		render.HostPathVolume("mlnx-ofed-usr-src", src, corev1.HostPathDirectoryOrCreate),
		render.HostPathVolume("run-mellanox-drivers", mellanoxDir, corev1.HostPathDirectoryOrCreate),
	}
}

// peermem is the container that loads nvidia-peermem once MOFED and the
// driver are up, and again whenever a MOFED reinstall unloads it; it is
// started once the module is in (or no Mellanox driver runs yet), and
// restarted when the module goes while mlx5 runs.
func peermem(rdma *gpuv1.GPUDirectRDMASpec, privileged *corev1.SecurityContext) corev1.Container {
	probe := corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "nvidia-driver probe_nvidia_peermem"}}}
	c := corev1.Container{
		Name:    PeermemName,
		Command: []string{"nvidia-driver"},
		Args:    []string{"reload_nvidia_peermem"},
		// The driver's own env does not apply: this container only loads
		// a module into the driver the other one runs.
		Env:             []corev1.EnvVar{{Name: "NVIDIA_VISIBLE_DEVICES", Value: "void"}},
		SecurityContext: privileged,
		VolumeMounts: []corev1.VolumeMount{
			{Name: "run-nvidia", MountPath: "/run/nvidia", MountPropagation: ptr.To(corev1.MountPropagationBidirectional)},
			{Name: "var-log", MountPath: "/var/log"},
			{Name: "run-mellanox-drivers", MountPath: mellanoxDir, MountPropagation: ptr.To(corev1.MountPropagationHostToContainer)},
		},
		StartupProbe: &corev1.Probe{ProbeHandler: probe, InitialDelaySeconds: 10, PeriodSeconds: 10, TimeoutSeconds: 10,
			FailureThreshold: 120},
		LivenessProbe: &corev1.Probe{ProbeHandler: probe, InitialDelaySeconds: 30, PeriodSeconds: 30, TimeoutSeconds: 10,
			FailureThreshold: 1},
	}
	if rdma.HostMOFED() {
		c.Env = append(c.Env, corev1.EnvVar{Name: "USE_HOST_MOFED", Value: "true"})
	}
	return c
}
