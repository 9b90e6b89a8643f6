package gating

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

const mgr = state.MIGManager

// withMIG turns migManager on, with an h200 pool of all-1g.18gb.
func withMIG(in *Input) {
	in.Policy.Spec.MIGManager = gpuv1.MIGManagerSpec{Enabled: ptr.To(true),
		Config: gpuv1.MIGManagerConfig{Default: "all-disabled"}}
	in.Policy.Spec.Driver.NodePools = []gpuv1.DriverNodePool{{Name: "h200", MIGConfig: "all-1g.18gb",
		NodeSelector: map[string]gpuv1.LabelValue{"gpu": "h200"}}}
	in.Enabled[mgr] = true
}

func inH200Pool(in *Input) { in.DriverPool = "h200" }

// A node's MIG configuration is a person's label, else its pool's, else
// the default on a MIG-capable node; the operator writes it where no
// person did, and leaves a person's alone.
func TestMIGConfigOfANode(t *testing.T) {
	tests := map[string]struct {
		labels, annotations map[string]string
		mutate              []func(*Input)
		want                string // the label's value after the decision
		written             bool   // the operator writes it
	}{
		"MIG not managed":                  {labels: map[string]string{gpuv1.LabelMIGCapable: "true"}},
		"not MIG-capable: nothing":         {mutate: []func(*Input){withMIG}},
		"MIG-capable: the default":         {labels: map[string]string{gpuv1.LabelMIGCapable: "true"}, mutate: []func(*Input){withMIG}, want: "all-disabled", written: true},
		"the pool's, before GFD says":      {mutate: []func(*Input){withMIG, inH200Pool}, want: "all-1g.18gb", written: true},
		"the pool's, not on a non-MIG GPU": {labels: map[string]string{gpuv1.LabelMIGCapable: "false"}, mutate: []func(*Input){withMIG, inH200Pool}},
		"a person's label wins": {labels: map[string]string{gpuv1.LabelMIGConfig: "all-3g.71gb"},
			mutate: []func(*Input){withMIG, inH200Pool}, want: "all-3g.71gb"},
		"the operator's label follows the pool": {labels: map[string]string{gpuv1.LabelMIGConfig: "all-disabled"},
			annotations: map[string]string{gpuv1.AnnotationMIGConfigWritten: "all-disabled"},
			mutate:      []func(*Input){withMIG, inH200Pool}, want: "all-1g.18gb", written: true},
		"opted out of mig-manager": {labels: map[string]string{gpuv1.DeployLabel(string(mgr)): "false"},
			mutate: []func(*Input){withMIG, inH200Pool}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			n, pods := readyNode()
			for k, v := range tt.labels {
				n.Labels[k] = v
			}
			n.Annotations = mergeMaps(n.Annotations, tt.annotations)
			r := decide(t, n, pods, tt.mutate...)
			if tt.written {
				g.Expect(r.Labels).To(HaveKeyWithValue(gpuv1.LabelMIGConfig, tt.want))
				g.Expect(r.Annotations).To(HaveKeyWithValue(gpuv1.AnnotationMIGConfigWritten, tt.want))
				return
			}
			g.Expect(r.Labels).NotTo(HaveKey(gpuv1.LabelMIGConfig), "a person's label, or none, is not the operator's to write")
			g.Expect(r.Annotations).NotTo(HaveKey(gpuv1.AnnotationMIGConfigWritten))
		})
	}
}

