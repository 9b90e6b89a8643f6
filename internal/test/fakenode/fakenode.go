package fakenode

import (
	"cmp"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/pluginconfig"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/driver"
)

// Annotations that describe a fake GPU node.
const (
	prefix = "sim.gpu-operator.io/"
	// AnnotationGPUs is how many GPUs the node has; 8 when absent.
	AnnotationGPUs = prefix + "gpus"
	// AnnotationUnhealthyGPUs is how many of them the device plugin
	// reports unhealthy: registered (capacity) but not allocatable.
	AnnotationUnhealthyGPUs = prefix + "unhealthy-gpus"
	// AnnotationUnhealthyUntil says what heals them: "device-plugin-restart"
	// (a sticky unhealthy mark the plugin drops when it restarts),
	// "driver-reload", "reboot", or "never" (the default).
	AnnotationUnhealthyUntil = prefix + "unhealthy-until"
	// AnnotationUnhealthyAnchor is what the healing waits to see replaced:
	// the UID of the pod, or the boot ID, the GPUs went bad under. The
	// simulator sets it.
	AnnotationUnhealthyAnchor = prefix + "unhealthy-anchor"
	// AnnotationHostDriver is the version of a driver installed on the
	// host; absent when the host has none.
	AnnotationHostDriver = prefix + "host-driver"
	// AnnotationRuntime describes the node's container runtime: "legacy"
	// reports no runtime handlers (containerd 1.7), "never-configured"
	// never loads the NVIDIA handler, whatever the toolkit does.
	AnnotationRuntime = prefix + "runtime"
	// AnnotationContainerdConfig and AnnotationContainerdSocket are where
	// the node's containerd keeps its config and socket, when not at the
	// stock paths (k3s, RKE2, microk8s).
	AnnotationContainerdConfig = prefix + "containerd-config"
	AnnotationContainerdSocket = prefix + "containerd-socket"
	// AnnotationKubeletRoot is the kubelet's --root-dir, when not
	// /var/lib/kubelet: the device plugin registers only through its
	// device-plugins directory.
	AnnotationKubeletRoot = prefix + "kubelet-root"
	// AnnotationDriverDir is where the host's own driver keeps its files,
	// when not under / (GKE's Container-Optimized OS:
	// /home/kubernetes/bin/nvidia): operands find it only there.
	AnnotationDriverDir = prefix + "driver-dir"
	// AnnotationReadOnlyUsr marks a host whose /usr is read-only (GKE's
	// Container-Optimized OS): the toolkit cannot install under it.
	AnnotationReadOnlyUsr = prefix + "read-only-usr"
	// AnnotationNFD is "external" where the cluster runs its own NFD for
	// the node; otherwise only the operator's nfd-worker on the node
	// publishes GFD's labels.
	AnnotationNFD = prefix + "nfd"
)

// The stock containerd paths.
const (
	stockConfig = "/etc/containerd/config.toml"
	stockSocket = "/run/containerd/containerd.sock"
	// stockDropIn is where containerd's config imports drop-ins from once
	// the toolkit added the import: the toolkit writes its runtimes there.
	stockDropIn = "/etc/containerd/conf.d/99-nvidia.toml"
	// crioDropIn is a drop-in CRI-O reads from its crio.conf.d.
	crioDropIn = "/etc/crio/crio.conf.d/99-nvidia.conf"
)

// Profile is what a fake node is.
type Profile struct {
	GPUs, Unhealthy int
	HostDriver      string
	Legacy          bool
	NeverConfigured bool
	ExternalNFD     bool
	Config, Socket  string
	KubeletRoot     string
	DriverDir       string
	ReadOnlyUsr     bool
}

