package contract

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/driver"
)

// The driver pod's GPUDirect Storage and GDRCopy containers.
var gpuDirectContract = []requirement{
	{source: gpuDirectSource, need: "with gds, a privileged container of the driver pod waits for the driver's root and module, " +
		"then builds and loads nvidia-fs (nvidia-gds-driver install) from NVIDIA's image for the node's OS; it starts, and the " +
		"driver pod is ready, only once nvidia_fs is loaded",
		check: gpuDirectContainer(driver.GDSName, "nvidia-gds-driver install", "nvidia_fs", "nvcr.io/nvidia/cloud-native/nvidia-fs:2.29.4"),
		where: func(spec *gpuv1.ClusterPolicySpec) bool { return spec.GDS.IsEnabled() }},
	{source: gpuDirectSource, need: "with gdrcopy, the same for gdrdrv (nvidia-gdrcopy-driver install), its pull secrets on the pod",
		check: all(gpuDirectContainer(driver.GDRCopyName, "nvidia-gdrcopy-driver install", "gdrdrv", "nvcr.io/nvidia/cloud-native/gdrdrv:v2.6"),
			func(p *podCase) error {
				if !slices.Contains(p.pod.ImagePullSecrets, corev1.LocalObjectReference{Name: "ngc"}) {
					return fmt.Errorf("pull secrets %v, want ngc among them", p.pod.ImagePullSecrets)
				}
				return nil
			}),
		where: func(spec *gpuv1.ClusterPolicySpec) bool { return spec.GDRCopy.IsEnabled() }},
	{source: "NVIDIA/k8s-driver-manager@v0.12.0:cmd/driver-manager/main.go (unloadDriver: nvidia_fs and gdrdrv before nvidia, " +
		"by /sys/module/<m>/refcnt); " + driverScript + " (_unload_driver knows neither: with one loaded, nvidia's references " +
		"exceed its known dependents and the driver is in use)",
		need: "with gds or gdrcopy, each module goes with its pod (preStop), and a driver first unloads any left (init container, " +
			"after nouveau's), failing saying which is in use",
		check: all(
			scriptHas(driver.UnloadModulesName, "for m in nvidia_fs gdrdrv; do"),
			scriptHas(driver.UnloadModulesName, "if ! rmmod $m; then"),
			privileged(driver.UnloadModulesName, true),
			initOrder(driver.HostDriverCheckName, driver.UnloadNouveauName, driver.UnloadModulesName),
			func(p *podCase) error {
				for name, module := range map[string]string{driver.GDSName: "nvidia_fs", driver.GDRCopyName: "gdrdrv"} {
					c, err := container(p, name)
					if err != nil {
						continue
					}
					if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Exec == nil ||
						!strings.Contains(strings.Join(c.Lifecycle.PreStop.Exec.Command, " "), "rmmod "+module) {
						return fmt.Errorf("%s does not unload %s when it stops", name, module)
					}
				}
				return nil
			}),
		where: gpuDirect},
	{source: "NVIDIA/gpu-operator@v26.7.0:controllers/object_controls.go:3067-3100 (transformGDSContainer), 3160-3192 " +
		"(transformGDRCopyContainer): the driver's repoConfig and certConfig mounted where the driver container has them, " +
		"its secretEnv as env, its resources (3108-3113, and 3014-3019 for nvidia-peermem-ctr)",
		need: "with gds or gdrcopy, each builds from the driver's package repositories and certificates, with its proxy settings, " +
			"within the driver's resources",
		check: func(p *podCase) error {
			main, err := container(p, driver.ContainerName)
			if err != nil {
				return err
			}
			for _, name := range []string{driver.GDSName, driver.GDRCopyName} {
				c, err := container(p, name)
				if err != nil {
					continue
				}
				for _, m := range main.VolumeMounts {
					if (m.Name == "repo-config" || m.Name == "cert-config") &&
						!slices.ContainsFunc(c.VolumeMounts, func(o corev1.VolumeMount) bool { return reflect.DeepEqual(o, m) }) {
						return fmt.Errorf("%s lacks the driver's mount %s at %s", name, m.Name, m.MountPath)
					}
				}
				if !reflect.DeepEqual(c.EnvFrom, main.EnvFrom) {
					return fmt.Errorf("%s's envFrom %v, the driver's %v", name, c.EnvFrom, main.EnvFrom)
				}
				if !reflect.DeepEqual(c.Resources, main.Resources) {
					return fmt.Errorf("%s's resources %v, the driver's %v", name, c.Resources, main.Resources)
				}
			}
			return nil
		},
		where: gpuDirect},
	{source: gpuDirectSource, need: "without gds and gdrcopy, neither container",
		check: all(noContainer(driver.GDSName), noContainer(driver.GDRCopyName), noContainer(driver.UnloadModulesName)),
		where: func(spec *gpuv1.ClusterPolicySpec) bool { return !gpuDirect(spec) }},
}

func TestGPUDirectContract(t *testing.T) { checkAll(t, state.Driver, gpuDirectContract) }

// gpuDirectSource is where the GPUDirect Storage and GDRCopy containers
// come from: NVIDIA publishes no source of the nvidia-fs and gdrdrv
// images (their entrypoints nvidia-gds-driver and nvidia-gdrcopy-driver),
// so NVIDIA's own rendering, run on its users' nodes, is the contract.
const gpuDirectSource = "NVIDIA/gpu-operator@v26.7.0:assets/state-driver/0500_daemonset.yaml (containers nvidia-fs-ctr and " +
	"nvidia-gdrcopy-ctr, volume dev-log), controllers/object_controls.go (transformGDSContainer, transformGDRCopyContainer: " +
	"<repository>/<image>:<version>-<os>); cmd/nvidia-validator/main.go (the modules are ready once lsmod lists nvidia_fs, gdrdrv); " +
	"the images' own sources are not public"

func gpuDirect(spec *gpuv1.ClusterPolicySpec) bool {
	return spec.GDS.IsEnabled() || spec.GDRCopy.IsEnabled()
}

// gpuDirectContainer checks one module's container.
func gpuDirectContainer(name, command, module, image string) func(*podCase) error {
	return all(
		func(p *podCase) error {
			c, err := container(p, name)
			if err != nil {
				return err
			}
			if !slices.Equal(c.Command, []string{"bash", "-xc"}) || len(c.Args) != 1 ||
				!strings.HasPrefix(c.Args[0], "until [ -d /run/nvidia/driver/usr/src ] && lsmod | grep nvidia; do") ||
				!strings.HasSuffix(c.Args[0], "; done; exec "+command) {
				return fmt.Errorf("runs %v %v, want bash -xc: wait for the driver, then exec %s", c.Command, c.Args, command)
			}
			os := strings.TrimPrefix(p.workload, "nvidia-driver-daemonset-")
			if want := image + "-" + os; c.Image != want {
				return fmt.Errorf("image %s, want %s", c.Image, want)
			}
			return nil
		},
		privileged(name, true),
		hostMount(name, mount{host: "/run/nvidia", at: "/run/nvidia", propagation: corev1.MountPropagationHostToContainer}),
		hostMount(name, mount{host: "/var/log", at: "/var/log"}),
		hostMount(name, mount{host: "/dev/log", at: "/dev/log", readOnly: true}),
		probe(name, "startup", execProbe("sh", "-c", "lsmod | grep "+module)),
	)
}