// The mig-manager state gates the device plugin, GFD and dcgm-exporter
// on the node's reconfiguration: they leave only once its GPU pods are
// gone, come back once the configuration is applied, and a failure keeps
// them off. A serving node waiting for its turn keeps them; a new node
// waits for its configuration before they start.
func TestMIGStateGatesTheGPUClients(t *testing.T) {
	tests := map[string]struct {
		labels      map[string]string
		annotations map[string]string
		serving     bool
		want        gpuv1.StateValue
		leaves      bool // the clients restart: a StateReset event
	}{
		"no configuration":           {serving: true, want: gpuv1.StateDisabled},
		"applied":                    {labels: map[string]string{gpuv1.LabelMIGConfig: "a"}, annotations: map[string]string{gpuv1.AnnotationMIGApplied: "a"}, serving: true, want: gpuv1.StateReady},
		"serving, waiting its turn":  {labels: map[string]string{gpuv1.LabelMIGConfig: "b", gpuv1.LabelMIGReconfigureState: "reconfigure-required"}, annotations: map[string]string{gpuv1.AnnotationMIGApplied: "a"}, serving: true, want: gpuv1.StateReady},
		"new node, waiting its turn": {labels: map[string]string{gpuv1.LabelMIGConfig: "b"}, want: gpuv1.StatePending},
		// Finding 2 of issue 25: an upgrade's or a repair's driver reload
		// takes the device plugin off a node waiting its turn; its
		// mig-manager must stay ready, or the plugin never comes back
		// and the upgrade's validation fails.
		"served, its driver reloaded, waiting its turn": {labels: map[string]string{gpuv1.LabelMIGConfig: "b", gpuv1.LabelMIGReconfigureState: "reconfigure-required"},
			annotations: map[string]string{gpuv1.AnnotationMIGApplied: "all-disabled", gpuv1.AnnotationServed: "true"}, want: gpuv1.StateReady},
		"served, its driver reloaded, none applied yet": {labels: map[string]string{gpuv1.LabelMIGConfig: "b"},
			annotations: map[string]string{gpuv1.AnnotationServed: "true"}, want: gpuv1.StateReady},
		"evicting":                   {labels: map[string]string{gpuv1.LabelMIGConfig: "b", gpuv1.LabelMIGReconfigureState: "eviction-required"}, serving: true, want: gpuv1.StateReady},
		"new node, refused":          {labels: map[string]string{gpuv1.LabelMIGConfig: "typo"}, annotations: map[string]string{gpuv1.AnnotationMIGRefused: "no such configuration"}, want: gpuv1.StateFailed, leaves: true},
		"serving, refused":           {labels: map[string]string{gpuv1.LabelMIGConfig: "typo"}, annotations: map[string]string{gpuv1.AnnotationMIGApplied: "a", gpuv1.AnnotationMIGRefused: "no such configuration"}, serving: true, want: gpuv1.StateReady},
		"new node, evicting nothing": {labels: map[string]string{gpuv1.LabelMIGConfig: "b", gpuv1.LabelMIGReconfigureState: "eviction-required"}, want: gpuv1.StatePending},
		"clients leave":              {labels: map[string]string{gpuv1.LabelMIGConfig: "b", gpuv1.LabelMIGReconfigureState: "clients-off-required"}, serving: true, want: gpuv1.StatePending, leaves: true},
		"applying":                   {labels: map[string]string{gpuv1.LabelMIGConfig: "b", gpuv1.LabelMIGReconfigureState: "apply-required"}, want: gpuv1.StatePending},
		"validating: clients back":   {labels: map[string]string{gpuv1.LabelMIGConfig: "b", gpuv1.LabelMIGReconfigureState: "validation-required"}, annotations: map[string]string{gpuv1.AnnotationMIGApplied: "b"}, want: gpuv1.StateReady},
		"failed":                     {labels: map[string]string{gpuv1.LabelMIGConfig: "b", gpuv1.LabelMIGReconfigureState: "reconfigure-failed"}, annotations: map[string]string{gpuv1.AnnotationMIGReason: "attempt 3 of 3"}, serving: true, want: gpuv1.StateFailed, leaves: true},
		// MIG devices last as long as the boot and the driver they were
		// created under (readyNode: boot-1, driver pod d1).
		"devices made under this driver": {labels: map[string]string{gpuv1.LabelMIGConfig: "a", gpuv1.LabelMIGReconfigureState: "reconfigure-done"},
			annotations: map[string]string{gpuv1.AnnotationMIGApplied: "a", gpuv1.AnnotationMIGAppliedUnder: "boot-1/d1"}, serving: true, want: gpuv1.StateReady},
		"devices lost to a reboot": {labels: map[string]string{gpuv1.LabelMIGConfig: "a", gpuv1.LabelMIGReconfigureState: "reconfigure-done"},
			annotations: map[string]string{gpuv1.AnnotationMIGApplied: "a", gpuv1.AnnotationMIGAppliedUnder: "boot-0/d1"}, serving: true, want: gpuv1.StatePending, leaves: true},
		"devices lost to a new driver": {labels: map[string]string{gpuv1.LabelMIGConfig: "a"},
			annotations: map[string]string{gpuv1.AnnotationMIGApplied: "a", gpuv1.AnnotationMIGAppliedUnder: "boot-1/d0"}, want: gpuv1.StatePending},
		"lost, and refused now": {labels: map[string]string{gpuv1.LabelMIGConfig: "a", gpuv1.LabelMIGReconfigureState: "reconfigure-done"},
			annotations: map[string]string{gpuv1.AnnotationMIGApplied: "a", gpuv1.AnnotationMIGAppliedUnder: "boot-0/d1",
				gpuv1.AnnotationMIGRefused: "ConfigMap x (migManager.config.name) does not exist"}, serving: true, want: gpuv1.StateFailed, leaves: true},
		"lost, and none wanted": {annotations: map[string]string{gpuv1.AnnotationMIGApplied: "a", gpuv1.AnnotationMIGAppliedUnder: "boot-0/d1"},
			serving: true, want: gpuv1.StateReady},
		"lost while validating": {labels: map[string]string{gpuv1.LabelMIGConfig: "b", gpuv1.LabelMIGReconfigureState: "validation-required"},
			annotations: map[string]string{gpuv1.AnnotationMIGApplied: "b", gpuv1.AnnotationMIGAppliedUnder: "boot-0/d1"}, want: gpuv1.StatePending},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			n, pods := readyNode()
			n.Labels[gpuv1.StateLabel(string(mgr))] = string(gpuv1.StateReady)
			if !tt.serving {
				n.Status.Allocatable = nil
				n.Labels[gpuv1.StateLabel(string(mgr))] = string(gpuv1.StatePending)
				for _, s := range []state.Name{dp, dcg, gfd} {
					n.Labels[gpuv1.StateLabel(string(s))] = string(gpuv1.StatePending)
					delete(pods, s)
				}
			}
			// A person's label: written by no operator.
			for k, v := range tt.labels {
				n.Labels[k] = v
			}
			n.Annotations = mergeMaps(n.Annotations, tt.annotations)
			r := decide(t, n, pods, withMIG)
			g.Expect(stateOf(r, mgr)).To(Equal(string(tt.want)), r.Why[mgr])
			if tt.want != gpuv1.StateReady && tt.want != gpuv1.StateDisabled {
				g.Expect(stateOf(r, dp)).To(Equal(string(gpuv1.StatePending)), "the device plugin waits for it")
				g.Expect(r.Why[mgr]).NotTo(BeEmpty())
			}
			if tt.leaves {
				g.Expect(reasons(r)).To(ContainElement(Or(Equal("StateReset"), Equal("StateFailed"))))
			} else {
				g.Expect(reasons(r)).NotTo(ContainElement(Or(Equal("StateReset"), Equal("StateFailed"))))
			}
		})
	}
}

