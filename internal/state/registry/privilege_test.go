package registry

import (
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/cudaworkload"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
)

// privileges is what an operand pod may have beyond a plain pod. An
// operand gaining anything not listed here fails the test: widen the table
// only with a reason.
type privileges struct {
	privileged bool     // a container runs privileged
	hostPID    bool     // the pod shares the host's PID namespace
	hostIPC    bool     // the pod shares the host's IPC namespace
	caps       []string // capabilities added
	hostPaths  []string // host paths mounted
	token      bool     // the ServiceAccount token is mounted
}

var privilegeTable = map[string]privileges{
	// Loads kernel modules and mounts the driver root for the host; writes
	// the GSP firmware into that root; reads the host's / (read-only) to
	// find a host driver; RHEL builds read the host's subscription.
	"nvidia-driver-daemonset": {privileged: true, hostPID: true, hostPaths: []string{
		"/", "/etc/pki/entitlement", "/etc/rhsm", "/etc/yum.repos.d/redhat.repo", "/run/nvidia",
		"/run/nvidia/driver/lib/firmware", "/sys/module/firmware_class/parameters/path", "/var/log"}},
	// Writes the runtime's drop-in and imports it from the config (or
	// installs its OCI hook, on CRI-O without CDI) and signals containerd
	// to reload, or restarts CRI-O through the host's systemd; runs the
	// host's containerd or crio (host / read-only) to read its effective
	// config; points the runtime at the driver root; writes the CDI spec
	// of management containers from the driver's files.
	"nvidia-container-toolkit-daemonset": {privileged: true, hostPID: true, hostPaths: []string{
		"/", "/etc/containerd", "/etc/containerd/conf.d", "/etc/crio", "/etc/crio/crio.conf.d", "/run/containerd", "/run/nvidia/driver",
		"/run/nvidia/toolkit", "/usr/local/nvidia", "/var/run/cdi"}},
	// Opens every GPU device to health-check it; registers with the kubelet;
	// loads NVML from the driver root (the host's /, read-only, for a host
	// driver); links /dev/char to the driver's device nodes with the
	// toolkit's installed nvidia-ctk; writes its CDI spec.
	"nvidia-device-plugin-daemonset": {privileged: true, hostPaths: []string{
		"/", "/dev/char", "/run/nvidia/driver", "/run/nvidia/mps", "/run/nvidia/mps/shm", "/usr/local/nvidia",
		"/var/lib/kubelet/device-plugins", "/var/run/cdi"}},
	// Starts MPS's control daemons for the node's GPUs, in the host's PID
	// namespace, and mounts a tmpfs under MPS's root for the host
	// (Bidirectional), which needs privilege.
	// With CDI it waits for the management spec (read-only).
	"nvidia-device-plugin-mps-control-daemon": {privileged: true, hostPID: true, hostPaths: []string{
		"/run/nvidia/mps", "/run/nvidia/mps/shm", "/usr/local/nvidia", "/var/run/cdi"}},
	// Partitions the GPUs (NVML through the driver root); stops the host's
	// GPU clients and may reboot the node, through the host's / and PID
	// namespace, as NVIDIA's manifests run it; labels its node.
	// With CDI it writes the management CDI spec again after a change,
	// and waits for it to name the driver that runs.
	"nvidia-mig-manager": {privileged: true, hostPID: true, hostIPC: true, token: true, hostPaths: []string{
		"/", "/run/nvidia/driver", "/sys", "/usr/local/nvidia", "/var/run/cdi"}},
	// NVIDIA's DRA driver (dra-driver-nvidia-gpu 95932046): registers with
	// the kubelet and serves its DRA socket under the plugins directory
	// (Bidirectional); loads NVML from the driver root (the host's / for a
	// host's driver) and reads the host's / (read-only, --host-root) for
	// the device nodes; writes the claims' CDI specs; publishes its node's
	// ResourceSlices with its token. Its wait for the driver reads the
	// driver root's parent (/run/nvidia), where the root's mount shows.
	"nvidia-dra-driver-kubelet-plugin": {privileged: true, token: true, hostPaths: []string{
		"/", "/run/nvidia", "/run/nvidia/driver", "/var/lib/kubelet/plugins", "/var/lib/kubelet/plugins_registry", "/var/run/cdi"}},
	// Watches ComputeDomains and writes their IMEX DaemonSets.
	"nvidia-dra-driver-controller": {token: true},
	// NVIDIA's standalone DCGM host engine runs privileged, as NVIDIA's
	// manifest runs it (gpu-operator v26.7.0 assets/state-dcgm/
	// 0400_dcgm.yml): it manages the GPUs' profiling and health.
	"nvidia-dcgm": {privileged: true},
	// DCGM profiling needs SYS_ADMIN; per-pod metrics need pod-resources.
	// Only where the policy asks: the host's PID namespace
	// (dcgmExporter.hostPID) and the job files a workload manager writes
	// (dcgmExporter.hpcJobMapping), read-only.
	"nvidia-dcgm-exporter": {caps: []string{"SYS_ADMIN"}, hostPID: true, hostPaths: []string{"/var/lib/dcgm-exporter/job-mapping",
		"/var/lib/kubelet/pod-resources"}},
	// Writes its feature file where nfd-worker reads it; reads PCI config
	// space under the host's /sys, which needs privilege.
	"gpu-feature-discovery": {privileged: true, hostPaths: []string{"/etc/kubernetes/node-feature-discovery/features.d", "/sys"}},
	// Reads the node's hardware and OS, read-only; reports to the API.
	"nfd-worker": {token: true, hostPaths: []string{"/boot", "/etc/kubernetes/node-feature-discovery/features.d",
		"/etc/os-release", "/lib", "/proc/swaps", "/sys", "/usr/lib"}},
	// The CUDA workload: one GPU through the device plugin, unprivileged,
	// no token (gpu-operator v26.7.0 validator/manifests/
	// plugin-workload-validation.yaml).
	"nvidia-cuda-validator": {},
	"nfd-master":            {token: true},
	"nfd-gc":                {token: true},
}

