package modeswitch

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

var (
	now    = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	long   = now.Add(-time.Hour)
	policy = Policy{EvictionTimeout: 5 * time.Minute, PluginsOffTimeout: 10 * time.Minute, ValidationTimeout: 10 * time.Minute}
)

const (
	dp   = gpuv1.AllocationDevicePlugin
	dra  = gpuv1.AllocationDRA
	none = gpuv1.AllocationNone
)

func TestNext(t *testing.T) {
	// toDRA is a node of a pool moved to dra, in state st of its switch.
	toDRA := func(st gpuv1.ModeSwitchState, f Facts) Facts {
		f.State, f.Desired, f.Now = st, dra, now
		if f.Since.IsZero() {
			f.Since = now
		}
		if f.Current == "" {
			f.Current = dp
		}
		if st != gpuv1.ModeSwitchRequired && f.Target == "" {
			f.Target = dra
		}
		return f
	}
	tests := map[string]struct {
		facts        Facts
		want         gpuv1.ModeSwitchState
		action       Action
		target, hold gpuv1.AllocationMode
		requeue      bool
	}{
		"in its pool's mode":      {facts: Facts{Current: dp, Desired: dp}, want: ""},
		"its pool moved":          {facts: Facts{Current: dp, Desired: dra}, want: gpuv1.ModeSwitchRequired},
		"moved after a switch":    {facts: Facts{State: gpuv1.ModeSwitchDone, Current: dra, Desired: dp}, want: gpuv1.ModeSwitchRequired},
		"done, and in its mode":   {facts: Facts{State: gpuv1.ModeSwitchDone, Current: dra, Desired: dra}, want: gpuv1.ModeSwitchDone},
		"moved, refused":          {facts: Facts{Current: dp, Desired: dra, Refused: "no CDI"}, want: ""},
		"a hold whose state went": {facts: Facts{Current: none, Desired: dra, Target: dra, Hold: none}, want: gpuv1.ModeSwitchRequired, target: dra, hold: none},
		"queued, over budget":     {facts: toDRA(gpuv1.ModeSwitchRequired, Facts{}), want: gpuv1.ModeSwitchRequired},
		"queued, admitted":        {facts: toDRA(gpuv1.ModeSwitchRequired, Facts{Admitted: true}), want: gpuv1.ModeSwitchEviction, target: dra},
		"queued, the pool back":   {facts: toDRA(gpuv1.ModeSwitchRequired, Facts{Current: dra, Admitted: true}), want: ""},
		"queued, refused since":   {facts: toDRA(gpuv1.ModeSwitchRequired, Facts{Refused: "no CDI", Admitted: true}), want: ""},
		"queued with a hold, refused: back to the device plugin": {
			facts: toDRA(gpuv1.ModeSwitchRequired, Facts{Current: none, Hold: none, Refused: "no CDI", Admitted: true}),
			want:  gpuv1.ModeSwitchEviction, target: dp, hold: none},
		"GPU pods to evict": {facts: toDRA(gpuv1.ModeSwitchEviction, Facts{GPUPods: 2}), want: gpuv1.ModeSwitchEviction,
			action: EvictGPUPods, target: dra},
		"GPU pods gone: mode none": {facts: toDRA(gpuv1.ModeSwitchEviction, Facts{}), want: gpuv1.ModeSwitchPluginsOff, target: dra, hold: none},
		"GPU pods past the timeout": {facts: toDRA(gpuv1.ModeSwitchEviction, Facts{GPUPods: 1, Since: long}),
			want: gpuv1.ModeSwitchRequired, requeue: true},
		"GPU pods past the timeout, again and again": {facts: toDRA(gpuv1.ModeSwitchEviction, Facts{GPUPods: 1, Since: long, Requeues: MaxRequeues - 1}),
			want: gpuv1.ModeSwitchFailed, target: dra},
		"evicting, the pool back": {facts: toDRA(gpuv1.ModeSwitchEviction, Facts{Current: dra, Target: dp, GPUPods: 1}), want: ""},
		"plugin still there": {facts: toDRA(gpuv1.ModeSwitchPluginsOff, Facts{Current: none, Hold: none, PluginPods: 1, Slices: 1}),
			want: gpuv1.ModeSwitchPluginsOff, target: dra, hold: none},
		"plugin gone, its slices left": {facts: toDRA(gpuv1.ModeSwitchPluginsOff, Facts{Current: none, Hold: none, Slices: 2}),
			want: gpuv1.ModeSwitchPluginsOff, action: DeleteSlices, target: dra, hold: none},
		"all gone: the new mode": {facts: toDRA(gpuv1.ModeSwitchPluginsOff, Facts{Current: none, Hold: none}),
			want: gpuv1.ModeSwitchPluginOn, target: dra, hold: dra},
		"all gone, the pool back: the old mode": {facts: toDRA(gpuv1.ModeSwitchPluginsOff, Facts{Current: none, Hold: none, Target: dp}),
			want: gpuv1.ModeSwitchPluginOn, target: dra, hold: dra},
		"all gone, the new mode refused since": {facts: toDRA(gpuv1.ModeSwitchPluginsOff, Facts{Current: none, Hold: none, Refused: "no CDI"}),
			want: gpuv1.ModeSwitchPluginOn, target: dp, hold: dp},
		"plugins off past the timeout": {facts: toDRA(gpuv1.ModeSwitchPluginsOff, Facts{Current: none, Hold: none, PluginPods: 1, Since: long}),
			want: gpuv1.ModeSwitchFailed, target: dra, hold: none},
		"the new plugin not serving yet": {facts: toDRA(gpuv1.ModeSwitchPluginOn, Facts{Current: dra, Hold: dra}),
			want: gpuv1.ModeSwitchPluginOn, target: dra, hold: dra},
		"the new plugin serves": {facts: toDRA(gpuv1.ModeSwitchPluginOn, Facts{Current: dra, Hold: dra, Serving: true}), want: gpuv1.ModeSwitchDone},
		"the new plugin never serves": {facts: toDRA(gpuv1.ModeSwitchPluginOn, Facts{Current: dra, Hold: dra, Since: long}),
			want: gpuv1.ModeSwitchFailed, target: dra, hold: dra},
		"the pool back while the new plugin starts": {facts: toDRA(gpuv1.ModeSwitchPluginOn, Facts{Current: dp, Hold: dp, Target: dp, Serving: true}),
			want: gpuv1.ModeSwitchEviction, target: dra, hold: dp},
		"the new mode refused while its plugin starts": {
			facts: toDRA(gpuv1.ModeSwitchPluginOn, Facts{Current: dra, Hold: dra, Refused: "the API server serves no ResourceSlices"}),
			want:  gpuv1.ModeSwitchEviction, target: dp, hold: dra},
		"failed evicting":                {facts: toDRA(gpuv1.ModeSwitchFailed, Facts{}), want: gpuv1.ModeSwitchFailed, target: dra},
		"failed evicting, the pool back": {facts: toDRA(gpuv1.ModeSwitchFailed, Facts{Current: dra, Target: dp}), want: ""},
		"failed with the plugins off, the pool back: starts over": {
			facts: toDRA(gpuv1.ModeSwitchFailed, Facts{Current: none, Hold: none, Target: dp}), want: gpuv1.ModeSwitchEviction, target: dra, hold: none},
		"failed, the new plugin serves after all": {facts: toDRA(gpuv1.ModeSwitchFailed, Facts{Current: dra, Hold: dra, Serving: true}),
			want: gpuv1.ModeSwitchDone},
		"failed, waiting for a person": {facts: toDRA(gpuv1.ModeSwitchFailed, Facts{Current: dra, Hold: dra}), want: gpuv1.ModeSwitchFailed,
			target: dra, hold: dra},
		"the hold removed while plugins leave": {facts: toDRA(gpuv1.ModeSwitchPluginsOff, Facts{GPUPods: 1}),
			want: gpuv1.ModeSwitchEviction, target: dra},
		"the hold edited while the new plugin starts": {facts: toDRA(gpuv1.ModeSwitchPluginOn, Facts{Current: dp, Hold: dp}),
			want: gpuv1.ModeSwitchEviction, target: dra, hold: dp},
		"GPU pods back while the plugins leave": {facts: toDRA(gpuv1.ModeSwitchPluginsOff, Facts{Current: none, Hold: none, GPUPods: 1}),
			want: gpuv1.ModeSwitchPluginsOff, action: EvictGPUPods, target: dra, hold: none},
		"failed with the plugins off, all gone since": {facts: toDRA(gpuv1.ModeSwitchFailed, Facts{Current: none, Hold: none}),
			want: gpuv1.ModeSwitchPluginOn, target: dra, hold: dra},
		"failed with the plugins off, a slice left": {facts: toDRA(gpuv1.ModeSwitchFailed, Facts{Current: none, Hold: none, Slices: 1}),
			want: gpuv1.ModeSwitchFailed, target: dra, hold: none},
		"requeued with a hold, the pool back to it": {facts: toDRA(gpuv1.ModeSwitchRequired, Facts{Current: dra, Hold: dra, Target: dp}),
			want: ""},
		"evicting with a hold, the pool back to it": {facts: toDRA(gpuv1.ModeSwitchEviction, Facts{Current: dra, Hold: dra, Target: dp, GPUPods: 1}),
			want: ""},
		"a person's typo": {facts: Facts{State: "switch-maybe", Current: none, Desired: dra, Target: dra, Hold: none}, want: "", target: dra, hold: none},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			s := Next(tt.facts, policy)
			g.Expect(s.Next).To(Equal(tt.want))
			g.Expect(s.Action).To(Equal(tt.action))
			g.Expect(s.Target).To(Equal(tt.target), "target")
			g.Expect(s.Hold).To(Equal(tt.hold), "hold")
			g.Expect(s.Requeue).To(Equal(tt.requeue))
			if s.Next != tt.facts.State {
				g.Expect(s.Reason).NotTo(BeEmpty(), "a change of state says why")
			}
		})
	}
}

