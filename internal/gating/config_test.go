package gating

import (
	"testing"

	. "github.com/onsi/gomega"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// A node runs the device plugin configuration its own label names, else
// its driver pool's, else the policy's default (no label); one it cannot
// run is told, and the node keeps what it runs.
func TestDevicePluginConfigOfANode(t *testing.T) {
	withConfigs := func(in *Input) {
		in.Policy.Spec.DevicePlugin.Config = &gpuv1.DevicePluginConfig{Name: "plugin-configs", Default: "plain"}
		in.Policy.Spec.Driver.NodePools = []gpuv1.DriverNodePool{{Name: "h200", DevicePluginConfig: "ts-4",
			NodeSelector: map[string]gpuv1.LabelValue{"gpu": "h200"}}}
		in.DevicePluginConfigs = []string{"plain", "ts-4", "ts-8", "mps-2"}
	}
	inPool := func(in *Input) { in.DriverPool = "h200" }
	noConfigMap := func(in *Input) { in.Policy.Spec.DevicePlugin.Config = nil }
	unread := func(in *Input) { in.DevicePluginConfigs = nil }
	tests := map[string]struct {
		label, current string
		mutate         []func(*Input)
		want           string
		told           bool
	}{
		"the default":                         {},
		"the pool's":                          {mutate: []func(*Input){inPool}, want: "ts-4"},
		"the node's label over the pool's":    {label: "ts-8", mutate: []func(*Input){inPool}, want: "ts-8"},
		"the default named is the default":    {label: "plain", current: "ts-8", want: ""},
		"a name the ConfigMap lacks":          {label: "ts-16", current: "ts-8", want: "ts-8", told: true},
		"a name the ConfigMap lacks, fresh":   {label: "ts-16", want: "", told: true},
		"no ConfigMap":                        {label: "ts-8", mutate: []func(*Input){noConfigMap}, want: "", told: true},
		"a name no label carries":             {label: "-ts", current: "ts-4", want: "ts-4", told: true},
		"the ConfigMap unread keeps the node": {label: "ts-8", current: "ts-4", mutate: []func(*Input){unread}, want: "ts-4"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			n, pods := readyNode()
			if tt.label != "" {
				n.Labels[gpuv1.LabelDevicePluginConfig] = tt.label
			}
			if tt.current != "" {
				n.Labels[gpuv1.LabelDevicePluginConfigInUse] = tt.current
			}
			r := decide(t, n, pods, append([]func(*Input){withConfigs}, tt.mutate...)...)
			if tt.want == "" {
				g.Expect(r.Labels).NotTo(HaveKey(gpuv1.LabelDevicePluginConfigInUse))
			} else {
				g.Expect(r.Labels).To(HaveKeyWithValue(gpuv1.LabelDevicePluginConfigInUse, tt.want))
			}
			if tt.told {
				g.Expect(reasons(r)).To(ContainElement("DevicePluginConfigInvalid"))
				g.Expect(r.Annotations).To(HaveKeyWithValue(AnnotationDevicePluginConfigRefused, ContainSubstring(tt.label)))
			} else {
				g.Expect(reasons(r)).NotTo(ContainElement("DevicePluginConfigInvalid"))
				g.Expect(r.Annotations).NotTo(HaveKey(AnnotationDevicePluginConfigRefused))
			}
			// A new configuration restarts nothing but what its DaemonSets
			// replace: every state stays ready.
			for _, s := range []state.Name{drv, tk, dp, dcg, gfd} {
				g.Expect(stateOf(r, s)).To(Equal("ready"), "state %s", s)
			}
		})
	}
}
