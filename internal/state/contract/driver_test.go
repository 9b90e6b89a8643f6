package contract

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/driver"
)

// Sources of the driver's requirements: the driver container at the commit
// that moved it to 595.91.07, NVIDIA's driver manager and GPU Operator that
// ship it (v0.12.0, v26.7.0).
const (
	driverScript   = "NVIDIA/gpu-driver-container@d10b41a:ubuntu22.04/nvidia-driver (same in ubuntu24.04 and rhel9/nvidia-driver)"
	driverImage    = "NVIDIA/gpu-driver-container@d10b41a:ubuntu22.04/Dockerfile"
	driverManager  = "NVIDIA/k8s-driver-manager@v0.12.0:cmd/driver-manager/main.go (isHostDriver: chroot /host nvidia-smi --query-gpu=driver_version)"
	operatorDriver = "NVIDIA/gpu-operator@v26.7.0:assets/state-driver/0500_daemonset.yaml"
	operatorCtl    = "NVIDIA/gpu-operator@v26.7.0:controllers/object_controls.go"
	operatorVols   = "NVIDIA/gpu-operator@v26.7.0:internal/state/driver_volumes.go (kernelModuleConfig: each key at /drivers/<key>, subPath)"
	// The driver scripts pass nvidia-installer --no-nouveau-check and never
	// unload nouveau; the driver manager does, before every install.
	nouveauScript  = "NVIDIA/gpu-driver-container@06a208ca:ubuntu22.04/nvidia-driver (_install_driver: --no-nouveau-check)"
	nouveauManager = "NVIDIA/k8s-driver-manager@v0.12.0:cmd/driver-manager/main.go " +
		"(isNouveauLoaded: /sys/module/nouveau/refcnt; unloadNouveau: delete_module, its failure fails the init container)"
)

