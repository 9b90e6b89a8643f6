package toolkit

import (
	"maps"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
)

// Where the toolkit container sees the host's runtime directories. The
// toolkit writes paths it is given as they are, so the config file and
// socket it is pointed at are mounted here from wherever they are on the
// host, and the env names these paths.
const (
	configDir = "/runtime/config-dir"
	dropInDir = "/runtime/config-dir.d"
	socketDir = "/runtime/sock-dir"
	hooksDir  = "/runtime/hooks-dir"
)

// runtimeHost is where a container runtime keeps its files on the host, by
// default, and the env variables that move them (for k3s, RKE2 or
// microk8s), in the order the toolkit reads them: the first one set wins.
type runtimeHost struct {
	config    string
	configEnv []string
	// dropIn is the file the toolkit writes its runtimes to, which the
	// config imports; "" for a runtime configured otherwise.
	dropIn    string
	dropInEnv []string
	socket    string
	socketEnv []string
	// hooks is the OCI hooks directory, for a runtime configured by hook.
	hooks    string
	hooksEnv []string
}

var runtimes = map[gpuv1.Runtime]runtimeHost{
	// The toolkit writes its runtimes to a drop-in file that containerd's
	// config imports (it adds the import), with the CRI plugin's section
	// of the effective config in it (config version 2, or 3 for
	// containerd 2.x, whose plugin is io.containerd.cri.v1.runtime), and
	// sends containerd SIGHUP through the socket, which restarts it. It
	// removes the file when it stops (nvidia-container-toolkit v1.20.0,
	// pkg/config/engine/containerd and cmd/nvidia-ctk-installer/container).
	gpuv1.RuntimeContainerd: {
		config: "/etc/containerd/config.toml", configEnv: []string{"RUNTIME_CONFIG", "CONTAINERD_CONFIG"},
		dropIn: "/etc/containerd/conf.d/99-nvidia.toml", dropInEnv: []string{"RUNTIME_DROP_IN_CONFIG"},
		socket: "/run/containerd/containerd.sock", socketEnv: []string{"RUNTIME_SOCKET", "CONTAINERD_SOCKET"},
	},
	// CRI-O without handlers (state.HasRuntimeHandler): the hook mode
	// writes an OCI hook that CRI-O picks up without a restart, into the
	// hooks directory CRI-O reads by default (v1.20's own default is the
	// config mode, so hook is set). The config is only read, to find the
	// low-level runtimes.
	gpuv1.RuntimeCRIO: {
		config: "/etc/crio/crio.conf.d/99-nvidia.conf", configEnv: []string{"RUNTIME_CONFIG"},
		hooks: "/usr/share/containers/oci/hooks.d", hooksEnv: []string{"CRIO_HOOKS_DIR"},
	},
}

// crioHandlers is CRI-O where the toolkit registers its handlers (config
// mode, nvidia-container-toolkit v1.20.0
// cmd/nvidia-ctk-installer/container/runtime/crio/crio.go): it writes the
// nvidia, nvidia-cdi and nvidia-legacy runtimes to a drop-in under
// crio.conf.d, at the path NVIDIA's operator gives it (gpu-operator v26.7.0
// controllers/object_controls.go:80, 99-nvidia.conf, so that a node moved
// from NVIDIA's keeps one file), reads the effective config from `crio
// status config` run in the host's root, else from the main config, and
// restarts CRI-O with `systemctl restart crio` in the host's root
// (RUNTIME_RESTART_MODE systemd, CRI-O's default there; running containers
// stay, under their conmon). When it stops it leaves the drop-in: removed,
// pods started with a handler could no longer be stopped (the toolkit's
// commit 0f9036cb), and the binaries it names stay too.
var crioHandlers = runtimeHost{
	config: "/etc/crio/crio.conf", configEnv: []string{"RUNTIME_CONFIG"},
	dropIn: "/etc/crio/crio.conf.d/99-nvidia.conf", dropInEnv: []string{"RUNTIME_DROP_IN_CONFIG"},
}

// hostOf is where a runtime keeps its files, as the toolkit configures it.
func hostOf(runtime gpuv1.Runtime, handlers bool) runtimeHost {
	if runtime == gpuv1.RuntimeCRIO && handlers {
		return crioHandlers
	}
	return runtimes[runtime]
}

// moved reports whether the toolkit render translates an env variable from
// a host path into a container path: the user's values of the variables
// in the runtimes' table choose the host paths, and the container sees
// them under the mounts.
func moved(name string) bool {
	for _, host := range append(slices.Collect(maps.Values(runtimes)), crioHandlers) {
		if slices.Contains(host.configEnv, name) || slices.Contains(host.socketEnv, name) || slices.Contains(host.hooksEnv, name) ||
			slices.Contains(host.dropInEnv, name) {
			return true
		}
	}
	return name == envDropInHostPath || name == envConfigSource || name == envConfigSources || name == envNRISocket
}

// The toolkit's variables that name host paths for the files it reads or
// writes through the mounts: the drop-in's host path, which goes into the
// config's imports, and the config sources, whose file= entries it reads
// in the container.
const (
	envDropInHostPath = "RUNTIME_DROP_IN_CONFIG_HOST_PATH"
	envConfigSource   = "RUNTIME_CONFIG_SOURCE"
	envConfigSources  = "RUNTIME_CONFIG_SOURCES"
	envNRISocket      = "NRI_SOCKET"
)

// nriSocketDir is where the toolkit's container sees the runtime's NRI
// socket directory.
const nriSocketDir = "/runtime/nri-sock-dir"

