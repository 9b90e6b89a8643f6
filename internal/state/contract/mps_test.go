package contract

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/deviceplugin"
	"github.com/gpu-operator/gpu-operator/internal/state/mps"
)

// Sources of the MPS control daemon's requirements: k8s-device-plugin
// v0.20.0, which ships it, and NVIDIA's operator's manifest of it.
const (
	mpsChart    = "NVIDIA/k8s-device-plugin@v0.20.0:deployments/helm/nvidia-device-plugin/templates/daemonset-mps-control-daemon.yml"
	mpsShm      = "NVIDIA/k8s-device-plugin@v0.20.0:cmd/mps-control-daemon/mount/mount-shm.go"
	mpsRoot     = "NVIDIA/k8s-device-plugin@v0.20.0:cmd/mps-control-daemon/mps/root.go (ContainerRoot /mps, pipes under <root>/<resource>/pipe)"
	mpsReady    = "NVIDIA/k8s-device-plugin@v0.20.0:cmd/mps-control-daemon/main.go (starts a daemon per resource; /mps/.ready)"
	mpsOperator = "NVIDIA/gpu-operator@v26.7.0:assets/state-mps-control-daemon/0400_daemonset.yaml (hostPID)"
	pluginMPS   = "NVIDIA/k8s-device-plugin@v0.20.0:internal/plugin/mps.go (waitForDaemon; mounts <root> pipes and shm into pods)"
)

const mpsCtr = mps.ContainerName

// mpsVariant is a variant whose configuration shares GPUs with MPS in the
// contract tests' render.
func mpsVariant(v state.Variant) bool { return v.DevicePluginConfig == "H200_MPS.x2" }

var mpsContract = []requirement{
	{source: mpsShm + "; " + mpsChart, need: "mounts a tmpfs at <root>/shm before it starts, shared with the host, which needs privilege",
		check: all(commandIs(mps.MountsName, "mps-control-daemon", "mount-shm"), privileged(mps.MountsName, true),
			hostMountBy(mps.MountsName, func(p *podCase) mount {
				return mount{host: p.spec.DevicePlugin.MPS.RootOrDefault(), at: "/mps", propagation: corev1.MountPropagationBidirectional}
			}))},
	{source: mpsRoot + "; " + mpsReady + "; " + mpsChart,
		need: "keeps its pipes under MPS's root and uses its shared memory as /dev/shm, privileged, with the driver's compute binaries",
		check: all(commandIs(mpsCtr, "mps-control-daemon"), privileged(mpsCtr, true),
			env(mpsCtr, "NVIDIA_VISIBLE_DEVICES", "all"), env(mpsCtr, "NVIDIA_DRIVER_CAPABILITIES", "compute,utility"),
			hostMountBy(mpsCtr, func(p *podCase) mount { return mount{host: p.spec.DevicePlugin.MPS.RootOrDefault(), at: "/mps"} }),
			hostMountBy(mpsCtr, func(p *podCase) mount {
				return mount{host: p.spec.DevicePlugin.MPS.RootOrDefault() + "/shm", at: "/dev/shm"}
			}))},
	{source: mpsChart + " (CONFIG_FILE)", need: "runs the node's configuration, the one its device plugin runs", check: nodeConfig(mpsCtr)},
	{source: mpsReady + " (flags --config-file and --mig-strategy only)", need: "gets none of the device plugin's args, which it would exit on",
		check: noArgs(mpsCtr)},
	{source: mpsReady + "; NVIDIA/k8s-device-plugin@v0.20.0:deployments/container/Dockerfile (distroless, /bin/sh a static busybox)",
		need:  "is ready once its daemons started, not when its container did",
		check: probe(mpsCtr, "readiness", execProbe("sh", "-c", "test -f /mps/.ready"))},
	{source: mpsOperator, need: "starts MPS's daemons in the host's PID namespace", check: hostPID(true)},
	{source: operatorPlugin, need: "gets the driver's binaries from the runtime: the RuntimeClass where it has the NVIDIA handler", check: runtimeClass},
	{source: mpsChart + " (NVIDIA_VISIBLE_DEVICES=all: under CDI the runtime hands it the management spec's files); " + toolkitInstall,
		need: "with CDI, starts only once the management spec names the driver that runs", check: waitsForManagementSpec, where: cdiOn},
}

func TestMPSControlDaemonContract(t *testing.T) { checkAll(t, state.MPSControlDaemon, mpsContract) }

// The device plugin on a node that shares GPUs with MPS is told MPS's root,
// which it hands to the pods it gives shared GPUs, and sees the daemon's
// pipes and shared memory, to check it is up before it starts.
var pluginMPSContract = []requirement{
	{source: pluginMain + " (--mps-root, env MPS_ROOT: required with MPS); " + pluginMPS, only: mpsVariant,
		need: "knows MPS's root on the host, and sees it where the daemon does",
		check: all(envBy(deviceplugin.ContainerName, "MPS_ROOT", func(p *podCase) string { return p.spec.DevicePlugin.MPS.RootOrDefault() }),
			hostMountBy(deviceplugin.ContainerName, func(p *podCase) mount {
				return mount{host: p.spec.DevicePlugin.MPS.RootOrDefault(), at: "/mps"}
			}),
			hostMountBy(deviceplugin.ContainerName, func(p *podCase) mount {
				return mount{host: p.spec.DevicePlugin.MPS.RootOrDefault() + "/shm", at: "/dev/shm"}
			}))},
	{source: pluginMain + " (MPS_ROOT set for MPS only)", only: func(v state.Variant) bool { return !mpsVariant(v) },
		need:  "other nodes' plugins are not told of MPS",
		check: func(p *podCase) error { return noEnv(deviceplugin.ContainerName, "MPS_ROOT")(p) }},
}

func TestDevicePluginMPSContract(t *testing.T) { checkAll(t, state.DevicePlugin, pluginMPSContract) }

func noArgs(ctr string) func(*podCase) error {
	return func(p *podCase) error {
		c, err := container(p, ctr)
		if err != nil {
			return err
		}
		if len(c.Args) > 0 {
			return fmt.Errorf("%s is given args %v", ctr, c.Args)
		}
		return nil
	}
}

func noEnv(ctr, name string) func(*podCase) error {
	return func(p *podCase) error {
		c, err := container(p, ctr)
		if err != nil {
			return err
		}
		for _, e := range c.Env {
			if e.Name == name {
				return fmt.Errorf("%s sets %s=%s", ctr, name, e.Value)
			}
		}
		return nil
	}
}

func commandIs(ctr string, want ...string) func(*podCase) error {
	return func(p *podCase) error {
		c, err := container(p, ctr)
		if err != nil {
			return err
		}
		if fmt.Sprint(c.Command) != fmt.Sprint(want) {
			return fmt.Errorf("%s runs %v, want %v", ctr, c.Command, want)
		}
		return nil
	}
}