func TestPrivileges(t *testing.T) {
	graph, err := Graph()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]privileges{}
	for _, cp := range policies(t) {
		for _, s := range graph.States() {
			for _, o := range renderObjects(t, graph, s, cp) {
				name, pod := podOf(o)
				if pod == nil {
					continue
				}
				if s.Name == state.Driver {
					name = "nvidia-driver-daemonset" // one entry for every OS pool
				}
				name = withoutVariant(name, cp) // one entry for every variant
				// Across policies (runtimes, options) the union is what
				// counts; policies come from a map, in no fixed order.
				seen[name] = merge(seen[name], privilegesOf(pod))
			}
		}
		if p := workloadPod(cp); cudaworkload.Operand.Enabled(cudaworkload.Operand{}, &cp.Spec) {
			seen[cudaworkload.App] = merge(seen[cudaworkload.App], privilegesOf(&p.Spec))
		}
	}
	g := NewWithT(t)
	g.Expect(seen).To(HaveLen(len(privilegeTable)), "every workload has a row in the table")
	for name, want := range privilegeTable {
		g.Expect(seen).To(HaveKeyWithValue(name, want), "privileges of %s", name)
	}
}

// withoutVariant drops the suffix a node variant adds to a DaemonSet name.
func withoutVariant(name string, cp *gpuv1.ClusterPolicy) string {
	for _, v := range fixture.Variants(cp) {
		for _, d := range []state.Dimensions{{DriverRoot: true, Runtime: true, DevicePluginConfig: true}, {Runtime: true, DevicePluginConfig: true},
			{DriverRoot: true, Runtime: true}, {DriverRoot: true}, {Runtime: true}} {
			if suffix := d.Project(v).Suffix(); suffix != "" {
				name = strings.TrimSuffix(name, suffix)
			}
		}
	}
	return name
}

func podOf(o any) (string, *corev1.PodSpec) {
	switch w := o.(type) {
	case *appsv1.DaemonSet:
		return w.Name, &w.Spec.Template.Spec
	case *appsv1.Deployment:
		return w.Name, &w.Spec.Template.Spec
	}
	return "", nil
}

func privilegesOf(pod *corev1.PodSpec) privileges {
	// Operand ServiceAccounts do not mount tokens; a pod must ask for one.
	p := privileges{hostPID: pod.HostPID, hostIPC: pod.HostIPC, token: pod.AutomountServiceAccountToken != nil && *pod.AutomountServiceAccountToken}
	for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
		if sc := c.SecurityContext; sc != nil {
			p.privileged = p.privileged || (sc.Privileged != nil && *sc.Privileged)
			if sc.Capabilities != nil {
				for _, c := range sc.Capabilities.Add {
					p.caps = append(p.caps, string(c))
				}
			}
		}
	}
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			p.hostPaths = append(p.hostPaths, v.HostPath.Path)
		}
	}
	slices.Sort(p.hostPaths)
	return p
}

// merge is what a pod may have under either of two policies.
func merge(a, b privileges) privileges {
	return privileges{
		privileged: a.privileged || b.privileged,
		hostPID:    a.hostPID || b.hostPID,
		hostIPC:    a.hostIPC || b.hostIPC,
		caps:       union(a.caps, b.caps),
		hostPaths:  union(a.hostPaths, b.hostPaths),
		token:      a.token || b.token,
	}
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}