var driverContract = []requirement{
	{source: driverImage + ", " + driverScript, need: "runs nvidia-driver init; init accepts only -a and -m",
		check: runsDriverInit},
	{source: operatorCtl + " (RepoConfigPathMap, CertConfigPathMap: each key a file in the OS's directory)",
		need:  "a mirror's repository files and CA certificates are added to the image's own directories before the build",
		check: repoConfig},
	{source: driverScript + " (_load_driver: modprobe nvidia, nvidia-uvm, nvidia-modeset)", need: "loads kernel modules: privileged",
		check: privileged(driver.ContainerName, true)},
	{source: operatorDriver, need: "shares the host's PID namespace, as NVIDIA runs it",
		check: hostPID(true)},
	{source: driverScript + " (_mount_rootfs: mount --rbind / /run/nvidia/driver; pid file /run/nvidia/nvidia-driver.pid)",
		need:  "its driver root mount reaches the host: /run/nvidia shared both ways",
		check: hostMount(driver.ContainerName, mount{host: "/run/nvidia", at: "/run/nvidia", propagation: corev1.MountPropagationBidirectional})},
	{source: driverScript + " (_load_driver writes the firmware search path)", need: "sets the kernel's firmware search path",
		check: hostMount(driver.ContainerName, mount{host: "/sys/module/firmware_class/parameters/path", at: "/sys/module/firmware_class/parameters/path"})},
	{source: operatorDriver + " (volume nv-firmware); " + driverScript + " (search path /run/nvidia/driver/lib/firmware)",
		need:  "installs the GSP firmware where the kernel looks for it, never into the host's /lib/firmware",
		check: all(hostMount(driver.ContainerName, mount{host: "/run/nvidia/driver/lib/firmware", at: "/lib/firmware"}), noHostPath("/lib/firmware"))},
	{source: driverScript + " (never references /dev/log or /host-etc/os-release)",
		need: "no socket-typed /dev/log mount that fails nodes without one, and no host os-release",
		check: all(noHostPath("/etc/os-release"), func(p *podCase) error {
			if gpuDirect(p.spec) {
				return noMountAt(driver.ContainerName, "/dev/log")(p)
			}
			return noHostPath("/dev/log")(p)
		})},
	{source: driverScript + " (KERNEL_MODULE_TYPE: auto asks nvidia-installer --print-recommended-kernel-module-type; open; proprietary); " +
		operatorCtl + " (driver.kernelModuleType becomes KERNEL_MODULE_TYPE)",
		need: "installs the kernel modules driver.kernelModuleType names; auto, the image's default, is left unset so that no driver's template changes",
		check: func(p *podCase) error {
			if t := p.spec.Driver.KernelModuleType; t != "" && t != "auto" {
				return env(driver.ContainerName, "KERNEL_MODULE_TYPE", t)(p)
			}
			return noEnv(driver.ContainerName, "KERNEL_MODULE_TYPE")(p)
		}},
	{source: "NVIDIA/gpu-driver-container@d10b41a:ubuntu22.04/nvidia-driver (init: _should_skip_kernel_module_reload keeps the " +
		"loaded modules when DRIVER_CONFIG_DIGEST equals what _store_driver_digest wrote to /run/nvidia/nvidia-driver.state; same in " +
		"ubuntu24.04, rhel8-10; not in the precompiled script); NVIDIA/gpu-operator@v26.7.0:controllers/object_controls.go:1060-1078",
		need: "a driver pod replaced by one of the same template keeps the loaded modules, and any template change reloads them: " +
			"the digest is the template's hash, on the driver container, where the image reads it",
		check: func(p *podCase) error {
			if p.spec.Driver.UsePrecompiled != nil && *p.spec.Driver.UsePrecompiled {
				return noEnv(driver.ContainerName, state.DriverConfigDigestEnv)(p)
			}
			return env(driver.ContainerName, state.DriverConfigDigestEnv, p.annotations[render.AnnotationTemplateHash])(p)
		}},
	{source: "NVIDIA/gpu-driver-container@1220e91^:ubuntu22.04/nvidia-driver:19-22 (OPEN_KERNEL_MODULES_ENABLED=true selects " +
		"kernel-open, in the images built before KERNEL_MODULE_TYPE, 535.x among them); NVIDIA/gpu-operator@v26.7.0:" +
		"controllers/object_controls.go:3591-3597 (set with KERNEL_MODULE_TYPE when kernelModuleType is open)",
		need: "a driver image pinned from before KERNEL_MODULE_TYPE installs the open modules too when kernelModuleType is open",
		check: func(p *podCase) error {
			if p.spec.Driver.KernelModuleType == "open" {
				return env(driver.ContainerName, "OPEN_KERNEL_MODULES_ENABLED", "true")(p)
			}
			return noEnv(driver.ContainerName, "OPEN_KERNEL_MODULES_ENABLED")(p)
		}},
	{source: driverScript + " (_get_module_params: base_path=/drivers, nvidia.conf, nvidia-uvm.conf, nvidia-modeset.conf, " +
		"nvidia-peermem.conf, written to /etc/modprobe.d before _load_driver); " + operatorVols,
		need:  "kernelModuleConfig's files are where the script reads them, each mounted alone so that the image's /drivers stays, and their content is part of the template",
		check: moduleParams},
	{source: driverScript + " (installs nvidia-smi; the script at d10b41a never creates /run/nvidia/validations, " +
		"which reload_nvidia_peermem waits on: /run/nvidia/validations/.driver-ctr-ready)",
		need: "is ready once nvidia-smi answers; with GPUDirect RDMA it then marks the driver ready where the peermem container looks",
		check: func(p *podCase) error {
			if p.spec.Driver.RDMA.IsEnabled() {
				return probe(driver.ContainerName, "startup", execProbe("sh", "-c",
					"nvidia-smi && mkdir -p /run/nvidia/validations && touch /run/nvidia/validations/.driver-ctr-ready"))(p)
			}
			return probe(driver.ContainerName, "startup", execProbe("nvidia-smi"))(p)
		}},
	{source: rdmaScript + "; " + operatorDriver + " (volumes mlnx-ofed-usr-src, run-mellanox-drivers); " + operatorCtl +
		" (transformPeerMemoryContainer: GPU_DIRECT_RDMA_ENABLED, USE_HOST_MOFED, mlnx-ofed-usr-src from /usr/src)",
		need: "with driver.rdma the driver builds nvidia-peermem against MOFED's sources (the host's /usr/src with useHostMofed) " +
			"and loads it; without, none of it",
		check: rdmaDriver},
	{source: mofedManager + "; " + rdmaScript,
		need: "with driver.rdma the driver waits, on a node with a Mellanox device, until MOFED is ready (its mark, or mlx5_core " +
			"with host MOFED) before it builds nvidia-peermem against it, and a new driver never finds the old one's ready mark",
		check: rdmaWait},
	{source: peermemScript + "; " + operatorDriver + " (container nvidia-peermem-ctr); " +
		"NVIDIA/gpu-operator@v26.7.0:manifests/state-driver/0500_daemonset.yaml (NVIDIA_VISIBLE_DEVICES=void)",
		need: "with driver.rdma a container loads nvidia-peermem into the running driver once MOFED is ready, and again after a " +
			"MOFED reinstall unloads it; it is started once the module is in, restarted when it goes",
		check: rdmaPeermem},
	{source: driverManager, need: "a driver on the host is found by the host's nvidia-smi answering, from the host's / read-only",
		check: all(scriptHas(driver.HostDriverCheckName, "timeout 60 chroot /host /usr/bin/nvidia-smi --query-gpu=driver_version --format=csv,noheader"),
			scriptHas(driver.HostDriverCheckName, fmt.Sprintf("exit %d", driver.HostDriverExitCode)),
			privileged(driver.HostDriverCheckName, true),
			hostMountBy(driver.HostDriverCheckName, func(p *podCase) mount {
				return mount{host: p.spec.HostRoot(), at: "/host", readOnly: true, propagation: corev1.MountPropagationHostToContainer}
			}))},
	{source: nouveauManager + "; " + nouveauScript,
		need: "unloads nouveau before the driver loads, after the host driver check, and fails saying why when it is in use",
		check: all(scriptHas(driver.UnloadNouveauName, "if [ -e /sys/module/nouveau/refcnt ]; then"),
			scriptHas(driver.UnloadNouveauName, "if ! rmmod nouveau; then"),
			scriptHas(driver.UnloadNouveauName, "| tee /dev/termination-log\n    exit 1"),
			privileged(driver.UnloadNouveauName, true),
			initOrder(driver.HostDriverCheckName, driver.UnloadNouveauName))},
	{source: operatorDriver + " (podAntiAffinity on the driver component)", need: "two driver pods never share a node",
		check: antiAffine},
	{source: operatorCtl + " (SubscriptionPathMap: rhel only, not on CRI-O)", need: "a RHEL build reads the host's subscription under /run/secrets",
		check: rhelEntitlement, where: func(spec *gpuv1.ClusterPolicySpec) bool { return !spec.Driver.IsPrecompiled() }},
}

