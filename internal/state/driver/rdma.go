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

// MOFEDWaitName is the init container that waits for MOFED before the
// driver is built against it.
const MOFEDWaitName = "mofed-wait"

// mofedWait does what NVIDIA's driver manager does before the driver
// installs with GPUDirect RDMA (k8s-driver-manager v0.12.0
// waitForMofedDriver): on a node with a Mellanox device (PCI vendor
// 0x15b3), wait until MOFED is ready, its driver container's mark or, with
// the host's MOFED, mlx5_core loaded; the driver script links MOFED's
// sources when it builds nvidia-peermem, and without them the module
// never loads. It first removes the previous driver's ready mark, which
// the peermem container would otherwise take for the new driver's.
const mofedWait = `rm -f ` + driverReadyFile + `
found=
for d in /sys/bus/pci/devices/*; do
  [ "$(cat "$d/vendor" 2>/dev/null)" = 0x15b3 ] && found=1
done
if [ -z "$found" ]; then
  echo "no Mellanox device: the driver installs without waiting for MOFED"
  exit 0
fi
until if [ "$USE_HOST_MOFED" = true ]; then grep -q mlx5_core /proc/modules; else [ -f /run/mellanox/drivers/.driver-ready ]; fi; do
  echo "waiting for MOFED to be installed"
  sleep 5
done`

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
	// The mark goes with the driver (NVIDIA's preStop does the same): a
	// new driver's peermem container must not take the old one's for its
	// own.
	main.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
		Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "rm -f " + driverReadyFile}}}}
	src := mellanoxSrcDir
	if rdma.HostMOFED() {
		src = "/usr/src"
	}
	return []corev1.Volume{
		render.HostPathVolume("mlnx-ofed-usr-src", src, corev1.HostPathDirectoryOrCreate),
		render.HostPathVolume("run-mellanox-drivers", mellanoxDir, corev1.HostPathDirectoryOrCreate),
	}
}

// mofedWaiter is the init container that runs mofedWait.
func mofedWaiter(rdma *gpuv1.GPUDirectRDMASpec, privileged *corev1.SecurityContext) corev1.Container {
	c := corev1.Container{
		Name:            MOFEDWaitName,
		Command:         []string{"sh", "-c", mofedWait},
		SecurityContext: privileged,
		VolumeMounts: []corev1.VolumeMount{
			{Name: "run-nvidia", MountPath: "/run/nvidia", MountPropagation: ptr.To(corev1.MountPropagationBidirectional)},
			{Name: "run-mellanox-drivers", MountPath: mellanoxDir, MountPropagation: ptr.To(corev1.MountPropagationHostToContainer)},
		},
	}
	if rdma.HostMOFED() {
		c.Env = []corev1.EnvVar{{Name: "USE_HOST_MOFED", Value: "true"}}
	}
	return c
}

// peermem is the container that loads nvidia-peermem once MOFED and the
// driver are up, and again whenever a MOFED reinstall unloads it; it is
// started once the module is in (or no Mellanox driver runs yet), and
// restarted when the module goes while mlx5 runs.
func peermem(rdma *gpuv1.GPUDirectRDMASpec, privileged *corev1.SecurityContext, params []corev1.VolumeMount) corev1.Container {
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
	// reload_nvidia_peermem reads nvidia-peermem.conf for the module's
	// parameters, as the driver container does.
	c.VolumeMounts = append(c.VolumeMounts, params...)
	return c
}
