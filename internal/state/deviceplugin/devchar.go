package deviceplugin

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
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
const devCharScript = `staging=$(mktemp -d)
if nvidia-ctk system create-dev-char-symlinks --create-all --dev-char-path="$staging"; then
  for link in "$staging"/*; do
    [ -L "$link" ] || continue
    ln -sfn "$DEV_ROOT$(readlink "$link")" "/host-dev-char/${link##*/}" || echo "could not link /dev/char/${link##*/}"
  done
else
  echo "nvidia-ctk could not list the NVIDIA device nodes: /dev/char not linked"
fi
exit 0`

// devCharLinks is the init container that makes the links. It runs the
// toolkit image, which carries nvidia-ctk, privileged as the plugin is:
// under SELinux a confined container may not write the host's /dev/char.
func devCharLinks(cp *gpuv1.ClusterPolicy, root gpuv1.DriverRoot) corev1.Container {
	devRoot := ""
	if root == gpuv1.DriverRootContainer {
		devRoot = root.Path()
	}
	tk := &cp.Spec.Toolkit
	return corev1.Container{
		Name:            DevCharContainerName,
		Image:           render.Image(string(tk.Repository), string(tk.Image), string(tk.Version)),
		ImagePullPolicy: tk.ImagePullPolicy,
		Command:         []string{"sh", "-c", devCharScript},
		Env:             []corev1.EnvVar{{Name: "DEV_ROOT", Value: devRoot}},
		SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
		VolumeMounts:    []corev1.VolumeMount{{Name: "host-dev-char", MountPath: "/host-dev-char"}},
	}
}