// driverTuning is what the policy's driver fields do to the driver pod,
// read from NVIDIA's transforms.
var driverTuning = []requirement{
	{source: operatorCtl + ":3600-3608, 2755-2784 (transformDriverContainer, setContainerProbe: each field set replaces the " +
		"startup probe's); " + operatorDriver + ":140-149 (startup probe 60/10/60/120)",
		need: "takes driver.startupProbe's settings over the defaults, so a slow build is not killed at 21 minutes",
		check: func(p *podCase) error {
			c, err := container(p, driver.ContainerName)
			if err != nil {
				return err
			}
			want := corev1.Probe{InitialDelaySeconds: 60, PeriodSeconds: 10, TimeoutSeconds: 60, FailureThreshold: 120}
			if p.spec.Driver.IsPrecompiled() {
				want.InitialDelaySeconds = 5
			}
			if sp := p.spec.Driver.StartupProbe; sp != nil {
				want.InitialDelaySeconds, want.PeriodSeconds = cmp.Or(sp.InitialDelaySeconds, want.InitialDelaySeconds), cmp.Or(sp.PeriodSeconds, want.PeriodSeconds)
				want.TimeoutSeconds, want.FailureThreshold = cmp.Or(sp.TimeoutSeconds, want.TimeoutSeconds), cmp.Or(sp.FailureThreshold, want.FailureThreshold)
			}
			got := c.StartupProbe
			if got == nil || got.InitialDelaySeconds != want.InitialDelaySeconds || got.PeriodSeconds != want.PeriodSeconds ||
				got.TimeoutSeconds != want.TimeoutSeconds || got.FailureThreshold != want.FailureThreshold {
				return fmt.Errorf("startup probe %+v, want timings %+v", got, want)
			}
			return nil
		}},
	{source: operatorCtl + ":3603-3608 (livenessProbe, readinessProbe: NVIDIA's driver container has neither to tune)",
		need: "gets a liveness and a readiness probe, nvidia-smi answering with the startup probe's timeout, only where " +
			"driver.livenessProbe and readinessProbe ask",
		check: func(p *podCase) error {
			for kind, spec := range map[string]*gpuv1.ContainerProbeSpec{"liveness": p.spec.Driver.LivenessProbe, "readiness": p.spec.Driver.ReadinessProbe} {
				test := func(pr *corev1.Probe) error {
					if err := execProbe("nvidia-smi")(pr); err != nil {
						return err
					}
					if spec.PeriodSeconds != 0 && pr.PeriodSeconds != spec.PeriodSeconds || spec.FailureThreshold != 0 && pr.FailureThreshold != spec.FailureThreshold {
						return fmt.Errorf("%s probe %+v does not take %+v", kind, pr, spec)
					}
					c, err := container(p, driver.ContainerName)
					if err != nil {
						return err
					}
					// nvidia-smi on many GPUs takes seconds: the startup
					// probe's timeout, not Kubernetes' one second.
					if want := cmp.Or(spec.TimeoutSeconds, c.StartupProbe.TimeoutSeconds); pr.TimeoutSeconds != want {
						return fmt.Errorf("%s probe times out after %ds, want %ds", kind, pr.TimeoutSeconds, want)
					}
					return nil
				}
				if spec == nil {
					test = nil
				}
				if err := probe(driver.ContainerName, kind, test)(p); err != nil {
					return err
				}
			}
			return nil
		}},
	{source: operatorCtl + ":3736-3742, 3096, 3189, 3793-3817 (createSecretEnvReference: envFrom of the driver, nvidia-fs and " +
		"gdrcopy containers)",
		need: "takes driver.secretEnv's Secret as the environment of every container that builds modules",
		check: func(p *podCase) error {
			secret := p.spec.Driver.SecretEnv
			for _, c := range p.pod.Containers {
				builds := c.Name == driver.ContainerName || c.Name == driver.GDSName || c.Name == driver.GDRCopyName
				has := slices.ContainsFunc(c.EnvFrom, func(e corev1.EnvFromSource) bool { return e.SecretRef != nil && e.SecretRef.Name == secret })
				if builds && secret != "" && !has {
					return fmt.Errorf("%s does not take Secret %s as its environment", c.Name, secret)
				}
				if (!builds || secret == "") && len(c.EnvFrom) > 0 {
					return fmt.Errorf("%s takes an environment from %+v", c.Name, c.EnvFrom)
				}
			}
			return nil
		}},
}

