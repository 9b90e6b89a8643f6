package mps

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/deviceplugin"
	"github.com/gpu-operator/gpu-operator/internal/state/toolkit"
)

// Names users know from the NVIDIA GPU Operator.
const (
	DaemonSetName      = "nvidia-device-plugin-mps-control-daemon"
	ServiceAccountName = "nvidia-mps-control-daemon"
	// ContainerName is the daemon's container; MountsName the init
	// container that mounts its shared memory.
	ContainerName = "mps-control-daemon-ctr"
	MountsName    = "mps-control-daemon-mounts"
)

// dimensions: the daemon loads the driver's MPS binaries and NVML as the
// runtime injects them (the RuntimeClass where the runtime has the NVIDIA
// handler), and runs the node's configuration.
var dimensions = state.Dimensions{Runtime: true, DevicePluginConfig: true}

// Operand renders the mps-control-daemon state.
type Operand struct{}

// Enabled reports whether the policy may run the daemon: the device
// plugin is enabled with a ConfigMap of configurations. Nodes whose
// configuration does not share GPUs with MPS have the state disabled.
func (Operand) Enabled(spec *gpuv1.ClusterPolicySpec) bool {
	return spec.DevicePlugin.IsEnabled() && spec.DevicePlugin.Config != nil && spec.DevicePlugin.Config.Name != ""
}

// Render returns the daemon's ServiceAccount and one DaemonSet per
// runtime and MPS configuration in use; none while no configuration in
// use shares GPUs with MPS.
func (Operand) Render(in state.RenderInput) ([]client.Object, error) {
	spec := &in.Policy.Spec.DevicePlugin
	image := render.Image(string(spec.Repository), string(spec.Image), string(spec.Version))
	// The plugin's pull settings and resources, not its args or env: the
	// daemon takes --config-file and --mig-strategy alone
	// (cmd/mps-control-daemon/main.go), and exits on any other flag.
	settings := spec.ContainerSettings
	settings.Args, settings.Env = nil, nil
	pod := func(cp *gpuv1.ClusterPolicy, v state.Variant) corev1.PodSpec {
		return podSpec(cp, v, in.DevicePluginConfigFile(v))
	}
	sets, err := in.DaemonSetsWhere(DaemonSetName, state.MPSControlDaemon, &settings, image, dimensions, pod, in.RunsMPS)
	if err != nil {
		return nil, err
	}
	return append([]client.Object{render.ServiceAccount(in.Policy, ServiceAccountName, in.Namespace, string(state.MPSControlDaemon))}, sets...), nil
}

// podSpec is the daemon's pod, as the device plugin's chart runs it
// (k8s-device-plugin v0.20.0,
// deployments/helm/nvidia-device-plugin/templates/daemonset-mps-control-daemon.yml)
// and NVIDIA's operator with the host's PID namespace (gpu-operator
// v26.7.0, assets/state-mps-control-daemon/0400_daemonset.yaml), without
// their config-manager sidecar: the node's configuration is its
// DaemonSet's. An init container mounts a tmpfs at <root>/shm, shared
// with the host (Bidirectional), which the daemon and the pods the device
// plugin gives MPS-shared GPUs use as /dev/shm.
func podSpec(cp *gpuv1.ClusterPolicy, v state.Variant, configFile string) corev1.PodSpec {
	cfgEnv, cfgMounts, cfgVolumes := deviceplugin.ConfigSettings(cp, configFile)
	env := []corev1.EnvVar{
		render.FieldEnv("NODE_NAME", "spec.nodeName"),
		{Name: "MIG_STRATEGY", Value: string(cp.Spec.MIG.StrategyOrDefault())},
		{Name: "NVIDIA_VISIBLE_DEVICES", Value: "all"},
		{Name: "NVIDIA_DRIVER_CAPABILITIES", Value: "compute,utility"},
	}
	_, mounts, volumes := deviceplugin.MPSSettings(cp)
	inits := []corev1.Container{{
		Name:            MountsName,
		Command:         []string{"mps-control-daemon", "mount-shm"},
		SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
		VolumeMounts: []corev1.VolumeMount{{Name: "mps-root", MountPath: deviceplugin.MPSContainerRoot,
			MountPropagation: ptr.To(corev1.MountPropagationBidirectional)}},
	}}
	// Under CDI the runtime hands it the management spec's files: after a
	// driver upgrade, only once the spec names the new driver.
	if wait, waitVolumes := toolkit.WaitForSpec(&cp.Spec, render.Image(string(cp.Spec.DevicePlugin.Repository), string(cp.Spec.DevicePlugin.Image), string(cp.Spec.DevicePlugin.Version)),
		cp.Spec.DevicePlugin.ImagePullPolicy); wait != nil {
		inits = append([]corev1.Container{*wait}, inits...)
		volumes = render.AddVolumes(volumes, waitVolumes...)
	}
	return corev1.PodSpec{
		ServiceAccountName:           ServiceAccountName,
		AutomountServiceAccountToken: ptr.To(false),
		HostPID:                      true,
		RuntimeClassName:             state.RuntimeClassName(&cp.Spec, v.Runtime),
		InitContainers:               inits,
		Containers: []corev1.Container{{
			Name:            ContainerName,
			Command:         []string{"mps-control-daemon"},
			Env:             append(env, cfgEnv...),
			SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
			VolumeMounts:    append(mounts, cfgMounts...),
			// Ready once every GPU's MPS daemon started: it writes
			// /mps/.ready then, and removes it when it stops
			// (cmd/mps-control-daemon/main.go). From v0.20 the image is
			// distroless with a static busybox as /bin/sh
			// (deployments/container/Dockerfile): the test is the
			// shell's own, whatever applets are linked.
			ReadinessProbe: &corev1.Probe{
				ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
					Command: []string{"sh", "-c", "test -f " + deviceplugin.MPSContainerRoot + "/.ready"}}},
				PeriodSeconds: 5, FailureThreshold: 1,
			},
		}},
		Volumes: append(volumes, cfgVolumes...),
	}
}

// Kinds lists the kinds Render returns.
func (Operand) Kinds() []schema.GroupVersionKind {
	return []schema.GroupVersionKind{render.KindServiceAccount, render.KindDaemonSet}
}
