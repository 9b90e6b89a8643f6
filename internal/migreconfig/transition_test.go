package migreconfig

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

var (
	now    = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	policy = Policy{EvictionTimeout: 5 * time.Minute, ApplyTimeout: 10 * time.Minute, ValidationTimeout: 10 * time.Minute,
		InPlaceWait: 2 * time.Minute, ClientsOffTimeout: 10 * time.Minute, RetryBackoff: 15 * time.Second}
)

func TestNext(t *testing.T) {
	long := now.Add(-time.Hour)
	apply := func(f Facts) Facts {
		f.State, f.Desired, f.Target, f.Since, f.Now = gpuv1.MIGApply, "all-1g.18gb", "all-1g.18gb", now, now
		if f.AttemptSince.IsZero() {
			f.AttemptSince = now
		}
		if f.Attempt == 0 {
			f.Attempt = 1
		}
		return f
	}
	tests := map[string]struct {
		facts   Facts
		want    gpuv1.MIGReconfigureState
		action  Action
		target  string
		adopt   bool
		attempt int
		retry   bool
	}{
		"nothing requested":             {facts: Facts{}, want: ""},
		"applied already":               {facts: Facts{Desired: "a", Applied: "a"}, want: ""},
		"requested":                     {facts: Facts{Desired: "a"}, want: gpuv1.MIGReconfigureRequired},
		"requested after a reconfigure": {facts: Facts{State: gpuv1.MIGReconfigureDone, Desired: "b", Applied: "a"}, want: gpuv1.MIGReconfigureRequired},
		"refused: nothing starts":       {facts: Facts{Desired: "typo", Refused: "no such configuration"}, want: ""},
		"in place already: adopted":     {facts: Facts{Desired: "all-disabled", InPlace: Matches}, want: "", adopt: true},
		"waiting, in place: adopted":    {facts: Facts{State: gpuv1.MIGReconfigureRequired, Desired: "all-disabled", InPlace: Matches}, want: "", adopt: true},
		"in place, but one applied":     {facts: Facts{Desired: "b", Applied: "a", InPlace: Matches}, want: gpuv1.MIGReconfigureRequired},
		"unsettled: waits to know": {facts: Facts{State: gpuv1.MIGReconfigureRequired, Desired: "all-disabled", Admitted: true, Since: now},
			want: gpuv1.MIGReconfigureRequired},
		"unsettled for long: goes on": {facts: Facts{State: gpuv1.MIGReconfigureRequired, Desired: "all-disabled", Admitted: true, Since: long},
			want: gpuv1.MIGEviction, target: "all-disabled"},
		"not in place: goes on": {facts: Facts{State: gpuv1.MIGReconfigureRequired, Desired: "all-disabled", Admitted: true, Since: now, InPlace: Differs},
			want: gpuv1.MIGEviction, target: "all-disabled"},
		"required, over budget":   {facts: Facts{State: gpuv1.MIGReconfigureRequired, Desired: "a"}, want: gpuv1.MIGReconfigureRequired},
		"required, refused since": {facts: Facts{State: gpuv1.MIGReconfigureRequired, Desired: "a", Refused: "x", Admitted: true}, want: gpuv1.MIGReconfigureRequired},
		"required, admitted":      {facts: Facts{State: gpuv1.MIGReconfigureRequired, Desired: "a", Applied: "x", Admitted: true}, want: gpuv1.MIGEviction, target: "a"},
		"required, reverted by a person": {facts: Facts{State: gpuv1.MIGReconfigureRequired, Desired: "a", Applied: "a", Admitted: true},
			want: ""},
		"GPU pods to evict":         {facts: Facts{State: gpuv1.MIGEviction, GPUPods: 2, Since: now}, want: gpuv1.MIGEviction, action: EvictGPUPods},
		"GPU pods past the timeout": {facts: Facts{State: gpuv1.MIGEviction, GPUPods: 1, Since: long}, want: gpuv1.MIGReconfigureRequired},
		"GPU pods past the timeout, again and again": {facts: Facts{State: gpuv1.MIGEviction, GPUPods: 1, Since: long, Requeues: MaxRequeues - 1},
			want: gpuv1.MIGReconfigureFailed},
		"GPU pods gone":             {facts: Facts{State: gpuv1.MIGEviction, Since: now}, want: gpuv1.MIGClientsOff},
		"clients still on the node": {facts: Facts{State: gpuv1.MIGClientsOff, ClientPods: 3, Since: now}, want: gpuv1.MIGClientsOff},
		"clients never leave":       {facts: Facts{State: gpuv1.MIGClientsOff, ClientPods: 1, Since: long}, want: gpuv1.MIGReconfigureRequired},
		"clients never leave, again": {facts: Facts{State: gpuv1.MIGClientsOff, ClientPods: 1, Since: long, Requeues: MaxRequeues - 1},
			want: gpuv1.MIGReconfigureFailed},
		"clients gone: first attempt": {facts: Facts{State: gpuv1.MIGClientsOff, Target: "a", Since: now}, want: gpuv1.MIGApply,
			action: StartAttempt, target: "a", attempt: 1},
		"a mig-manager pod still there": {facts: Facts{State: gpuv1.MIGClientsOff, Target: "a", Since: now, ManagerPods: 1},
			want: gpuv1.MIGClientsOff},
		"the last attempt's pod gone: the next": {facts: Facts{State: gpuv1.MIGClientsOff, Target: "a", Since: now, Attempt: 1},
			want: gpuv1.MIGApply, action: StartAttempt, target: "a", attempt: 2},
		"applying":                   {facts: apply(Facts{ConfigState: gpuv1.MIGConfigPending}), want: gpuv1.MIGApply},
		"rebooting for the apply":    {facts: apply(Facts{ConfigState: gpuv1.MIGConfigRebooting}), want: gpuv1.MIGApply},
		"applied":                    {facts: apply(Facts{ConfigState: gpuv1.MIGConfigSuccess}), want: gpuv1.MIGValidation, target: "all-1g.18gb"},
		"failed, within the backoff": {facts: apply(Facts{ConfigState: gpuv1.MIGConfigFailed}), want: gpuv1.MIGApply},
		"failed, retried": {facts: apply(Facts{ConfigState: gpuv1.MIGConfigFailed, AttemptSince: now.Add(-time.Minute)}),
			want: gpuv1.MIGClientsOff, target: "all-1g.18gb", attempt: 1, retry: true},
		"failed, last attempt": {facts: apply(Facts{ConfigState: gpuv1.MIGConfigFailed, Attempt: MaxAttempts}),
			want: gpuv1.MIGReconfigureFailed},
		"hung: retried": {facts: apply(Facts{ConfigState: gpuv1.MIGConfigPending, AttemptSince: long}), want: gpuv1.MIGClientsOff,
			target: "all-1g.18gb", attempt: 1, retry: true},
		"no word at all: retried": {facts: apply(Facts{AttemptSince: long}), want: gpuv1.MIGClientsOff, target: "all-1g.18gb", attempt: 1, retry: true},
		"the attempt's pod gone: retried": {facts: apply(Facts{AttemptPodGone: true}), want: gpuv1.MIGClientsOff, target: "all-1g.18gb",
			attempt: 1, retry: true},
		"the last attempt's pod gone": {facts: apply(Facts{AttemptPodGone: true, Attempt: MaxAttempts}), want: gpuv1.MIGReconfigureFailed},
		"hung, last attempt":          {facts: apply(Facts{ConfigState: gpuv1.MIGConfigPending, AttemptSince: long, Attempt: MaxAttempts}), want: gpuv1.MIGReconfigureFailed},
		"a person's new configuration mid-apply": {facts: func() Facts {
			f := apply(Facts{ConfigState: gpuv1.MIGConfigSuccess})
			f.Desired = "all-2g.35gb"
			return f
		}(),
			want: gpuv1.MIGClientsOff, target: "all-2g.35gb"},
		"validating":                      {facts: Facts{State: gpuv1.MIGValidation, Applied: "a", Since: now}, want: gpuv1.MIGValidation},
		"advertised":                      {facts: Facts{State: gpuv1.MIGValidation, Applied: "a", Advertised: Matches, Since: now}, want: gpuv1.MIGReconfigureDone},
		"never advertised":                {facts: Facts{State: gpuv1.MIGValidation, Applied: "a", Advertised: Differs, Since: long}, want: gpuv1.MIGReconfigureFailed},
		"failed: none requested any more": {facts: Facts{State: gpuv1.MIGReconfigureFailed, Target: "a"}, want: ""},
		"failed: stays":                   {facts: Facts{State: gpuv1.MIGReconfigureFailed, Desired: "a", Target: "a"}, want: gpuv1.MIGReconfigureFailed},
		"failed: a new one":               {facts: Facts{State: gpuv1.MIGReconfigureFailed, Desired: "b", Target: "a"}, want: gpuv1.MIGEviction, target: "b"},
		"failed: new refused":             {facts: Facts{State: gpuv1.MIGReconfigureFailed, Desired: "b", Target: "a", Refused: "x"}, want: gpuv1.MIGReconfigureFailed},
		"a person's typo":                 {facts: Facts{State: "reconfigure-requird"}, want: ""},
		// A reboot or a new driver pod destroyed the MIG devices.
		"devices lost":              {facts: Facts{State: gpuv1.MIGReconfigureDone, Desired: "a", Applied: "a", Lost: true}, want: gpuv1.MIGReconfigureRequired},
		"devices lost, unlabelled":  {facts: Facts{Desired: "a", Applied: "a", Lost: true}, want: gpuv1.MIGReconfigureRequired},
		"devices lost, refused now": {facts: Facts{State: gpuv1.MIGReconfigureDone, Desired: "a", Applied: "a", Lost: true, Refused: "x"}, want: gpuv1.MIGReconfigureDone},
		"devices lost, none wanted": {facts: Facts{State: gpuv1.MIGReconfigureDone, Applied: "a", Lost: true}, want: gpuv1.MIGReconfigureDone},
		"lost, waits its turn":      {facts: Facts{State: gpuv1.MIGReconfigureRequired, Desired: "a", Applied: "a", Lost: true}, want: gpuv1.MIGReconfigureRequired},
		"lost, admitted: no eviction": {facts: Facts{State: gpuv1.MIGReconfigureRequired, Desired: "a", Applied: "a", Lost: true, Admitted: true},
			want: gpuv1.MIGClientsOff, target: "a"},
		"lost, and another wanted": {facts: Facts{State: gpuv1.MIGReconfigureRequired, Desired: "b", Applied: "a", Lost: true, Admitted: true},
			want: gpuv1.MIGEviction, target: "b"},
		"lost, none wanted any more": {facts: Facts{State: gpuv1.MIGReconfigureRequired, Applied: "a", Lost: true}, want: ""},
		"lost during the validation": {facts: Facts{State: gpuv1.MIGValidation, Applied: "a", Target: "a", Lost: true, Advertised: Matches, Since: now},
			want: gpuv1.MIGClientsOff, target: "a"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			if tt.facts.Now.IsZero() {
				tt.facts.Now = now
			}
			step := Next(tt.facts, policy)
			g.Expect(step.Next).To(Equal(tt.want))
			g.Expect(step.Action).To(Equal(tt.action), "action")
			g.Expect(step.Target).To(Equal(tt.target), "target")
			g.Expect(step.Adopt).To(Equal(tt.adopt), "adopt")
			g.Expect(step.Attempt).To(Equal(tt.attempt), "attempt")
			g.Expect(step.Retry).To(Equal(tt.retry), "retry")
			if step.Next != tt.facts.State {
				g.Expect(step.Reason).NotTo(BeEmpty(), "a transition says why")
			}
		})
	}
}