func TestDriverContract(t *testing.T) {
	checkAll(t, state.Driver, append(slices.Clone(driverContract), driverTuning...))
}

// The GPUDirect RDMA sources: the driver script's build and load of
// nvidia-peermem, and the subcommands of its peermem container.
const (
	rdmaScript = driverScript + " (_gpu_direct_rdma_enabled: GPU_DIRECT_RDMA_ENABLED and a Mellanox device; " +
		"_create_driver_package links /run/mellanox/drivers/usr/src/ofa_kernel; _load_driver: modprobe nvidia-peermem)"
	peermemScript = driverScript + " (reload_nvidia_peermem: waits for /run/mellanox/drivers/.driver-ready, or mlx5_core with " +
		"USE_HOST_MOFED, and /run/nvidia/validations/.driver-ctr-ready, then chroot /run/nvidia/driver modprobe nvidia-peermem; " +
		"probe_nvidia_peermem: fails only while mlx5_core runs without nvidia_peermem)"
)

// mofedManager is what NVIDIA's driver manager does before the driver
// installs with GPUDirect RDMA.
const mofedManager = "NVIDIA/k8s-driver-manager@v0.12.0:cmd/driver-manager/main.go (mellanoxDevicesPresent: a PCI vendor 0x15b3; " +
	"waitForMofedDriver: /run/mellanox/drivers/.driver-ready, or mlx5_core in /proc/modules with useHostMofed); " +
	"NVIDIA/gpu-operator@v26.7.0:assets/state-driver/0400_configmap.yaml (the startup probe writes .driver-ctr-ready), " +
	"0500_daemonset.yaml (the driver container's preStop removes it)"

