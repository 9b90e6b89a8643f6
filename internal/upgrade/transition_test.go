package upgrade

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

func TestNext(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	policy := Policy{AutoUpgrade: true, WaitTimeout: time.Minute, PodDeletionTimeout: 5 * time.Minute, DrainTimeout: 5 * time.Minute,
		ValidationTimeout: 30 * time.Minute, PodRestartTimeout: 10 * time.Minute}
	withDrain := policy
	withDrain.DrainEnabled = true
	manual := policy
	manual.AutoUpgrade = false
	forever := Policy{AutoUpgrade: true, ValidationTimeout: policy.ValidationTimeout, PodRestartTimeout: policy.PodRestartTimeout}
	// driver.manager's settings, for a driver pod replaced by hand.
	drainOnly := manual
	drainOnly.SkipGPUPodEviction, drainOnly.DrainEnabled = true, true
	handsOff := manual
	handsOff.SkipGPUPodEviction, handsOff.LeaveReplaced = true, true
	replaced := Facts{State: gpuv1.UpgradeRequired, ReplacedByHand: true, Admitted: true}
	with := func(f Facts, edit func(*Facts)) Facts { edit(&f); return f }

	tests := map[string]struct {
		facts  Facts
		policy Policy
		want   gpuv1.UpgradeState
		action Action
	}{
		"no ready driver pod yet: nothing":  {facts: Facts{}, want: ""},
		"current driver pod ready: done":    {facts: Facts{DriverReady: true}, want: gpuv1.UpgradeDone},
		"current driver pod, skipped":       {facts: Facts{DriverReady: true, Skip: true}, want: ""},
		"current driver pod, manual":        {facts: Facts{DriverReady: true}, policy: manual, want: ""},
		"current driver pod, done stays":    {facts: Facts{State: gpuv1.UpgradeDone, DriverReady: true}, want: gpuv1.UpgradeDone},
		"outdated driver pod":               {facts: Facts{DriverReady: true, Outdated: true}, want: gpuv1.UpgradeRequired},
		"current driver pod, cordon held":   {facts: Facts{DriverReady: true, Cordoned: true}, want: gpuv1.UpgradeUncordon},
		"driver changed":                    {facts: Facts{Outdated: true}, want: gpuv1.UpgradeRequired},
		"driver changed after a done":       {facts: Facts{State: gpuv1.UpgradeDone, Outdated: true}, want: gpuv1.UpgradeRequired},
		"skipped node is not marked":        {facts: Facts{Outdated: true, Skip: true}, want: ""},
		"required, admitted":                {facts: Facts{State: gpuv1.UpgradeRequired, Outdated: true, Admitted: true}, want: gpuv1.UpgradeCordonRequired},
		"required, over budget":             {facts: Facts{State: gpuv1.UpgradeRequired, Outdated: true}, want: gpuv1.UpgradeRequired},
		"required, autoUpgrade off":         {facts: Facts{State: gpuv1.UpgradeRequired, Outdated: true, Admitted: true}, policy: manual, want: gpuv1.UpgradeRequired},
		"required, skipped":                 {facts: Facts{State: gpuv1.UpgradeRequired, Outdated: true, Admitted: true, Skip: true}, want: gpuv1.UpgradeRequired},
		"required, change reverted":         {facts: Facts{State: gpuv1.UpgradeRequired}, want: gpuv1.UpgradeDone},
		"retried, driver current, cordoned": {facts: Facts{State: gpuv1.UpgradeRequired, Cordoned: true}, want: gpuv1.UpgradeUncordon},
		"done but a cordon still held":      {facts: Facts{State: gpuv1.UpgradeDone, Cordoned: true}, want: gpuv1.UpgradeUncordon},
		"restart stuck past its timeout":    {facts: Facts{State: gpuv1.UpgradePodRestart, Outdated: true, DownstreamPods: 1, Since: now.Add(-policy.PodRestartTimeout)}, want: gpuv1.UpgradeFailed},
		"version changed during validation": {facts: Facts{State: gpuv1.UpgradeValidation, Outdated: true, Since: now.Add(-time.Minute)}, want: gpuv1.UpgradePodRestart},
		"cordon":                            {facts: Facts{State: gpuv1.UpgradeCordonRequired}, want: gpuv1.UpgradeWaitForJobs, action: Cordon},
		"jobs running":                      {facts: Facts{State: gpuv1.UpgradeWaitForJobs, JobsRunning: 2, Since: now}, want: gpuv1.UpgradeWaitForJobs},
		"jobs done":                         {facts: Facts{State: gpuv1.UpgradeWaitForJobs}, want: gpuv1.UpgradePodDeletion},
		"jobs past the wait timeout":        {facts: Facts{State: gpuv1.UpgradeWaitForJobs, JobsRunning: 2, Since: now.Add(-2 * time.Minute)}, want: gpuv1.UpgradePodDeletion},
		"jobs with no timeout wait":         {facts: Facts{State: gpuv1.UpgradeWaitForJobs, JobsRunning: 2, Since: now.Add(-time.Hour)}, policy: forever, want: gpuv1.UpgradeWaitForJobs},
		"GPU pods to evict":                 {facts: Facts{State: gpuv1.UpgradePodDeletion, GPUPods: 3, Since: now}, want: gpuv1.UpgradePodDeletion, action: EvictGPUPods},
		"GPU pods gone":                     {facts: Facts{State: gpuv1.UpgradePodDeletion}, want: gpuv1.UpgradePodRestart},
		"deletion timeout, drain disabled":  {facts: Facts{State: gpuv1.UpgradePodDeletion, GPUPods: 1, Since: now.Add(-5 * time.Minute)}, want: gpuv1.UpgradeFailed},
		"deletion timeout, drain enabled":   {facts: Facts{State: gpuv1.UpgradePodDeletion, GPUPods: 1, Since: now.Add(-5 * time.Minute)}, policy: withDrain, want: gpuv1.UpgradeDrainRequired},
		"draining":                          {facts: Facts{State: gpuv1.UpgradeDrainRequired, DrainPods: 4, Since: now}, policy: withDrain, want: gpuv1.UpgradeDrainRequired, action: Drain},
		"a GPU pod still holds the GPU":     {facts: Facts{State: gpuv1.UpgradeDrainRequired, GPUPods: 1, Since: now}, policy: withDrain, want: gpuv1.UpgradeDrainRequired, action: Drain},
		"drained":                           {facts: Facts{State: gpuv1.UpgradeDrainRequired}, policy: withDrain, want: gpuv1.UpgradePodRestart},
		"drain timeout":                     {facts: Facts{State: gpuv1.UpgradeDrainRequired, DrainPods: 1, Since: now.Add(-6 * time.Minute)}, policy: withDrain, want: gpuv1.UpgradeFailed},
		"operands still leaving":            {facts: Facts{State: gpuv1.UpgradePodRestart, Outdated: true, DownstreamPods: 2}, want: gpuv1.UpgradePodRestart},
		"replace the driver pod":            {facts: Facts{State: gpuv1.UpgradePodRestart, Outdated: true}, want: gpuv1.UpgradePodRestart, action: DeleteDriverPod},
		"new driver pod running":            {facts: Facts{State: gpuv1.UpgradePodRestart}, want: gpuv1.UpgradeValidation},
		"validating":                        {facts: Facts{State: gpuv1.UpgradeValidation, Since: now}, want: gpuv1.UpgradeValidation},
		"validated":                         {facts: Facts{State: gpuv1.UpgradeValidation, Validated: true}, want: gpuv1.UpgradeUncordon},
		"validation timeout":                {facts: Facts{State: gpuv1.UpgradeValidation, Since: now.Add(-policy.ValidationTimeout)}, want: gpuv1.UpgradeFailed},
		"uncordon":                          {facts: Facts{State: gpuv1.UpgradeUncordon}, want: gpuv1.UpgradeDone, action: Uncordon},
		"failed stays failed":               {facts: Facts{State: gpuv1.UpgradeFailed, Outdated: true, Admitted: true}, want: gpuv1.UpgradeFailed},
		"unknown state restarts":            {facts: Facts{State: "bogus", Outdated: true}, want: gpuv1.UpgradeRequired},

		// A driver pod replaced by hand (NVIDIA's manual upgrade): its GPU
		// pods leave through the upgrade's steps, within the budget.
		"replaced by hand, admitted":          {facts: replaced, policy: manual, want: gpuv1.UpgradeCordonRequired},
		"replaced by hand, autoUpgrade on":    {facts: replaced, want: gpuv1.UpgradeCordonRequired},
		"replaced by hand, over budget":       {facts: with(replaced, func(f *Facts) { f.Admitted = false }), policy: manual, want: gpuv1.UpgradeRequired},
		"replaced by hand, manager hands off": {facts: replaced, policy: handsOff, want: gpuv1.UpgradeDone},
		"replaced by hand, skipped":           {facts: with(replaced, func(f *Facts) { f.Skip = true }), policy: manual, want: gpuv1.UpgradeDone},
		"outdated pod deleted, none yet":      {facts: Facts{State: gpuv1.UpgradeRequired, OutdatedPodGone: true, Admitted: true}, want: gpuv1.UpgradeRequired},
		"manager drains without evicting":     {facts: Facts{State: gpuv1.UpgradePodDeletion, GPUPods: 2, Since: now}, policy: drainOnly, want: gpuv1.UpgradeDrainRequired},
		"manager turned to evict nothing":     {facts: Facts{State: gpuv1.UpgradePodDeletion, GPUPods: 2, Since: now}, policy: handsOff, want: gpuv1.UpgradeUncordon},
		"replaced pod runs: validate at once": {facts: Facts{State: gpuv1.UpgradePodRestart, DownstreamPods: 2}, policy: manual, want: gpuv1.UpgradeValidation},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			f := tt.facts
			f.Now = now
			if f.Since.IsZero() {
				f.Since = now
			}
			p := tt.policy
			if p == (Policy{}) {
				p = policy
			}
			step := Next(f, p)
			g.Expect(step.Next).To(Equal(tt.want))
			g.Expect(step.Action).To(Equal(tt.action))
			g.Expect(step.FirstMark).To(Equal(f.State == "" && step.Next == gpuv1.UpgradeDone), "only a never upgraded node's mark goes untold")
			g.Expect(step.ByHand).To(Equal(f.ReplacedByHand && step.Next == gpuv1.UpgradeCordonRequired), "only a start after a replacement by hand is marked so")
			if step.Next != f.State {
				g.Expect(step.Reason).NotTo(BeEmpty(), "every transition says why")
			}
		})
	}
}
