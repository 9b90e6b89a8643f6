package driver

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"slices"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// The driver pod's containers.
const (
	// ContainerName is the driver container, as users know it.
	ContainerName = "nvidia-driver-ctr"
	// HostDriverCheckName is the init container that looks for a driver
	// installed on the host before the driver container starts.
	HostDriverCheckName = "host-driver-check"
	// UnloadNouveauName is the init container that unloads nouveau before
	// the driver container loads nvidia.
	UnloadNouveauName = "unload-nouveau"
	// PeermemName is the container that loads nvidia-peermem for
	// GPUDirect RDMA, as users know it.
	PeermemName = "nvidia-peermem-ctr"
	// HostDriverExitCode is how the check says the host runs its own
	// driver; its termination message says which. Any other failure of the
	// check is an ordinary crash.
	HostDriverExitCode = 42
)

// Where the driver pod sees things.
const (
	hostRoot = "/host"
	reposDir = "/etc/gpu-operator/repos"
	certsDir = "/etc/gpu-operator/certs"
	// moduleParamsDir is where the driver image reads module parameter
	// files (nvidia.conf, nvidia-uvm.conf, ...): its driver sources live
	// there too, so each file is mounted on its own.
	moduleParamsDir = "/drivers"
)

// AnnotationModuleParams is on the driver pod template of a pool with
// kernel module parameters: the digest of their files, part of the
// template's hash.
const AnnotationModuleParams = gpuv1.OperatorAnnotationPrefix + "kernel-module-config"

// hostDriverCheck exits HostDriverExitCode when the host's own nvidia-smi
// answers, as NVIDIA's driver manager and validator decide (a driver
// container installs nothing under the host's /usr/bin). The driver image
// itself would not notice: it unloads an idle host driver and replaces it,
// or crash-loops when the host's driver is in use. A wedged GPU can hang
// nvidia-smi: a minute is its answer's limit.
const hostDriverCheck = `smi=/host/usr/bin/nvidia-smi
if [ -s "$smi" ] || [ -L "$smi" ]; then
  if version=$(timeout 60 chroot /host /usr/bin/nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null) && [ -n "$version" ]; then
    version=$(echo "$version" | head -n 1)
    echo "the host runs NVIDIA driver $version (/usr/bin/nvidia-smi answers)" | tee /dev/termination-log
    exit 42
  fi
  echo "the host has /usr/bin/nvidia-smi but it does not answer: installing the driver container"
  exit 0
fi
echo "no NVIDIA driver on the host: installing the driver container"
`

// unloadNouveau unloads nouveau, which holds the GPUs where the host loaded
// it: nvidia then never binds them, and the driver container crash-loops
// after its startup budget. The driver images leave nouveau alone (they run
// nvidia-installer --no-nouveau-check); NVIDIA's driver manager unloads it
// before every install, by /sys/module/nouveau/refcnt and delete_module,
// failing its init container when the module is in use. rmmod is that
// syscall.
const unloadNouveau = `if [ -e /sys/module/nouveau/refcnt ]; then
  echo "unloading nouveau, which keeps the NVIDIA driver from the GPUs"
  if ! rmmod nouveau; then
    echo "nouveau is loaded and in use (a console or display on a GPU): the NVIDIA driver cannot load. Blacklist it on the host (modprobe.blacklist=nouveau on the kernel command line) and reboot" | tee /dev/termination-log
    exit 1
  fi
fi`

// withConfigs adds the policy's repository files and CA certificates to the
// image's own directories, then starts the driver: copied rather than
// mounted over the directories, so the image's files stay.
const withConfigs = `for f in ` + reposDir + `/*; do
  [ -f "$f" ] || continue
  if [ -d /etc/yum.repos.d ]; then cp "$f" /etc/yum.repos.d/; else cp "$f" /etc/apt/sources.list.d/; fi
done
for f in ` + certsDir + `/*; do
  [ -f "$f" ] || continue
  if [ -d /etc/pki/ca-trust/extracted/pem ]; then cp "$f" /etc/pki/ca-trust/extracted/pem/; else cp "$f" /usr/local/share/ca-certificates/; fi
done
exec nvidia-driver "$@"`

