package contract

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/toolkit"
)

// Sources of how a container is given GPUs, at the versions we ship.
const (
	toolkitAccept   = "NVIDIA/nvidia-container-toolkit@v1.17.8:tools/container/toolkit/toolkit.go:165-176,455-456 (written to the runtime's config)"
	hookDeviceList  = "NVIDIA/nvidia-container-toolkit@v1.17.8:cmd/nvidia-container-runtime-hook/container_config.go:160-182 (mounts first; the variable only when privileged or accepted)"
	hookPrivileged  = "NVIDIA/nvidia-container-toolkit@v1.17.8:internal/config/image/privileged.go:37-41 (privileged: CAP_SYS_ADMIN in the bounding set)"
	pluginListFlags = "NVIDIA/k8s-device-plugin@v0.17.2:cmd/nvidia-device-plugin/main.go (--device-list-strategy, env DEVICE_LIST_STRATEGY)"
)

// The safe default: the device plugin passes GPU lists as volume mounts,
// which only an allocation creates, and the runtime ignores
// NVIDIA_VISIBLE_DEVICES in unprivileged containers, so that a pod cannot
// use GPUs it did not request.
func TestGPUIsolationByDefault(t *testing.T) {
	for _, p := range pods(t, state.DevicePlugin) {
		if p.policy != "default" {
			continue
		}
		if err := env(dp, "DEVICE_LIST_STRATEGY", "volume-mounts")(p); err != nil {
			t.Errorf("%s: %v (%s, %s)", p, err, pluginListFlags, hookDeviceList)
		}
	}
	for _, p := range pods(t, state.ContainerToolkit) {
		if p.policy != "default" {
			continue
		}
		check := all(env(toolkit.ContainerName, "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", "false"),
			env(toolkit.ContainerName, "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS", "true"))
		if err := check(p); err != nil {
			t.Errorf("%s: %v (%s, %s)", p, err, toolkitAccept, hookDeviceList)
		}
	}
}

// Every operand container that asks for every GPU through
// NVIDIA_VISIBLE_DEVICES, without requesting one, is privileged in the
// runtime's sense, or it would start without GPUs under the default above.
func TestOperandsThatSeeAllGPUsArePrivileged(t *testing.T) {
	checked := 0
	for _, name := range []state.Name{state.DevicePlugin, state.DCGMExporter, state.GPUFeatureDiscovery, state.ContainerToolkit, state.Driver} {
		for _, p := range pods(t, name) {
			for _, c := range slices.Concat(p.pod.InitContainers, p.pod.Containers) {
				if !slices.Contains(c.Env, corev1.EnvVar{Name: "NVIDIA_VISIBLE_DEVICES", Value: "all"}) {
					continue
				}
				checked++
				sc := c.SecurityContext
				privileged := sc != nil && sc.Privileged != nil && *sc.Privileged
				sysAdmin := sc != nil && sc.Capabilities != nil && slices.Contains(sc.Capabilities.Add, "SYS_ADMIN")
				if !privileged && !sysAdmin {
					t.Errorf("%s: container %s sets NVIDIA_VISIBLE_DEVICES=all but is neither privileged nor adds SYS_ADMIN (%s)", p, c.Name, hookPrivileged)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no operand sets NVIDIA_VISIBLE_DEVICES=all: the check checked nothing")
	}
}