// ProfileOf reads a node's profile from its annotations.
func ProfileOf(n *corev1.Node) Profile {
	a := n.Annotations
	p := Profile{GPUs: 8, HostDriver: a[AnnotationHostDriver], Config: stockConfig, Socket: stockSocket,
		KubeletRoot: cmp.Or(a[AnnotationKubeletRoot], "/var/lib/kubelet"), DriverDir: a[AnnotationDriverDir],
		ReadOnlyUsr: a[AnnotationReadOnlyUsr] == "true"}
	if g, err := strconv.Atoi(a[AnnotationGPUs]); err == nil && g >= 0 {
		p.GPUs = g
	}
	if u, err := strconv.Atoi(a[AnnotationUnhealthyGPUs]); err == nil && u >= 0 {
		p.Unhealthy = min(u, p.GPUs)
	}
	p.Legacy = a[AnnotationRuntime] == "legacy"
	p.NeverConfigured = a[AnnotationRuntime] == "never-configured"
	p.ExternalNFD = a[AnnotationNFD] == "external"
	if c := a[AnnotationContainerdConfig]; c != "" {
		p.Config = c
	}
	if s := a[AnnotationContainerdSocket]; s != "" {
		p.Socket = s
	}
	return p
}

// Recovery modes of unhealthy GPUs (AnnotationUnhealthyUntil).
const (
	HealOnDevicePluginRestart = "device-plugin-restart"
	HealOnDriverReload        = "driver-reload"
	HealOnReboot              = "reboot"
	HealNever                 = "never"
)

// Result is what changed on the node: its labels or annotations (an
// update), its status (a status update).
type Result struct {
	Labels, Status bool
}

// Apply makes the node reflect the operator's pods on it: the pods of
// every state on the node, live ones only. It changes the node in place
// and says whether its labels (an update) or its status (a status
// update) changed.
func Apply(n *corev1.Node, pods []*corev1.Pod, configs ConfigLookup) Result {
	p := ProfileOf(n)
	running := func(s state.Name) *corev1.Pod {
		for _, pod := range pods {
			if pod.DeletionTimestamp == nil && pod.Labels[render.LabelState] == string(s) && PodReady(pod) {
				return pod
			}
		}
		return nil
	}
	var r Result
	r.Labels = heal(n, &p, running)
	r.Labels = loseMIG(n, p, running(state.Driver)) || r.Labels
	r.Labels = applyMIG(n, p, running(state.MIGManager), running(state.Driver), configs) || r.Labels
	r.Labels = enumerateDRA(n, p, running(state.DRADriver)) || r.Labels
	plugin := running(state.DevicePlugin)
	if plugin != nil && !pluginWorks(p, plugin) {
		plugin = nil
	}
	sharing, starts := SharingOf(plugin, configs)
	if !starts {
		plugin = nil // it fails on its configuration file
	}
	if sharing.Strategy == "mps" && running(state.MPSControlDaemon) == nil {
		// The plugin checks the MPS daemon is up when it starts, and
		// fails without it (k8s-device-plugin v0.20.0,
		// internal/plugin/mps.go: waitForDaemon).
		plugin = nil
	}
	r.Status = advertise(n, p, plugin, sharing)
	r.Status = handlers(n, p, running(state.ContainerToolkit)) || r.Status
	if NFDPublishes(n, pods) {
		gfd := running(state.GPUFeatureDiscovery)
		gfdSharing, starts := SharingOf(gfd, configs)
		if !starts {
			gfd = nil
		}
		r.Labels = labelGFD(n, p, gfd, gfdSharing) || r.Labels
	}
	return r
}

// heal makes unhealthy GPUs healthy again once what their recovery mode
// waits for happened: the device plugin pod, the driver pod, or the boot
// they went bad under was replaced. The first look records that anchor.
// It says whether the node's annotations changed.
func heal(n *corev1.Node, p *Profile, running func(state.Name) *corev1.Pod) bool {
	a := n.Annotations
	anchor, anchored := a[AnnotationUnhealthyAnchor]
	if p.Unhealthy == 0 {
		delete(a, AnnotationUnhealthyAnchor)
		return anchored
	}
	var now string
	switch a[AnnotationUnhealthyUntil] {
	case HealOnDevicePluginRestart:
		// The plugin that serves the node: the device plugin, or on a
		// node in allocation mode dra the DRA driver's.
		if pod := running(state.DevicePlugin); pod != nil {
			now = string(pod.UID)
		} else if pod := running(state.DRADriver); pod != nil {
			now = string(pod.UID)
		}
	case HealOnDriverReload:
		if pod := running(state.Driver); pod != nil {
			now = string(pod.UID)
		}
	case HealOnReboot:
		now = n.Status.NodeInfo.BootID
	}
	switch {
	case now == "" || now == anchor:
		return false
	case !anchored:
		a[AnnotationUnhealthyAnchor] = now
		return true
	}
	delete(a, AnnotationUnhealthyGPUs)
	delete(a, AnnotationUnhealthyAnchor)
	p.Unhealthy = 0
	return true
}