// rdmaWait checks the MOFED wait and the ready mark's removal.
func rdmaWait(p *podCase) error {
	rdma := p.spec.Driver.RDMA
	if !rdma.IsEnabled() {
		if _, err := container(p, driver.MOFEDWaitName); err == nil {
			return fmt.Errorf("a %s without driver.rdma", driver.MOFEDWaitName)
		}
		return nil
	}
	hostMOFED := noEnv(driver.MOFEDWaitName, "USE_HOST_MOFED")
	if rdma.HostMOFED() {
		hostMOFED = env(driver.MOFEDWaitName, "USE_HOST_MOFED", "true")
	}
	return all(initOrder(driver.HostDriverCheckName, driver.UnloadNouveauName, driver.MOFEDWaitName), hostMOFED,
		scriptHas(driver.MOFEDWaitName, "rm -f /run/nvidia/validations/.driver-ctr-ready"),
		scriptHas(driver.MOFEDWaitName, `[ "$(cat "$d/vendor" 2>/dev/null)" = 0x15b3 ]`),
		scriptHas(driver.MOFEDWaitName, "grep -q mlx5_core /proc/modules"),
		scriptHas(driver.MOFEDWaitName, "[ -f /run/mellanox/drivers/.driver-ready ]"),
		hostMount(driver.MOFEDWaitName, mount{host: "/run/nvidia", at: "/run/nvidia", propagation: corev1.MountPropagationBidirectional}),
		hostMount(driver.MOFEDWaitName, mount{host: "/run/mellanox/drivers", at: "/run/mellanox/drivers", propagation: corev1.MountPropagationHostToContainer}),
		func(p *podCase) error {
			c, err := container(p, driver.ContainerName)
			if err != nil {
				return err
			}
			if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Exec == nil ||
				!strings.Contains(strings.Join(c.Lifecycle.PreStop.Exec.Command, " "), "rm -f /run/nvidia/validations/.driver-ctr-ready") {
				return fmt.Errorf("the driver container does not remove its ready mark when it stops")
			}
			return nil
		})(p)
}

// rdmaDriver checks the driver container's GPUDirect RDMA settings.
func rdmaDriver(p *podCase) error {
	rdma := p.spec.Driver.RDMA
	if !rdma.IsEnabled() {
		if _, err := container(p, driver.PeermemName); err == nil {
			return fmt.Errorf("a %s without driver.rdma", driver.PeermemName)
		}
		return all(noEnv(driver.ContainerName, "GPU_DIRECT_RDMA_ENABLED"),
			func(p *podCase) error { return hostMountless(p, "/run/mellanox/drivers") })(p)
	}
	src := "/run/mellanox/drivers/usr/src"
	hostMOFED := noEnv(driver.ContainerName, "USE_HOST_MOFED")
	if rdma.HostMOFED() {
		src, hostMOFED = "/usr/src", env(driver.ContainerName, "USE_HOST_MOFED", "true")
	}
	return all(env(driver.ContainerName, "GPU_DIRECT_RDMA_ENABLED", "true"), hostMOFED,
		hostMount(driver.ContainerName, mount{host: src, at: "/run/mellanox/drivers/usr/src", propagation: corev1.MountPropagationHostToContainer}),
		hostMount(driver.ContainerName, mount{host: "/run/mellanox/drivers", at: "/run/mellanox/drivers", propagation: corev1.MountPropagationHostToContainer}))(p)
}