// Every step under way ends, whatever mig-manager and the node do: the
// node goes back to the queue, untainted, before its GPUs are touched,
// and fails, saying why, after.
func TestNoStateWedges(t *testing.T) {
	for s, end := range map[gpuv1.MIGReconfigureState]gpuv1.MIGReconfigureState{gpuv1.MIGEviction: gpuv1.MIGReconfigureRequired,
		gpuv1.MIGClientsOff: gpuv1.MIGReconfigureRequired, gpuv1.MIGApply: gpuv1.MIGReconfigureFailed, gpuv1.MIGValidation: gpuv1.MIGReconfigureFailed} {
		f := Facts{State: s, Since: now.Add(-24 * time.Hour), Now: now, Desired: "a", Target: "a", Applied: "a",
			GPUPods: 1, ClientPods: 1, ConfigState: gpuv1.MIGConfigPending, Attempt: 1, AttemptSince: now.Add(-24 * time.Hour)}
		// Each attempt runs out of time in turn (back at clients-off for
		// the next), each requeue counts, and the last fails.
		ended := false
		for range 2 * (MaxAttempts + MaxRequeues) {
			step := Next(f, policy)
			if step.Retry || step.Requeue && step.Next != end {
				f.Attempt = step.Attempt + 1
				f.Requeues += map[bool]int{true: 1}[step.Requeue]
				continue
			}
			NewWithT(t).Expect(step.Next).To(Equal(end), "%s must end", s)
			NewWithT(t).Expect(Tainted(step.Next)).To(Equal(end == gpuv1.MIGReconfigureFailed))
			ended = true
			break
		}
		NewWithT(t).Expect(ended).To(BeTrue(), "%s retries for ever", s)
	}
}

func TestTaintedUntilAdvertised(t *testing.T) {
	g := NewWithT(t)
	for _, s := range []gpuv1.MIGReconfigureState{"", gpuv1.MIGReconfigureRequired, gpuv1.MIGReconfigureDone} {
		g.Expect(Tainted(s)).To(BeFalse(), "%q", s)
	}
	for _, s := range []gpuv1.MIGReconfigureState{gpuv1.MIGEviction, gpuv1.MIGClientsOff, gpuv1.MIGApply, gpuv1.MIGValidation, gpuv1.MIGReconfigureFailed} {
		g.Expect(Tainted(s)).To(BeTrue(), "%q", s)
	}
}
