package gating

import (
	"testing"

	. "github.com/onsi/gomega"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// A node runs the device plugin configuration its own label names, else
// its driver pool's, else the policy's default (no label). One it cannot
// run is refused, and the node keeps what it runs, or goes back to the
// default when that is no longer runnable either; a change waits while
// GPU pods run there. Each is told once and stays in an annotation.
func TestDevicePluginConfigOfANode(t *testing.T) {
	withConfigs := func(in *Input) {
		in.Policy.Spec.DevicePlugin.Config = &gpuv1.DevicePluginConfig{Name: "plugin-configs", Default: "plain"}
		in.Policy.Spec.Driver.NodePools = []gpuv1.DriverNodePool{{Name: "h200", DevicePluginConfig: "ts-4",
			NodeSelector: map[string]gpuv1.LabelValue{"gpu": "h200"}}}
		in.DevicePluginConfigs = map[string]string{"plain": "", "ts-4": "", "ts-8": "", "mps-2": "MPS sharing needs its control daemon"}
		in.CopiedDevicePluginConfigs = map[string]bool{"plain": true, "ts-4": true, "ts-8": true}
	}
	inPool := func(in *Input) { in.DriverPool = "h200" }
	noConfigMap := func(in *Input) { in.Policy.Spec.DevicePlugin.Config = nil }
	unread := func(in *Input) { in.DevicePluginConfigs = nil }
	busy := func(in *Input) { in.GPUPods = 2 }
	tsRemoved := func(in *Input) { delete(in.DevicePluginConfigs, "ts-4") }
	tsBroken := func(in *Input) {
		in.DevicePluginConfigs["ts-4"] = "sharing.timeSlicing.resources[0].replicas: -4 is not at least 2"
	}
	badDefault := func(in *Input) { in.Policy.Spec.DevicePlugin.Config.Default = "gone" }
	// The operator keeps the last good copy of a file broken or removed
	// since (pluginconfig.ValidatedConfigMap).
	tsKept := func(in *Input) { in.KeptDevicePluginConfigs = map[string]bool{"ts-4": true} }
	plainBroken := func(in *Input) { in.DevicePluginConfigs["plain"] = "not a device plugin configuration file" }
	plainKept := func(in *Input) { in.KeptDevicePluginConfigs = map[string]bool{"plain": true} }
	notCopied := func(name string) func(*Input) {
		return func(in *Input) { delete(in.CopiedDevicePluginConfigs, name) }
	}
	mpsKept := func(in *Input) {
		in.DevicePluginConfigs["mps-2"] = "not a device plugin configuration file"
		in.KeptDevicePluginConfigs, in.MPSConfigs = map[string]bool{"mps-2": true}, map[string]bool{"mps-2": true}
		in.Policy.Spec.MIG.Strategy = gpuv1.MIGStrategyMixed
	}
	tests := map[string]struct {
		label, current string
		mutate         []func(*Input)
		want           string
		refused        string
		waiting        bool
	}{
		"the default":                         {},
		"the pool's":                          {mutate: []func(*Input){inPool}, want: "ts-4"},
		"the node's label over the pool's":    {label: "ts-8", mutate: []func(*Input){inPool}, want: "ts-8"},
		"the default named is the default":    {label: "plain", current: "ts-8", want: ""},
		"a key the ConfigMap lacks":           {label: "ts-16", current: "ts-8", want: "ts-8", refused: "it holds: mps-2, plain, ts-4, ts-8"},
		"a key the ConfigMap lacks, fresh":    {label: "ts-16", want: "", refused: `"ts-16"`},
		"a file it cannot run":                {label: "mps-2", current: "ts-4", want: "ts-4", refused: "control daemon"},
		"what it runs is gone: the default":   {label: "ts-16", current: "ts-4", mutate: []func(*Input){tsRemoved}, want: "", refused: "The node runs the default"},
		"no ConfigMap: no label, told":        {label: "ts-8", current: "ts-8", mutate: []func(*Input){noConfigMap}, want: "", refused: "names no ConfigMap"},
		"the ConfigMap unread keeps the node": {label: "ts-8", current: "ts-4", mutate: []func(*Input){unread}, want: "ts-4"},
		"a default the ConfigMap lacks":       {mutate: []func(*Input){badDefault}, want: "", refused: `devicePlugin.config.default "gone"`},
		"GPU pods hold the change":            {label: "ts-8", current: "ts-4", mutate: []func(*Input){busy}, want: "ts-4", waiting: true},
		"GPU pods hold no change":             {label: "ts-4", current: "ts-4", mutate: []func(*Input){busy}, want: "ts-4"},
		// Finding 3 of issue 25: a broken file, or the ConfigMap recreated
		// without the key, must not move a node whose GPU pods hold shared
		// replicas (GPU-x::n) to whole GPUs under them.
		"GPU pods hold a move off a refused one": {label: "ts-4", current: "ts-4", mutate: []func(*Input){busy, tsBroken}, want: "ts-4",
			refused: "The node runs the default", waiting: true},
		"GPU pods hold a move off a gone one": {label: "ts-4", current: "ts-4", mutate: []func(*Input){busy, tsRemoved}, want: "ts-4",
			refused: "The node runs the default", waiting: true},
		// Issue 55: what a node runs is the operator's validated copy; a
		// file broken or removed since keeps its last good copy there,
		// and the node keeps running it, GPU pods or not.
		"a broken edit keeps the last good copy": {label: "ts-4", current: "ts-4", mutate: []func(*Input){tsBroken, tsKept}, want: "ts-4",
			refused: "The node runs the last good copy of ts-4"},
		"a removed key keeps the last good copy": {label: "ts-4", current: "ts-4", mutate: []func(*Input){tsRemoved, tsKept}, want: "ts-4",
			refused: "The node runs the last good copy of ts-4"},
		"a broken edit moves no node onto its copy": {label: "ts-4", current: "ts-8", mutate: []func(*Input){tsBroken, tsKept}, want: "ts-8",
			refused: "The node runs ts-8"},
		"a broken default never good: built-in defaults": {mutate: []func(*Input){plainBroken}, want: "",
			refused: "they run the device plugin's built-in defaults"},
		"a broken default runs its last good copy": {mutate: []func(*Input){plainBroken, plainKept}, want: "",
			refused: "they run its last good copy"},
		"a kept MPS copy still needs what MPS needs": {label: "mps-2", current: "mps-2", mutate: []func(*Input){mpsKept}, want: "",
			refused: "The node runs the default"},
		// A node moves only to a file its pods can read: one the validated
		// ConfigMap holds.
		"a valid file not copied yet waits": {label: "ts-8", current: "ts-4", mutate: []func(*Input){notCopied("ts-8")}, want: "ts-4"},
		"back to the default needs no copy": {current: "ts-4", mutate: []func(*Input){notCopied("plain")}, want: ""},
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
			if tt.refused != "" {
				g.Expect(r.Annotations).To(HaveKeyWithValue(AnnotationDevicePluginConfigRefused, ContainSubstring(tt.refused)))
				g.Expect(reasons(r)).To(ContainElement("DevicePluginConfig"))
			} else {
				g.Expect(r.Annotations).NotTo(HaveKey(AnnotationDevicePluginConfigRefused))
			}
			if tt.waiting {
				g.Expect(r.Annotations).To(HaveKeyWithValue(AnnotationDevicePluginConfigWaiting, ContainSubstring("2 GPU pod(s)")))
				g.Expect(r.RequeueAfter).To(BeNumerically(">", 0))
			} else {
				g.Expect(r.Annotations).NotTo(HaveKey(AnnotationDevicePluginConfigWaiting))
			}
			if tt.refused == "" && !tt.waiting {
				g.Expect(reasons(r)).NotTo(ContainElement("DevicePluginConfig"))
			}
			// A new configuration restarts nothing but what its DaemonSets
			// replace: every state stays ready.
			for _, s := range []state.Name{drv, tk, dp, dcg, gfd} {
				g.Expect(stateOf(r, s)).To(Equal("ready"), "state %s", s)
			}
		})
	}
}

// A refusal is told once: the next decision, on the node as the first
// left it, records the same annotation and no event.
func TestDevicePluginConfigToldOnce(t *testing.T) {
	g := NewWithT(t)
	n, pods := readyNode()
	n.Labels[gpuv1.LabelDevicePluginConfig] = "ts-16"
	cfg := func(in *Input) {
		in.Policy.Spec.DevicePlugin.Config = &gpuv1.DevicePluginConfig{Name: "plugin-configs"}
		in.DevicePluginConfigs = map[string]string{"ts-4": ""}
		in.CopiedDevicePluginConfigs = map[string]bool{"ts-4": true}
	}
	first := decide(t, n, pods, cfg)
	g.Expect(reasons(first)).To(ContainElement("DevicePluginConfig"))
	n.Annotations = first.Annotations
	again := decide(t, n, pods, cfg)
	g.Expect(again.Annotations).To(HaveKey(AnnotationDevicePluginConfigRefused))
	g.Expect(reasons(again)).NotTo(ContainElement("DevicePluginConfig"))
}