// rdmaPeermem checks the peermem container.
func rdmaPeermem(p *podCase) error {
	rdma := p.spec.Driver.RDMA
	if !rdma.IsEnabled() {
		return nil // rdmaDriver checks there is none
	}
	hostMOFED := noEnv(driver.PeermemName, "USE_HOST_MOFED")
	if rdma.HostMOFED() {
		hostMOFED = env(driver.PeermemName, "USE_HOST_MOFED", "true")
	}
	return all(commandPrefix(driver.PeermemName, "nvidia-driver reload_nvidia_peermem"), privileged(driver.PeermemName, true),
		hostMOFED, env(driver.PeermemName, "NVIDIA_VISIBLE_DEVICES", "void"),
		sameImage(driver.PeermemName, driver.ContainerName), sameResources(driver.PeermemName, driver.ContainerName),
		hostMount(driver.PeermemName, mount{host: "/run/nvidia", at: "/run/nvidia", propagation: corev1.MountPropagationBidirectional}),
		hostMount(driver.PeermemName, mount{host: "/run/mellanox/drivers", at: "/run/mellanox/drivers", propagation: corev1.MountPropagationHostToContainer}),
		probe(driver.PeermemName, "startup", execProbe("sh", "-c", "nvidia-driver probe_nvidia_peermem")),
		probe(driver.PeermemName, "liveness", execProbe("sh", "-c", "nvidia-driver probe_nvidia_peermem")))(p)
}

// sameResources checks two containers have the same requests and limits.
func sameResources(a, b string) func(*podCase) error {
	return sameField(a, b, "resources", func(c *corev1.Container) any { return c.Resources })
}

// sameImage checks two containers run the same image.
func sameImage(a, b string) func(*podCase) error {
	return sameField(a, b, "image", func(c *corev1.Container) any { return c.Image })
}

// sameField checks two containers have the same value of a field.
func sameField(a, b, what string, field func(*corev1.Container) any) func(*podCase) error {
	return func(p *podCase) error {
		ca, err := container(p, a)
		if err != nil {
			return err
		}
		cb, err := container(p, b)
		if err != nil {
			return err
		}
		if va, vb := field(ca), field(cb); !reflect.DeepEqual(va, vb) {
			return fmt.Errorf("%s's %s %v, %s's %v", a, what, va, b, vb)
		}
		return nil
	}
}

