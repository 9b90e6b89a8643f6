package toolkit

import (
	"path"

	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
)

// Where the toolkit container sees the runtime's config and socket
// directories of the host.
const (
	configDir = "/runtime/config-dir"
	socketDir = "/runtime/sock-dir"
)

// runtimeHost is where a container runtime keeps its config and socket on
// the host. An empty socket means the toolkit does not talk to the runtime
// (CRI-O reloads its config by itself).
type runtimeHost struct {
	config, socket string
	// legacy is the prefix of the runtime-specific variables older toolkit
	// images read (CONTAINERD_CONFIG, DOCKER_SOCKET, ...).
	legacy string
}

var runtimes = map[gpuv1.Runtime]runtimeHost{
	gpuv1.RuntimeContainerd: {config: "/etc/containerd/config.toml", socket: "/run/containerd/containerd.sock", legacy: "CONTAINERD"},
	gpuv1.RuntimeCRIO:       {config: "/etc/crio/crio.conf", legacy: "CRIO"},
	gpuv1.RuntimeDocker:     {config: "/etc/docker/daemon.json", socket: "/var/run/docker.sock", legacy: "DOCKER"},
}

// runtimeSettings returns the env, mounts and volumes that let the toolkit
// configure the node's container runtime and register the runtime class.
func runtimeSettings(runtime gpuv1.Runtime, runtimeClass string) ([]corev1.EnvVar, []corev1.VolumeMount, []corev1.Volume) {
	host, ok := runtimes[runtime]
	if !ok {
		host = runtimes[gpuv1.RuntimeContainerd]
		runtime = gpuv1.RuntimeContainerd
	}
	config := path.Join(configDir, path.Base(host.config))
	env := []corev1.EnvVar{
		{Name: "RUNTIME", Value: string(runtime)},
		{Name: "RUNTIME_CONFIG", Value: config},
		{Name: host.legacy + "_CONFIG", Value: config},
	}
	mounts := []corev1.VolumeMount{{Name: "runtime-config", MountPath: configDir}}
	volumes := []corev1.Volume{render.HostPathVolume("runtime-config", path.Dir(host.config), corev1.HostPathDirectoryOrCreate)}
	if host.socket != "" {
		socket := path.Join(socketDir, path.Base(host.socket))
		env = append(env,
			corev1.EnvVar{Name: "RUNTIME_SOCKET", Value: socket},
			corev1.EnvVar{Name: host.legacy + "_SOCKET", Value: socket})
		mounts = append(mounts, corev1.VolumeMount{Name: "runtime-socket", MountPath: socketDir})
		volumes = append(volumes, render.HostPathVolume("runtime-socket", path.Dir(host.socket), corev1.HostPathDirectory))
	}
	if runtime == gpuv1.RuntimeContainerd {
		env = append(env, corev1.EnvVar{Name: "CONTAINERD_RUNTIME_CLASS", Value: runtimeClass})
	}
	return env, mounts, volumes
}