// The plugin of one mode leaves before the other's starts: the label goes
// from one plugin's mode to the other's only through none, to none only
// once the GPU pods are gone, and from none to a plugin's mode only once
// no plugin pod or ResourceSlice is left.
func TestNeverBothPlugins(t *testing.T) {
	g := NewWithT(t)
	states := []gpuv1.ModeSwitchState{"", gpuv1.ModeSwitchRequired, gpuv1.ModeSwitchEviction, gpuv1.ModeSwitchPluginsOff,
		gpuv1.ModeSwitchPluginOn, gpuv1.ModeSwitchDone, gpuv1.ModeSwitchFailed, "typo"}
	modes := []gpuv1.AllocationMode{"", dp, dra, none}
	checked := 0
	for _, st := range states {
		for _, hold := range modes {
			for _, cur := range []gpuv1.AllocationMode{dp, dra, none} {
				for _, desired := range []gpuv1.AllocationMode{dp, dra} {
					for _, target := range modes {
						for _, refused := range []string{"", "no CDI"} {
							for bits := range 16 {
								f := Facts{State: st, Since: long, Now: now, Current: cur, Desired: desired, Target: target, Hold: hold,
									Refused: refused, Admitted: bits&1 != 0, Serving: bits&1 != 0, GPUPods: bits >> 1 & 1,
									PluginPods: bits >> 2 & 1, Slices: bits >> 3 & 1}
								if hold != "" && hold != cur {
									continue // the label follows the hold
								}
								s := Next(f, policy)
								checked++
								next := s.Hold
								if next == "" {
									continue // the node controller's rule decides the label: tested in internal/gating
								}
								if next != cur && next != none {
									g.Expect(cur).To(Equal(none), "%+v: from %s to %s without none between", f, cur, next)
									g.Expect(f.PluginPods+f.Slices+f.GPUPods).To(BeZero(), "%+v: to %s with a plugin or a GPU pod left", f, next)
								}
								if next == none && cur != none {
									g.Expect(f.GPUPods).To(BeZero(), "%+v: to none with GPU pods", f)
								}
								if InProgress(s.Next) || s.Next == gpuv1.ModeSwitchFailed {
									g.Expect(s.Target).NotTo(BeEmpty(), "%+v: a switch under way has a target", f)
								}
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d facts checked", checked)
}