// The resources the device plugin advertises: shared GPUs under their own
// name when the configuration renames them.
const (
	resourceGPU    corev1.ResourceName = "nvidia.com/gpu"
	resourceShared corev1.ResourceName = "nvidia.com/gpu.shared"
)

// advertise sets the node's GPU resources as the kubelet does while the
// device plugin is registered: the node's whole GPUs and MIG devices as
// its MIG strategy names them (nvidia.com/gpu, nvidia.com/mig-<profile>),
// times the replicas of a shared configuration, whole GPUs under their
// own name when the configuration renames them; the unhealthy ones in
// capacity but not in allocatable. A resource the plugin does not
// advertise (any more) the kubelet keeps at 0.
func advertise(n *corev1.Node, p Profile, plugin *corev1.Pod, s pluginconfig.Sharing) bool {
	type amounts struct{ capacity, allocatable int64 }
	want := map[corev1.ResourceName]amounts{}
	if plugin != nil {
		res := migResources(layoutOf(n, p.GPUs), migStrategyOf(plugin), s.Replicas)
		for name, c := range res {
			a := c
			if name == resourceGPU {
				a = max(c-int64(p.Unhealthy*s.Replicas), 0)
				if s.Renamed {
					name = resourceShared
				}
			}
			want[name] = amounts{c, a}
		}
		if len(want) == 0 && res != nil {
			want[resourceGPU] = amounts{} // registered, with no device
		}
	}
	names := slices.Collect(maps.Keys(want))
	for name := range n.Status.Capacity {
		if gating.IsGPUResource(name) && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	changed := false
	for _, name := range names {
		w, ok := want[name]
		changed = set(n, name, w.capacity, w.allocatable, ok) || changed
	}
	return changed
}

// set sets a resource's capacity and allocatable, and says whether they
// changed; one never advertised and not wanted stays absent.
func set(n *corev1.Node, name corev1.ResourceName, capacity, allocatable int64, wanted bool) bool {
	c, hadC := n.Status.Capacity[name]
	a, hadA := n.Status.Allocatable[name]
	if (!hadC && !hadA && !wanted) || (hadC && hadA && c.Value() == capacity && a.Value() == allocatable) {
		return false // never advertised, or advertised as wanted
	}
	for _, l := range []*corev1.ResourceList{&n.Status.Allocatable, &n.Status.Capacity} {
		if *l == nil {
			*l = corev1.ResourceList{}
		}
	}
	n.Status.Capacity[name] = *resource.NewQuantity(capacity, resource.DecimalSI)
	n.Status.Allocatable[name] = *resource.NewQuantity(allocatable, resource.DecimalSI)
	return true
}

// handlers sets the runtime handlers a modern kubelet reports: runc, plus
// the NVIDIA runtime once a ready toolkit configured the runtime's own
// config through its own socket.
func handlers(n *corev1.Node, p Profile, toolkit *corev1.Pod) bool {
	if p.Legacy {
		return false
	}
	want := []string{"", "runc"}
	if name := configuredHandler(p, toolkit); name != "" && !p.NeverConfigured {
		want = append(want, name, "nvidia-cdi", "nvidia-legacy")
	}
	have := make([]string, len(n.Status.RuntimeHandlers))
	for i, h := range n.Status.RuntimeHandlers {
		have[i] = h.Name
	}
	if slices.Equal(have, want) {
		return false
	}
	n.Status.RuntimeHandlers = nil
	for _, name := range want {
		n.Status.RuntimeHandlers = append(n.Status.RuntimeHandlers, corev1.NodeRuntimeHandler{Name: name})
	}
	return true
}

// pluginWorks reports whether a ready device plugin pod registers with the
// node's kubelet and loads NVML: its device-plugins directory is the
// kubelet's, and a host's driver is mounted from where the host keeps it.
func pluginWorks(p Profile, pod *corev1.Pod) bool {
	if hostPathOf(pod, "device-plugins") != path.Join(p.KubeletRoot, "device-plugins") {
		return false
	}
	switch {
	case p.DriverDir != "":
		return hostPathOf(pod, "driver-root") == p.DriverDir
	case p.HostDriver != "":
		return hostPathOf(pod, "driver-root") == "/"
	}
	return true
}

// hostPathOf is the host path of a pod's volume, "" for none.
func hostPathOf(pod *corev1.Pod, volume string) string {
	for _, v := range pod.Spec.Volumes {
		if v.Name == volume && v.HostPath != nil {
			return v.HostPath.Path
		}
	}
	return ""
}

// configuredHandler is the handler a toolkit pod registers with the node's
// runtime: its runtime name, if it writes the node's config file and
// reaches the runtime through its mounts; "" otherwise.
func configuredHandler(p Profile, pod *corev1.Pod) string {
	if pod == nil || len(pod.Spec.Containers) == 0 {
		return ""
	}
	env := map[string]string{}
	for _, e := range pod.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	switch env["RUNTIME"] {
	case "containerd":
		// The toolkit (v1.20) writes its runtimes to the drop-in, which
		// the config must import by its host path, and signals the
		// runtime through its socket.
		if !reaches(pod, env["RUNTIME_CONFIG"], p.Config) || !reaches(pod, env["RUNTIME_SOCKET"], p.Socket) ||
			!reaches(pod, env["RUNTIME_DROP_IN_CONFIG"], stockDropIn) || env["RUNTIME_DROP_IN_CONFIG_HOST_PATH"] != stockDropIn {
			return ""
		}
	case "crio":
		// In config mode it writes a drop-in CRI-O reads, and restarts
		// CRI-O with systemctl chrooted into the host's root; the hook
		// mode registers no handler.
		if env["CRIO_CONFIG_MODE"] != "config" || !reaches(pod, env["RUNTIME_DROP_IN_CONFIG"], crioDropIn) ||
			env["RUNTIME_RESTART_MODE"] != "systemd" || hostPathAt(pod, env["HOST_ROOT_MOUNT"]) != "/" {
			return ""
		}
	default:
		return ""
	}
	// It installs the runtime where the host can keep and run it, and
	// finds the driver where the host keeps it.
	install := hostPathOf(pod, "toolkit-install-dir")
	if p.ReadOnlyUsr && (install == "/usr" || strings.HasPrefix(install, "/usr/")) {
		return ""
	}
	if p.DriverDir != "" && hostPathOf(pod, "driver-root") != p.DriverDir {
		return ""
	}
	return env["NVIDIA_RUNTIME_NAME"]
}

// hostPathAt is the host path mounted at a path of the container; "" for
// none.
func hostPathAt(pod *corev1.Pod, at string) string {
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		if m.MountPath != at || at == "" {
			continue
		}
		for _, v := range pod.Spec.Volumes {
			if v.Name == m.Name && v.HostPath != nil {
				return v.HostPath.Path
			}
		}
	}
	return ""
}

