package deviceplugin

import (
	"path"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state/toolkit"
)

// DevCharContainerName is the init container that links /dev/char to the
// driver's device nodes.
const DevCharContainerName = "create-dev-char-symlinks"

// devCharScript links /dev/char/<major>:<minor> to each NVIDIA device node
// of the node's driver. With the systemd cgroup driver, systemd re-applies
// a container's device rules by those paths on every daemon-reload; without
// the links a running GPU pod loses its devices ("Failed to initialize
// NVML: Unknown Error"). nvidia-ctk lists every node the loaded driver can
// have (from /proc/devices, the PCI GPUs and the MIG capabilities), as
// links to /dev; the links are moved to where this node's driver keeps its
// nodes on the host ($DEV_ROOT/dev). It runs before each start of the
// device plugin, so after every load of a driver. A failure to link is
// reported and does not keep the plugin from starting.
//
// A driver container loads its modules itself. A host's driver may have
// left nvidia-uvm unloaded (it is loaded on first use) and its control
// nodes uncreated, and the listing needs nvidia-uvm's major: as NVIDIA's
// validator does, the modules are loaded through the host's modprobe and
// the control nodes made in the host's /dev first ($HOST_ROOT is the host's
// / then). Loading a loaded module does nothing.
const devCharScript = `staging=$(mktemp -d)
ctk=$(command -v nvidia-ctk)
for c in "$TOOLKIT_DIR/nvidia-ctk" /artifacts/deb/usr/bin/nvidia-ctk /artifacts/rpm/usr/bin/nvidia-ctk; do
  [ -n "$ctk" ] || ! [ -x "$c" ] || ctk=$c
done
if [ -n "$HOST_ROOT" ]; then
  "$ctk" system create-device-nodes --control-devices --load-kernel-modules --root="$HOST_ROOT" --dev-root="$HOST_ROOT" ||
    echo "could not load the host's NVIDIA modules or create their control device nodes"
fi
if "$ctk" system create-dev-char-symlinks --create-all --dev-char-path="$staging"; then
  for link in "$staging"/*; do
    [ -L "$link" ] || continue
    ln -sfn "$DEV_ROOT$(readlink "$link")" "/host-dev-char/${link##*/}" || echo "could not link /dev/char/${link##*/}"
  done
else
  echo "nvidia-ctk could not list the NVIDIA device nodes: /dev/char not linked"
fi
exit 0`

// hostRootMount is where the /dev/char step sees the host's /, beside a
// host driver.
const hostRootMount = "/host"

// devCharLinks is the init container that makes the links, and the
// volumes it needs. It runs the toolkit image, for its shell, and the
// nvidia-ctk the toolkit installed on the host, or else the image's own,
// which it keeps only unpacked under /artifacts from v1.18 on
// (nvidia-container-toolkit v1.20.0 deployments/container/Dockerfile),
// privileged as the plugin is: under SELinux a confined container may not
// write the host's /dev/char, and loading modules and making device nodes
// take privileges too.
func devCharLinks(cp *gpuv1.ClusterPolicy, root gpuv1.DriverRoot) (corev1.Container, []corev1.Volume) {
	devRoot := ""
	if root == gpuv1.DriverRootContainer {
		devRoot = cp.Spec.DriverRootPath(root)
	}
	tk := &cp.Spec.Toolkit
	installDir := cp.Spec.ToolkitInstallDir()
	c := corev1.Container{
		Name:            DevCharContainerName,
		Image:           render.Image(string(tk.Repository), string(tk.Image), string(tk.Version)),
		ImagePullPolicy: tk.ImagePullPolicy,
		Command:         []string{"sh", "-c", devCharScript},
		Env:             []corev1.EnvVar{{Name: "DEV_ROOT", Value: devRoot}, {Name: "TOOLKIT_DIR", Value: path.Join(installDir, "toolkit")}},
		SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
		VolumeMounts:    []corev1.VolumeMount{{Name: "host-dev-char", MountPath: "/host-dev-char"}},
	}
	volumes := []corev1.Volume{render.HostPathVolume("host-dev-char", path.Join(cp.Spec.HostRoot(), "dev/char"), corev1.HostPathDirectoryOrCreate)}
	if tk.IsEnabled() {
		// The toolkit, which runs first on the node, installed it. Not
		// without it: the directory may not exist, or be read-only.
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "toolkit-install-dir", MountPath: installDir, ReadOnly: true})
		volumes = append(volumes, render.HostPathVolume("toolkit-install-dir", installDir, corev1.HostPathDirectoryOrCreate))
	}
	if toolkit.DriverRootInContainer(&cp.Spec, root) == toolkit.HostRoot {
		// The plugin's driver root volume is the host's / here. Writable
		// in this container: the control nodes are made in the host's
		// /dev, which the host's / carries as a submount. A driver
		// installed elsewhere (hostPaths.driverInstallDir, GKE's) is
		// loaded by its installer.
		c.Env = append(c.Env, corev1.EnvVar{Name: "HOST_ROOT", Value: hostRootMount})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: driverRootVolume, MountPath: hostRootMount,
			MountPropagation: ptr.To(corev1.MountPropagationHostToContainer)})
	}
	return c, volumes
}