// podSpec is the driver pod for nodes of one OS (empty for a digest, which
// serves every OS). The driver container loads kernel modules, so it is
// privileged and shares the host's PID namespace; /run/nvidia is shared
// both ways so that the driver root it mounts at /run/nvidia/driver is
// seen by the host and by the other operands.
func podSpec(cp *gpuv1.ClusterPolicy, pool state.DriverPool, os state.OSRelease) (corev1.PodSpec, error) {
	spec, params := pool.Driver, pool.ModuleParams
	privileged := &corev1.SecurityContext{Privileged: ptr.To(true), SELinuxOptions: &corev1.SELinuxOptions{Level: "s0"}}
	main := corev1.Container{
		Name:            ContainerName,
		Command:         []string{"nvidia-driver"},
		Args:            []string{"init"},
		Env:             kernelModuleEnv(spec.KernelModuleType),
		SecurityContext: privileged,
		// The driver is ready once nvidia-smi answers. Building or loading
		// it takes minutes: allow 21.
		StartupProbe: &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"nvidia-smi"}}},
			InitialDelaySeconds: 60, PeriodSeconds: 10, TimeoutSeconds: 60, FailureThreshold: 120,
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "run-nvidia", MountPath: "/run/nvidia", MountPropagation: ptr.To(corev1.MountPropagationBidirectional)},
			{Name: "var-log", MountPath: "/var/log"},
			{Name: "firmware-search-path", MountPath: "/sys/module/firmware_class/parameters/path"},
			// The installer writes the GSP firmware here, on the host, in
			// the driver root it later mounts: the host's /lib/firmware,
			// often read-only, is never written.
			{Name: "nv-firmware", MountPath: "/lib/firmware"},
		},
	}
	volumes := []corev1.Volume{
		render.HostPathVolume("run-nvidia", "/run/nvidia", corev1.HostPathDirectoryOrCreate),
		render.HostPathVolume("var-log", "/var/log", corev1.HostPathDirectory),
		render.HostPathVolume("firmware-search-path", "/sys/module/firmware_class/parameters/path", corev1.HostPathFile),
		render.HostPathVolume("nv-firmware", gpuv1.DefaultDriverInstallDir+"/lib/firmware", corev1.HostPathDirectoryOrCreate),
		render.HostPathVolume("host-root", cp.Spec.HostRoot(), corev1.HostPathDirectory),
	}
	configs := false
	if spec.RepoConfig != nil && spec.RepoConfig.ConfigMapName != "" {
		main.VolumeMounts = append(main.VolumeMounts, corev1.VolumeMount{Name: "repo-config", MountPath: reposDir, ReadOnly: true})
		volumes = append(volumes, render.ConfigMapVolume("repo-config", spec.RepoConfig.ConfigMapName))
		configs = true
	}
	if spec.CertConfig != nil && spec.CertConfig.Name != "" {
		main.VolumeMounts = append(main.VolumeMounts, corev1.VolumeMount{Name: "cert-config", MountPath: certsDir, ReadOnly: true})
		volumes = append(volumes, render.ConfigMapVolume("cert-config", spec.CertConfig.Name))
		configs = true
	}
	if spec.RDMA.IsEnabled() {
		volumes = append(volumes, addRDMA(&main, spec.RDMA)...)
	}
	if params != nil {
		// Read-only files beside the image's own: the script writes what
		// it reads into /etc/modprobe.d before it loads the modules.
		for _, f := range params.Files {
			main.VolumeMounts = append(main.VolumeMounts, corev1.VolumeMount{Name: "kernel-module-config",
				MountPath: moduleParamsDir + "/" + f, SubPath: f, ReadOnly: true})
		}
		volumes = append(volumes, render.ConfigMapVolume("kernel-module-config", params.ConfigMap))
	}
	if configs {
		// The arguments (init, or driver.args) follow the script as "$@".
		main.Command = []string{"sh", "-c", withConfigs, "nvidia-driver"}
	}
	if pool.Precompiled {
		// Nothing to build: the modules are in the image, installed
		// from its own repository (gpu-driver-container
		// ubuntu22.04/precompiled/nvidia-driver _install_driver).
		// NVIDIA's first probe of a precompiled driver is after 5 s
		// (gpu-operator v26.7.0 internal/state/driver.go).
		main.StartupProbe.InitialDelaySeconds = 5
	} else if needsEntitlement(cp, spec, os) {
		for _, e := range entitlements {
			main.VolumeMounts = append(main.VolumeMounts, corev1.VolumeMount{Name: e.name, MountPath: e.mountPath, ReadOnly: true})
			volumes = append(volumes, render.HostPathVolume(e.name, e.hostPath, e.kind))
		}
	}
	tuneProbes(&main, spec)
	containers := []corev1.Container{main}
	sidecars, sidecarVolumes, unload, err := gpuDirectContainers(pool, os, privileged)
	if err != nil {
		return corev1.PodSpec{}, err
	}
	for i := range sidecars {
		// They build against the driver's sources, from the same
		// package repositories and certificates (gpu-operator v26.7.0
		// controllers/object_controls.go:3067-3092, transformGDSContainer;
		// 3160-3185, transformGDRCopyContainer).
		sidecars[i].VolumeMounts = append(sidecars[i].VolumeMounts, mountsNamed(main.VolumeMounts, "repo-config", "cert-config")...)
	}
	containers = append(containers, sidecars...)
	withSecretEnv(containers, spec.SecretEnv)
	volumes = append(volumes, sidecarVolumes...)
	var inits []corev1.Container
	if unload != nil {
		inits = append(inits, *unload)
	}
	if spec.RDMA.IsEnabled() {
		var paramMounts []corev1.VolumeMount
		for _, m := range main.VolumeMounts {
			if m.Name == "kernel-module-config" {
				paramMounts = append(paramMounts, m)
			}
		}
		containers = append(containers, peermem(spec.RDMA, privileged, paramMounts))
		inits = append(inits, mofedWaiter(spec.RDMA, privileged))
	}
	withModuleResources(containers, spec.Resources)
	return corev1.PodSpec{
		ImagePullSecrets:             pullSecrets(pool),
		HostPID:                      true,
		ServiceAccountName:           ServiceAccountName,
		AutomountServiceAccountToken: ptr.To(false),
		Affinity:                     oneDriverPerNode(),
		InitContainers: append([]corev1.Container{{
			Name:    HostDriverCheckName,
			Command: []string{"sh", "-c", hostDriverCheck},
			// Privileged to run the host's nvidia-smi against the GPUs.
			SecurityContext: privileged,
			VolumeMounts:    []corev1.VolumeMount{render.ReadOnlyHostMount("host-root", hostRoot)},
		}, {
			// After the check: a host's own driver keeps nouveau away
			// itself, and its node never gets this far.
			Name:    UnloadNouveauName,
			Command: []string{"sh", "-c", unloadNouveau},
			// Privileged: unloading a module takes CAP_SYS_MODULE, and a
			// privileged container sees the host's /sys read-write.
			SecurityContext: privileged,
		}}, inits...),
		Containers: containers,
		Volumes:    volumes,
	}, nil
}

