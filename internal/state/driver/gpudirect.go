package driver

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// The GPUDirect Storage and GDRCopy containers, as users know them, and
// the init container that unloads their modules before a driver installs.
const (
	GDSName           = "nvidia-fs-ctr"
	GDRCopyName       = "nvidia-gdrcopy-ctr"
	UnloadModulesName = "unload-gpudirect"
)

// unloadModules does what NVIDIA's driver manager does before a driver
// installs (k8s-driver-manager v0.12.0 unloadDriver: nvidia_fs, then
// gdrdrv, by /sys/module/<m>/refcnt): both hold the nvidia module, and the
// driver script, which knows neither, finds the old driver in use and
// fails (gpu-driver-container d10b41a _unload_driver). A module still in
// use fails the init container saying which.
const unloadModules = `for m in nvidia_fs gdrdrv; do
  [ -e /sys/module/$m/refcnt ] || continue
  echo "unloading $m, which holds the NVIDIA driver"
  if ! rmmod $m; then
    echo "$m is in use ($(cat /sys/module/$m/refcnt) references): the NVIDIA driver cannot be replaced until its users stop" | tee /dev/termination-log
    exit 1
  fi
done`

// sidecarModule is a kernel module NVIDIA builds in an image of its own
// against the running driver's sources, in a container of the driver pod.
type sidecarModule struct {
	name, module, command      string
	repository, image, version string
	settings                   *gpuv1.SidecarSettings
}

// waitForDriver is NVIDIA's wait before either module builds: the driver's
// root, with its sources, mounted under /run/nvidia/driver, and nvidia
// loaded (gpu-operator v26.7.0 assets/state-driver/0500_daemonset.yaml).
const waitForDriver = "until [ -d /run/nvidia/driver/usr/src ] && lsmod | grep nvidia; do echo  Waiting for nvidia-driver to be installed...; sleep 10; done; exec "

// gpuDirectContainers returns the driver pod's GPUDirect Storage and
// GDRCopy containers, as NVIDIA's operator renders them, the volume only
// they mount, and the init container that unloads their modules left by a
// pod that did not stop cleanly. Each is started once its module is loaded, so the
// driver pod, and with it the node's driver state, is ready only with
// the modules in. Their images are tagged per OS, as the driver's are: a
// driver pinned by digest serves every OS and cannot name them.
func gpuDirectContainers(pool state.DriverPool, os state.OSRelease, privileged *corev1.SecurityContext) (
	containers []corev1.Container, volumes []corev1.Volume, unload *corev1.Container, err error) {
	var modules []sidecarModule
	if g := pool.GDS; g.IsEnabled() {
		modules = append(modules, sidecarModule{name: GDSName, module: "nvidia_fs", command: "nvidia-gds-driver install",
			repository: string(g.Repository), image: string(g.Image), version: string(g.Version), settings: &g.SidecarSettings})
	}
	if g := pool.GDRCopy; g.IsEnabled() {
		modules = append(modules, sidecarModule{name: GDRCopyName, module: "gdrdrv", command: "nvidia-gdrcopy-driver install",
			repository: string(g.Repository), image: string(g.Image), version: string(g.Version), settings: &g.SidecarSettings})
	}
	if len(modules) == 0 {
		return nil, nil, nil, nil
	}
	for _, m := range modules {
		image, err := sidecarImage(m, os)
		if err != nil {
			return nil, nil, nil, err
		}
		containers = append(containers, corev1.Container{
			Name:            m.name,
			Image:           image,
			ImagePullPolicy: corev1.PullPolicy(m.settings.ImagePullPolicy),
			Command:         []string{"bash", "-xc"},
			Args:            []string{waitForDriver + m.command},
			Env:             render.Env(nil, m.settings.Env),
			// Loads a kernel module.
			SecurityContext: privileged,
			VolumeMounts: []corev1.VolumeMount{
				{Name: "run-nvidia", MountPath: "/run/nvidia", MountPropagation: ptr.To(corev1.MountPropagationHostToContainer)},
				{Name: "var-log", MountPath: "/var/log"},
				{Name: "dev-log", MountPath: "/dev/log", ReadOnly: true},
			},
			StartupProbe: &corev1.Probe{
				ProbeHandler:        corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "lsmod | grep " + m.module}}},
				InitialDelaySeconds: 10, PeriodSeconds: 10, TimeoutSeconds: 10, FailureThreshold: 120,
			},
			// The module goes with its pod, so that the next driver,
			// with this module or without, finds nvidia free: there is
			// no driver manager here to unload it.
			Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{
				Command: []string{"sh", "-c", "[ ! -e /sys/module/" + m.module + "/refcnt ] || rmmod " + m.module}}}},
		})
	}
	// Untyped, as NVIDIA's: no check that the host's syslog socket is there.
	devLog := corev1.Volume{Name: "dev-log", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/dev/log"}}}
	unload = &corev1.Container{Name: UnloadModulesName, Command: []string{"sh", "-c", unloadModules}, SecurityContext: privileged}
	return containers, []corev1.Volume{devLog}, unload, nil
}

// sidecarImage is the module image for an OS: <version>-<os>, or the
// digest, which serves every OS.
func sidecarImage(m sidecarModule, os state.OSRelease) (string, error) {
	repository, image, version := m.repository, m.image, m.version
	if IsDigest(gpuv1.DriverVersion(version)) {
		return render.Image(repository, image, version), nil
	}
	if os == (state.OSRelease{}) {
		return "", fmt.Errorf("%s: the driver is pinned by digest, one DaemonSet for every OS, and %s's image %s/%s:%s is "+
			"tagged per OS: pin %s by digest too, or the driver by version", m.name, m.module, repository, image, version, m.name)
	}
	return render.Image(repository, image, version+"-"+os.String()), nil
}

// pullSecrets are the sidecars' pull secrets, for the pod.
func pullSecrets(pool state.DriverPool) []corev1.LocalObjectReference {
	var out []corev1.LocalObjectReference
	add := func(names []gpuv1.ObjectName) {
		for _, n := range names {
			ref := corev1.LocalObjectReference{Name: string(n)}
			if !slices.Contains(out, ref) {
				out = append(out, ref)
			}
		}
	}
	if pool.GDS.IsEnabled() {
		add(pool.GDS.ImagePullSecrets)
	}
	if pool.GDRCopy.IsEnabled() {
		add(pool.GDRCopy.ImagePullSecrets)
	}
	return out
}
