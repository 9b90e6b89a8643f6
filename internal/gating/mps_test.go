package gating

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

const mpsd = state.MPSControlDaemon

// withMPSConfigs names a ConfigMap with a plain and an MPS configuration.
func withMPSConfigs(in *Input) {
	in.Policy.Spec.DevicePlugin.Config = &gpuv1.DevicePluginConfig{Name: "plugin-configs", Default: "plain"}
	in.DevicePluginConfigs = map[string]string{"plain": "", "mps-2": ""}
	in.CopiedDevicePluginConfigs = map[string]bool{"plain": true, "mps-2": true}
	in.MPSConfigs = map[string]bool{"mps-2": true}
	in.Enabled[mpsd] = true
}

// A node on an MPS configuration runs the MPS control daemon before its
// device plugin; others have the state disabled. What the device plugin
// refuses with MPS (mig.strategy mixed, MIG devices) and a node opted out
// of the daemon are refused, and the node keeps what it runs.
func TestMPSControlDaemonOfANode(t *testing.T) {
	tests := map[string]struct {
		labels  map[string]string
		mutate  []func(*Input)
		daemon  bool // the daemon's pod runs, ready
		want    gpuv1.StateValue
		config  string // the configuration the node runs
		refused string
	}{
		"not MPS":               {want: gpuv1.StateDisabled},
		"MPS, no daemon yet":    {labels: map[string]string{gpuv1.LabelDevicePluginConfig: "mps-2"}, want: gpuv1.StatePending, config: "mps-2"},
		"MPS, daemon ready":     {labels: map[string]string{gpuv1.LabelDevicePluginConfig: "mps-2"}, daemon: true, want: gpuv1.StateReady, config: "mps-2"},
		"device plugin off":     {labels: map[string]string{gpuv1.LabelDevicePluginConfig: "mps-2", gpuv1.DeployLabel(string(dp)): "false"}, want: gpuv1.StateDisabled, config: "mps-2"},
		"MIG strategy mixed":    {labels: map[string]string{gpuv1.LabelDevicePluginConfig: "mps-2"}, mutate: []func(*Input){func(in *Input) { in.Policy.Spec.MIG.Strategy = gpuv1.MIGStrategyMixed }}, want: gpuv1.StateDisabled, refused: "mig.strategy mixed"},
		"MIG devices":           {labels: map[string]string{gpuv1.LabelDevicePluginConfig: "mps-2", gpuv1.LabelMIGConfig: "all-1g.18gb"}, mutate: []func(*Input){withMIGOn}, want: gpuv1.StateDisabled, refused: "MIG devices"},
		"daemon opted out":      {labels: map[string]string{gpuv1.LabelDevicePluginConfig: "mps-2", gpuv1.DeployLabel(string(mpsd)): "false"}, want: gpuv1.StateDisabled, refused: "opted out of the MPS control daemon"},
		"ConfigMap unread, MPS": {labels: map[string]string{gpuv1.LabelDevicePluginConfigInUse: "mps-2", gpuv1.StateLabel(string(mpsd)): "ready"}, mutate: []func(*Input){func(in *Input) { in.DevicePluginConfigs, in.MPSConfigs = nil, nil }}, daemon: true, want: gpuv1.StateReady, config: "mps-2"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			n, pods := readyNode()
			for k, v := range tt.labels {
				n.Labels[k] = v
			}
			if tt.daemon {
				pods[mpsd] = readyPod("m1", now.Add(-2*grace))
			}
			r := decide(t, n, pods, append([]func(*Input){withMPSConfigs}, tt.mutate...)...)
			g.Expect(stateOf(r, mpsd)).To(Equal(string(tt.want)), r.Why[mpsd])
			g.Expect(r.Labels[gpuv1.LabelDevicePluginConfigInUse]).To(Equal(tt.config))
			if tt.want == gpuv1.StatePending {
				g.Expect(r.Why[dp]).To(Equal("waiting for mps-control-daemon"))
			}
			if tt.refused != "" {
				g.Expect(r.Annotations).To(HaveKeyWithValue(AnnotationDevicePluginConfigRefused, ContainSubstring(tt.refused)))
			} else {
				g.Expect(r.Annotations).NotTo(HaveKey(AnnotationDevicePluginConfigRefused))
			}
		})
	}
}

// From one MPS configuration to another, the daemon's state leaves ready
// at once: the new configuration's plugin waits for the new daemon, which
// the grace period of a replaced pod would otherwise hide.
func TestMPSConfigChangeRestartsInOrder(t *testing.T) {
	g := NewWithT(t)
	n, pods := readyNode()
	n.Labels[gpuv1.LabelDevicePluginConfigInUse] = "mps-2"
	n.Labels[gpuv1.LabelDevicePluginConfig] = "mps-4"
	n.Labels[gpuv1.StateLabel(string(mpsd))] = "ready"
	delete(pods, mpsd) // the old daemon's pod is going
	r := decide(t, n, pods, withMPSConfigs, func(in *Input) {
		in.DevicePluginConfigs["mps-4"] = ""
		in.MPSConfigs["mps-4"] = true
		in.CopiedDevicePluginConfigs["mps-4"] = true
	})
	g.Expect(r.Labels[gpuv1.LabelDevicePluginConfigInUse]).To(Equal("mps-4"))
	g.Expect(stateOf(r, mpsd)).To(Equal("pending"))
	g.Expect(stateOf(r, dp)).To(Equal("pending"))
	g.Expect(reasons(r)).To(ContainElement("StateReset"))
}

func withMIGOn(in *Input) {
	in.Policy.Spec.MIGManager = gpuv1.MIGManagerSpec{Enabled: ptr.To(true)}
	in.Enabled[state.MIGManager] = true
}