// tuneProbes applies driver.startupProbe, livenessProbe and readinessProbe
// to the driver container, as NVIDIA's setContainerProbe does for the
// startup probe (gpu-operator v26.7.0 controllers/object_controls.go):
// each field set replaces the default. NVIDIA's driver container has no
// liveness or readiness probe for the other two to tune (and writes
// through a nil one); here each, when set, is nvidia-smi answering, the
// startup probe's check, with the fields set, the startup probe's timeout
// (nvidia-smi on a node of many GPUs takes seconds; the Kubernetes
// default of one would fail a healthy driver) and the Kubernetes defaults
// for the rest.
func tuneProbes(c *corev1.Container, spec *gpuv1.DriverSpec) {
	tune(c.StartupProbe, spec.StartupProbe)
	nvidiaSMI := func(p *gpuv1.ContainerProbeSpec) *corev1.Probe {
		if p == nil {
			return nil
		}
		probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"nvidia-smi"}}},
			TimeoutSeconds: c.StartupProbe.TimeoutSeconds}
		tune(probe, p)
		return probe
	}
	c.LivenessProbe, c.ReadinessProbe = nvidiaSMI(spec.LivenessProbe), nvidiaSMI(spec.ReadinessProbe)
}

// tune sets the fields of a probe that the spec sets.
func tune(probe *corev1.Probe, spec *gpuv1.ContainerProbeSpec) {
	if spec == nil {
		return
	}
	for _, f := range []struct {
		set int32
		to  *int32
	}{
		{spec.InitialDelaySeconds, &probe.InitialDelaySeconds}, {spec.TimeoutSeconds, &probe.TimeoutSeconds},
		{spec.PeriodSeconds, &probe.PeriodSeconds}, {spec.SuccessThreshold, &probe.SuccessThreshold},
		{spec.FailureThreshold, &probe.FailureThreshold},
	} {
		if f.set != 0 {
			*f.to = f.set
		}
	}
}

