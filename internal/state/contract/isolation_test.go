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
	toolkitAccept   = tkv + "cmd/nvidia-ctk-installer/toolkit/toolkit.go (ACCEPT_NVIDIA_VISIBLE_DEVICES_* written to the runtime's config)"
	hookDeviceList  = tkv + "internal/config/image/cuda_image.go (VisibleDevices: CDI annotations, then mounts; the variable only when privileged or accepted; read by the hook and the CDI mode alike)"
	hookPrivileged  = tkv + "internal/config/image/privileged.go (privileged: CAP_SYS_ADMIN in the bounding set)"
	pluginListFlags = "NVIDIA/k8s-device-plugin@v0.20.0:cmd/nvidia-device-plugin/main.go (--device-list-strategy, env DEVICE_LIST_STRATEGY)"
)

// The safe default, with CDI or without: the device plugin passes GPU lists
// only in ways an allocation creates (CDI names in the container's
// annotations and CRI request, or volume mounts), and the runtime ignores
// NVIDIA_VISIBLE_DEVICES in unprivileged containers, so that a pod cannot
// use GPUs it did not request.
func TestGPUIsolationByDefault(t *testing.T) {
	want := map[string]string{"default": "cdi-annotations,cdi-cri", "cdi-off": "volume-mounts"}
	checked := map[string]int{}
	for _, p := range pods(t, state.DevicePlugin) {
		strategy, ok := want[p.policy]
		if !ok {
			continue
		}
		checked[p.policy]++
		if err := env(dp, "DEVICE_LIST_STRATEGY", strategy)(p); err != nil {
			t.Errorf("%s: %v (%s, %s)", p, err, pluginListFlags, hookDeviceList)
		}
	}
	for _, p := range pods(t, state.ContainerToolkit) {
		if _, ok := want[p.policy]; !ok {
			continue
		}
		checked[p.policy]++
		check := all(env(toolkit.ContainerName, "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", "false"),
			env(toolkit.ContainerName, "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS", "true"))
		if err := check(p); err != nil {
			t.Errorf("%s: %v (%s, %s)", p, err, toolkitAccept, hookDeviceList)
		}
	}
	for policy := range want {
		if checked[policy] == 0 {
			t.Errorf("no pod of the %s policy checked", policy)
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