// nriSettings are the env, mounts and volumes of the toolkit's NRI plugin
// (nvidia-container-toolkit v1.20.0, cmd/nvidia-ctk-installer/main.go:
// --enable-nri-plugin, --nri-socket, default /var/run/nri/nri.sock,
// --nri-namespace, which may receive management devices): it connects to
// the runtime's NRI socket and injects the CDI devices a pod's
// nvidia.cdi.k8s.io annotations name, and configures no runtime at all
// (container/runtime/runtime.go), so nothing of the runtime's config or
// socket is mounted.
func nriSettings(runtime gpuv1.Runtime, user []gpuv1.EnvVar) ([]corev1.EnvVar, []corev1.VolumeMount, []corev1.Volume) {
	socket := firstSet(user, []string{envNRISocket}, "/var/run/nri/nri.sock")
	return []corev1.EnvVar{
			{Name: "RUNTIME", Value: string(runtime)},
			{Name: "ENABLE_NRI_PLUGIN", Value: "true"},
			{Name: envNRISocket, Value: path.Join(nriSocketDir, path.Base(socket))},
			render.FieldEnv("NRI_NAMESPACE", "metadata.namespace"),
		},
		[]corev1.VolumeMount{{Name: "nri-socket", MountPath: nriSocketDir}},
		[]corev1.Volume{render.HostPathVolume("nri-socket", path.Dir(socket), corev1.HostPathDirectoryOrCreate)}
}

// runtimeSettings returns the env, mounts and volumes that let the toolkit
// configure a node's container runtime, following the host paths the
// user's env names; handlers says whether it registers runtime handlers
// there (state.HasRuntimeHandler).
func runtimeSettings(runtime gpuv1.Runtime, handlers bool, runtimeClass string, user []gpuv1.EnvVar) (
	[]corev1.EnvVar, []corev1.VolumeMount, []corev1.Volume) {
	host := hostOf(runtime, handlers)
	env := []corev1.EnvVar{
		{Name: "RUNTIME", Value: string(runtime)},
		// The runtime handler the toolkit registers, which the RuntimeClass
		// names; NVIDIA_RUNTIME_NAME is the name every runtime reads.
		{Name: "NVIDIA_RUNTIME_NAME", Value: runtimeClass},
	}
	var mounts []corev1.VolumeMount
	var volumes []corev1.Volume
	add := func(name, hostFile, dir string, kind corev1.HostPathType, envNames ...string) {
		inside := path.Join(dir, path.Base(hostFile))
		for _, e := range envNames {
			env = append(env, corev1.EnvVar{Name: e, Value: inside})
		}
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: dir})
		volumes = append(volumes, render.HostPathVolume(name, path.Dir(hostFile), kind))
	}
	config := firstSet(user, host.configEnv, host.config)
	add("runtime-config", config, configDir, corev1.HostPathDirectoryOrCreate, host.configEnv...)
	if host.dropIn != "" {
		// The drop-in's host path is what the config imports: the
		// toolkit would otherwise import the path it sees.
		dropIn := firstSet(user, host.dropInEnv, host.dropIn)
		add("runtime-drop-in", dropIn, dropInDir, corev1.HostPathDirectoryOrCreate, host.dropInEnv...)
		env = append(env, corev1.EnvVar{Name: envDropInHostPath, Value: dropIn})
	}
	for _, name := range []string{envConfigSources, envConfigSource} {
		if v := firstSet(user, []string{name}, ""); v != "" {
			env = append(env, corev1.EnvVar{Name: name, Value: hostSources(v)})
		}
	}
	if host.socket != "" {
		// The socket's directory must exist: the runtime created it.
		add("runtime-socket", firstSet(user, host.socketEnv, host.socket), socketDir, corev1.HostPathDirectory, host.socketEnv...)
	}
	if host.hooks != "" {
		dir := firstSet(user, host.hooksEnv, host.hooks)
		env = append(env, corev1.EnvVar{Name: "CRIO_CONFIG_MODE", Value: "hook"}, corev1.EnvVar{Name: "CRIO_HOOKS_DIR", Value: hooksDir})
		mounts = append(mounts, corev1.VolumeMount{Name: "runtime-hooks", MountPath: hooksDir})
		volumes = append(volumes, render.HostPathVolume("runtime-hooks", dir, corev1.HostPathDirectoryOrCreate))
	}
	switch {
	case runtime == gpuv1.RuntimeContainerd:
		env = append(env, corev1.EnvVar{Name: "CONTAINERD_RUNTIME_CLASS", Value: runtimeClass})
	case runtime == gpuv1.RuntimeCRIO && handlers:
		env = append(env, corev1.EnvVar{Name: "CRIO_CONFIG_MODE", Value: "config"},
			corev1.EnvVar{Name: "RUNTIME_RESTART_MODE", Value: "systemd"})
	}
	return env, mounts, volumes
}

// firstSet returns the value of the first of names the user sets, or def.
func firstSet(user []gpuv1.EnvVar, names []string, def string) string {
	for _, n := range names {
		for _, e := range user {
			if e.Name == n && e.Value != "" {
				return e.Value
			}
		}
	}
	return def
}

// hostSources rewrites the file= entries of a config source list (such as
// "command,file=/etc/containerd/config.toml") to where the container sees
// the host's files: the toolkit reads them in the container, under the
// host's / at HostRoot.
func hostSources(list string) string {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		if file, ok := strings.CutPrefix(strings.TrimSpace(p), "file="); ok && path.IsAbs(file) {
			parts[i] = "file=" + path.Join(HostRoot, file)
		}
	}
	return strings.Join(parts, ",")
}