// mountsNamed returns the mounts of the named volumes.
func mountsNamed(mounts []corev1.VolumeMount, names ...string) []corev1.VolumeMount {
	var out []corev1.VolumeMount
	for _, m := range mounts {
		if slices.Contains(names, m.Name) {
			out = append(out, m)
		}
	}
	return out
}

// withSecretEnv sets driver.secretEnv's Secret as the environment of the
// driver container and of its GPUDirect Storage and GDRCopy containers,
// which build modules too, as NVIDIA's does (gpu-operator v26.7.0
// controllers/object_controls.go: transformDriverContainer,
// transformGDSContainer, transformGDRCopyContainer: envFrom secretRef).
func withSecretEnv(containers []corev1.Container, secret string) {
	if secret == "" {
		return
	}
	for i := range containers {
		if c := &containers[i]; c.Name == ContainerName || c.Name == GDSName || c.Name == GDRCopyName {
			c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: secret}}})
		}
	}
}

// withModuleResources gives driver.resources to the containers that build
// or load a module beside the driver's, as NVIDIA's operator does
// (gpu-operator v26.7.0 controllers/object_controls.go:
// transformPeerMemoryContainer, transformGDSContainer,
// transformGDRCopyContainer): a namespace's LimitRange or quota that the
// driver's resources were set for admits the whole pod, and building
// nvidia_fs takes the memory a driver build does.
func withModuleResources(containers []corev1.Container, r *gpuv1.ResourceRequirements) {
	if r == nil {
		return
	}
	for i := range containers {
		if c := &containers[i]; c.Name == GDSName || c.Name == GDRCopyName || c.Name == PeermemName {
			c.Resources = corev1.ResourceRequirements{Limits: r.Limits, Requests: r.Requests}
		}
	}
}

// kernelModuleEnv chooses the driver's kernel modules: the image asks the
// installer which modules the node's GPUs take unless told
// (gpu-driver-container ubuntu22.04/nvidia-driver at 595.91.07:
// KERNEL_MODULE_TYPE, auto by default, open or proprietary). auto sets
// nothing: the variable in every driver pod's template would change the
// template of every pool, pinned ones too, and an operator upgrade would
// then replace every driver of the fleet for nothing.
//
// open also sets OPEN_KERNEL_MODULES_ENABLED, which the images built before
// KERNEL_MODULE_TYPE read instead (gpu-driver-container 1220e91^,
// ubuntu22.04/nvidia-driver; the 535 branches), as NVIDIA's operator does:
// a pinned 535.x image would otherwise build the proprietary modules.
func kernelModuleEnv(t string) []corev1.EnvVar {
	switch t {
	case "", "auto":
		return nil
	case "open":
		return []corev1.EnvVar{{Name: "KERNEL_MODULE_TYPE", Value: t}, {Name: "OPEN_KERNEL_MODULES_ENABLED", Value: "true"}}
	}
	return []corev1.EnvVar{{Name: "KERNEL_MODULE_TYPE", Value: t}}
}

// oneDriverPerNode keeps a second driver pod off a node while one is there,
// terminating or not: two drivers of different pools or OSes never meet on
// a node, and a replacement starts only once the old driver is unloaded.
func oneDriverPerNode() *corev1.Affinity {
	return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{render.LabelState: string(state.Driver)}},
			TopologyKey:   corev1.LabelHostname,
		}},
	}}
}

// entitlement is a host path a RHEL driver build reads its subscription
// from; the driver image's dnf finds them under /run/secrets.
type entitlement struct {
	name, hostPath, mountPath string
	kind                      corev1.HostPathType
}

var entitlements = []entitlement{
	{"subscription-entitlement", "/etc/pki/entitlement", "/run/secrets/etc-pki-entitlement", corev1.HostPathDirectory},
	{"subscription-redhat-repo", "/etc/yum.repos.d/redhat.repo", "/run/secrets/redhat.repo", corev1.HostPathFile},
	{"subscription-rhsm", "/etc/rhsm", "/run/secrets/rhsm", corev1.HostPathDirectory},
}

// needsEntitlement says whether RHEL driver pods mount the host's
// subscription: not when the policy brings its own repositories, and not
// on CRI-O, which mounts the subscription into every container itself.
func needsEntitlement(cp *gpuv1.ClusterPolicy, spec *gpuv1.DriverSpec, os state.OSRelease) bool {
	repos := spec.RepoConfig != nil && spec.RepoConfig.ConfigMapName != ""
	return os.ID == "rhel" && !repos && state.DefaultVariant(&cp.Spec).Runtime != gpuv1.RuntimeCRIO
}
