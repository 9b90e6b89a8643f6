package toolkit

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
)

func toolkitEnv(g Gomega, cp *gpuv1.ClusterPolicy) map[string]string {
	objs, err := Operand{}.Render(state.RenderInput{Policy: cp, Namespace: fixture.Namespace})
	g.Expect(err).NotTo(HaveOccurred())
	env := map[string]string{}
	for _, e := range objs[1].(*appsv1.DaemonSet).Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	return env
}

// By default no unprivileged pod gets a GPU by naming it in
// NVIDIA_VISIBLE_DEVICES; a device plugin the user sets to pass lists
// through that variable gets a runtime that accepts it, or its pods would
// start without GPUs; the user's toolkit.env has the last word.
func TestRuntimeFollowsTheDeviceListStrategy(t *testing.T) {
	tests := map[string]struct {
		plugin, toolkit []gpuv1.EnvVar
		cdiOff          bool
		strategy        string
		acceptEnvvar    string
	}{
		"default: CDI names only":         {strategy: "cdi-annotations,cdi-cri", acceptEnvvar: "false"},
		"without CDI: volume mounts only": {cdiOff: true, strategy: "volume-mounts", acceptEnvvar: "false"},
		"user's plugin passes the variable": {
			plugin:   []gpuv1.EnvVar{{Name: "DEVICE_LIST_STRATEGY", Value: "envvar"}},
			strategy: "envvar", acceptEnvvar: "true"},
		"variable among several strategies": {
			plugin:   []gpuv1.EnvVar{{Name: "DEVICE_LIST_STRATEGY", Value: "envvar,cdi-annotations"}},
			strategy: "envvar,cdi-annotations", acceptEnvvar: "true"},
		"the plugin's last entry counts, as in its env": {
			plugin: []gpuv1.EnvVar{{Name: "DEVICE_LIST_STRATEGY", Value: "volume-mounts"},
				{Name: "DEVICE_LIST_STRATEGY", Value: "envvar"}},
			strategy: "envvar", acceptEnvvar: "true"},
		"user's toolkit setting wins": {
			toolkit:  []gpuv1.EnvVar{{Name: "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", Value: "true"}},
			strategy: "cdi-annotations,cdi-cri", acceptEnvvar: "true"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ps, err := fixture.Policies()
			g.Expect(err).NotTo(HaveOccurred())
			cp := ps["default"]
			cp.Spec.DevicePlugin.Env, cp.Spec.Toolkit.Env = tt.plugin, tt.toolkit
			cp.Spec.CDI.Enabled = ptr.To(!tt.cdiOff)
			g.Expect(state.DeviceListStrategy(&cp.Spec)).To(Equal(tt.strategy))
			env := toolkitEnv(g, cp)
			g.Expect(env).To(HaveKeyWithValue("ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", tt.acceptEnvvar))
			g.Expect(env).To(HaveKeyWithValue("ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS", "true"))
		})
	}
}