// reaches reports whether a path in the container is a host file, through
// a hostPath mount of its directory.
func reaches(pod *corev1.Pod, inside, host string) bool {
	if inside == "" || path.Base(inside) != path.Base(host) {
		return false
	}
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		if m.MountPath != path.Dir(inside) {
			continue
		}
		for _, v := range pod.Spec.Volumes {
			if v.Name == m.Name && v.HostPath != nil && v.HostPath.Path == path.Dir(host) {
				return true
			}
		}
	}
	return false
}

// DriverCheck returns the status a driver pod on the node has when the
// host runs its own driver: its host-driver check exited, saying so, and
// the kubelet backs off restarting it. Nil when the host has no driver.
func DriverCheck(n *corev1.Node, pod *corev1.Pod) *corev1.PodStatus {
	p := ProfileOf(n)
	if p.HostDriver == "" || pod.Labels[render.LabelState] != string(state.Driver) {
		return nil
	}
	msg := "the host runs NVIDIA driver " + p.HostDriver + " (/usr/bin/nvidia-smi answers)\n"
	now := metav1.Now()
	return &corev1.PodStatus{
		Phase:      corev1.PodPending,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: now}},
		InitContainerStatuses: []corev1.ContainerStatus{{
			Name:  driver.HostDriverCheckName,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: driver.HostDriverExitCode, Message: msg, FinishedAt: now,
			}},
			RestartCount: 1,
		}},
	}
}

// PodReady reports whether a pod's Ready condition is true.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