// moduleParams checks each file of the kernelModuleConfig ConfigMap (the
// fixture's pools have nvidia.conf and nvidia-uvm.conf) is mounted alone
// under /drivers, and that their digest is on the template; without one,
// nothing is mounted there.
func moduleParams(p *podCase) error {
	kmc := p.spec.Driver.KernelModuleConfig
	if kmc == nil || kmc.Name == "" {
		if _, ok := p.annotations[driver.AnnotationModuleParams]; ok {
			return fmt.Errorf("the template has %s without kernelModuleConfig", driver.AnnotationModuleParams)
		}
		return all(func(p *podCase) error { return hostMountless(p, "/drivers") },
			func(p *podCase) error { return hostMountless(p, "/drivers/nvidia.conf") })(p)
	}
	c, err := container(p, driver.ContainerName)
	if err != nil {
		return err
	}
	for _, f := range []string{"nvidia.conf", "nvidia-uvm.conf"} {
		found := false
		for _, vm := range c.VolumeMounts {
			v := volume(p, vm.Name)
			if vm.MountPath == "/drivers/"+f && vm.SubPath == f && vm.ReadOnly && v != nil && v.ConfigMap != nil && v.ConfigMap.Name == kmc.Name {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("%s of ConfigMap %s is not mounted read-only at /drivers/%s", f, kmc.Name, f)
		}
	}
	if err := hostMountless(p, "/drivers"); err != nil {
		return fmt.Errorf("the whole of /drivers is mounted over: %w", err)
	}
	if p.annotations[driver.AnnotationModuleParams] == "" {
		return fmt.Errorf("the template has no %s digest", driver.AnnotationModuleParams)
	}
	return nil
}

// runsDriverInit checks the driver container runs nvidia-driver with
// arguments that start with init, directly or after adding the policy's
// repository files.
func runsDriverInit(p *podCase) error {
	c, err := container(p, driver.ContainerName)
	if err != nil {
		return err
	}
	if len(c.Args) == 0 || c.Args[0] != "init" {
		return fmt.Errorf("arguments %v do not start with init", c.Args)
	}
	if slices.Equal(c.Command, []string{"nvidia-driver"}) {
		return nil
	}
	if len(c.Command) == 4 && c.Command[0] == "sh" && strings.HasSuffix(c.Command[2], `exec nvidia-driver "$@"`) {
		return nil
	}
	return fmt.Errorf("runs %v, not nvidia-driver", c.Command)
}

// repoConfig checks the policy's ConfigMaps reach the directories the
// image's package manager reads: copied, so the image's own files stay.
// Each is checked on its own: a policy may set either.
func repoConfig(p *podCase) error {
	spec := p.spec.Driver
	var checks []func(*podCase) error
	if repos := repoConfigMap(spec); repos != "" {
		checks = append(checks,
			scriptHas(driver.ContainerName, "cp \"$f\" /etc/yum.repos.d/"),
			scriptHas(driver.ContainerName, "cp \"$f\" /etc/apt/sources.list.d/"),
			configMapAt(driver.ContainerName, repos, "/etc/gpu-operator/repos"))
	} else if err := hostMountless(p, "/etc/gpu-operator/repos"); err != nil {
		return err
	}
	if spec.CertConfig != nil && spec.CertConfig.Name != "" {
		checks = append(checks,
			scriptHas(driver.ContainerName, "cp \"$f\" /etc/pki/ca-trust/extracted/pem/"),
			scriptHas(driver.ContainerName, "cp \"$f\" /usr/local/share/ca-certificates/"),
			configMapAt(driver.ContainerName, spec.CertConfig.Name, "/etc/gpu-operator/certs"))
	} else if err := hostMountless(p, "/etc/gpu-operator/certs"); err != nil {
		return err
	}
	return all(checks...)(p)
}

// repoConfigMap is the policy's repository ConfigMap, "" when none.
func repoConfigMap(spec gpuv1.DriverSpec) string {
	if spec.RepoConfig == nil {
		return ""
	}
	return spec.RepoConfig.ConfigMapName
}

// antiAffine checks the driver pod keeps off nodes that run a driver pod.
func antiAffine(p *podCase) error {
	a := p.pod.Affinity
	if a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 {
		return fmt.Errorf("no required pod anti-affinity")
	}
	term := a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0]
	if term.TopologyKey != corev1.LabelHostname || term.LabelSelector == nil ||
		term.LabelSelector.MatchLabels["nvidia.com/gpu-operator.state"] != string(state.Driver) {
		return fmt.Errorf("anti-affinity %+v does not keep driver pods apart per node", term)
	}
	return nil
}

// rhelEntitlement checks the subscription mounts are there for RHEL pools
// on containerd that bring no repositories of their own, and only there.
func rhelEntitlement(p *podCase) error {
	rhel := slices.ContainsFunc(p.pod.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions,
		func(r corev1.NodeSelectorRequirement) bool {
			return r.Key == state.LabelOSReleaseID && slices.Contains(r.Values, "rhel")
		})
	want := rhel && p.spec.Operator.DefaultRuntime != gpuv1.RuntimeCRIO && repoConfigMap(p.spec.Driver) == ""
	check := all(
		hostMount(driver.ContainerName, mount{host: "/etc/pki/entitlement", at: "/run/secrets/etc-pki-entitlement", readOnly: true}),
		hostMount(driver.ContainerName, mount{host: "/etc/yum.repos.d/redhat.repo", at: "/run/secrets/redhat.repo", readOnly: true}),
		hostMount(driver.ContainerName, mount{host: "/etc/rhsm", at: "/run/secrets/rhsm", readOnly: true}))
	err := check(p)
	switch {
	case want && err != nil:
		return err
	case !want && err == nil:
		return fmt.Errorf("mounts a RHEL subscription where none is read")
	}
	return nil
}

// initOrder checks the pod's init containers run in this order.
func initOrder(names ...string) func(*podCase) error {
	return func(p *podCase) error {
		var got []string
		for _, c := range p.pod.InitContainers {
			got = append(got, c.Name)
		}
		if len(got) < len(names) || !slices.Equal(got[:len(names)], names) {
			return fmt.Errorf("init containers %v, want %v first", got, names)
		}
		return nil
	}
}