// After an operator upgrade, a node has no mig-manager label yet: it
// gates nothing, and nothing restarts for it.
func TestUnlabelledMIGStateGatesNothing(t *testing.T) {
	g := NewWithT(t)
	n, pods := readyNode()
	r := decide(t, n, pods)
	g.Expect(stateOf(r, mgr)).To(Equal(string(gpuv1.StateDisabled)))
	g.Expect(stateOf(r, dp)).To(Equal(string(gpuv1.StateReady)))
	g.Expect(r.Events).To(BeEmpty())
}

func mergeMaps(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// mig-manager v0.12 pauses the GPU clients' deploy labels while it applies
// and restores them after; killed in between, it would leave them paused.
// The operator takes a paused label for "true": its gates hold the
// clients off during an apply, and nothing stays off after one.
func TestPausedDeployLabelIsTrue(t *testing.T) {
	g := NewWithT(t)
	n, pods := readyNode()
	n.Labels[gpuv1.DeployLabel(string(dp))] = gpuv1.DeployPausedForMIG
	r := decide(t, n, pods)
	g.Expect(r.Labels).To(HaveKeyWithValue(gpuv1.DeployLabel(string(dp)), gpuv1.LabelTrue))
	g.Expect(stateOf(r, dp)).To(Equal(string(gpuv1.StateReady)))
	n.Labels[gpuv1.DeployLabel(string(dp))] = "off-for-maintenance"
	r = decide(t, n, pods)
	g.Expect(r.Labels).NotTo(HaveKey(gpuv1.DeployLabel(string(dp))), "a person's own value stays theirs")
	g.Expect(stateOf(r, dp)).To(Equal(string(gpuv1.StateDisabled)))
}
