package remediation

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

func TestNext(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	policy := Policy{AutoStart: true, EvictionTimeout: 5 * time.Minute, ValidationTimeout: 30 * time.Minute,
		DriverReplaceTimeout: 10 * time.Minute, RecurrenceWindow: time.Hour}
	manual := policy
	manual.AutoStart = false
	long := now.Add(-time.Hour)
	tests := map[string]struct {
		facts  Facts
		policy *Policy
		want   gpuv1.RemediationState
		action Action
	}{
		"healthy: nothing":                    {facts: Facts{}, want: ""},
		"unhealthy GPUs":                      {facts: Facts{UnhealthyGPUs: 2}, want: gpuv1.RemediationRequired},
		"unhealthy again after a repair":      {facts: Facts{State: gpuv1.RemediationDone, UnhealthyGPUs: 1}, want: gpuv1.RemediationRequired},
		"required, admitted":                  {facts: Facts{State: gpuv1.RemediationRequired, UnhealthyGPUs: 1, Admitted: true}, want: gpuv1.RemediationEviction},
		"required, over budget":               {facts: Facts{State: gpuv1.RemediationRequired, UnhealthyGPUs: 1}, want: gpuv1.RemediationRequired},
		"required, not approved":              {facts: Facts{State: gpuv1.RemediationRequired, UnhealthyGPUs: 1, Admitted: true}, policy: &manual, want: gpuv1.RemediationRequired},
		"required, approved":                  {facts: Facts{State: gpuv1.RemediationRequired, UnhealthyGPUs: 1, Admitted: true, Approved: true}, policy: &manual, want: gpuv1.RemediationEviction},
		"required, healed on its own":         {facts: Facts{State: gpuv1.RemediationRequired, Admitted: true}, want: ""},
		"GPU pods to evict":                   {facts: Facts{State: gpuv1.RemediationEviction, GPUPods: 2, Since: now}, want: gpuv1.RemediationEviction, action: EvictGPUPods},
		"GPU pods gone":                       {facts: Facts{State: gpuv1.RemediationEviction, Since: now}, want: gpuv1.RemediationDevicePluginRestart},
		"GPU pods past the eviction timeout":  {facts: Facts{State: gpuv1.RemediationEviction, GPUPods: 1, Since: long}, want: gpuv1.RemediationFailed},
		"plugin to restart":                   {facts: Facts{State: gpuv1.RemediationDevicePluginRestart, PluginToReplace: true, Since: now}, want: gpuv1.RemediationDevicePluginRestart, action: RestartDevicePlugin},
		"new plugin not settled":              {facts: Facts{State: gpuv1.RemediationDevicePluginRestart, Since: now}, want: gpuv1.RemediationDevicePluginRestart},
		"restart healed":                      {facts: Facts{State: gpuv1.RemediationDevicePluginRestart, Plugin: Healthy, Since: now}, want: gpuv1.RemediationDone},
		"restart did not heal":                {facts: Facts{State: gpuv1.RemediationDevicePluginRestart, Plugin: Unhealthy, DriverReloadable: true, Since: now}, want: gpuv1.RemediationDriverReload},
		"restart did not heal, host driver":   {facts: Facts{State: gpuv1.RemediationDevicePluginRestart, Plugin: Unhealthy, Since: now}, want: gpuv1.RemediationRebootRequired},
		"plugin never back":                   {facts: Facts{State: gpuv1.RemediationDevicePluginRestart, DriverReloadable: true, Since: long}, want: gpuv1.RemediationDriverReload},
		"operands after the driver leaving":   {facts: Facts{State: gpuv1.RemediationDriverReload, DriverReloadable: true, DownstreamPods: 3, Since: now}, want: gpuv1.RemediationDriverReload},
		"driver pod to delete":                {facts: Facts{State: gpuv1.RemediationDriverReload, DriverReloadable: true, Since: now}, want: gpuv1.RemediationDriverReload, action: DeleteDriverPod},
		"driver replaced":                     {facts: Facts{State: gpuv1.RemediationDriverReload, DriverReloadable: true, DriverReplaced: true, Since: now}, want: gpuv1.RemediationValidation},
		"driver stuck":                        {facts: Facts{State: gpuv1.RemediationDriverReload, DriverReloadable: true, DownstreamPods: 1, Since: long}, want: gpuv1.RemediationRebootRequired},
		"driver moved to the host mid-reload": {facts: Facts{State: gpuv1.RemediationDriverReload, Since: now}, want: gpuv1.RemediationRebootRequired},
		"outdated driver held back":           {facts: Facts{State: gpuv1.RemediationDevicePluginRestart, Plugin: Unhealthy, DriverReloadable: true, DriverOutdated: true, UpgradeHeld: true, Since: now}, want: gpuv1.RemediationRebootRequired},
		"outdated driver, upgrade to come":    {facts: Facts{State: gpuv1.RemediationDevicePluginRestart, Plugin: Unhealthy, DriverReloadable: true, DriverOutdated: true, Since: now}, want: gpuv1.RemediationRebootRequired},
		"driver outdated mid-reload":          {facts: Facts{State: gpuv1.RemediationDriverReload, DriverReloadable: true, DriverOutdated: true, UpgradeHeld: true, Since: now}, want: gpuv1.RemediationRebootRequired},
		"driver outdated mid-reload, upgrade": {facts: Facts{State: gpuv1.RemediationDriverReload, DriverReloadable: true, DriverOutdated: true, Since: now}, want: gpuv1.RemediationRebootRequired},
		"unhealthy again soon after a repair": {facts: Facts{State: gpuv1.RemediationEviction, Recurrent: true, Since: now}, want: gpuv1.RemediationRebootRequired},
		"healed while waiting for a reboot":   {facts: Facts{State: gpuv1.RemediationRebootRequired, Plugin: Healthy}, want: gpuv1.RemediationDone},
		"healed by a person's fix":            {facts: Facts{State: gpuv1.RemediationFailed, Plugin: Healthy}, want: gpuv1.RemediationDone},
		"outdated driver replaced anyway":     {facts: Facts{State: gpuv1.RemediationDriverReload, DriverReloadable: true, DriverOutdated: true, DriverReplaced: true, Since: now}, want: gpuv1.RemediationValidation},
		"validation waiting":                  {facts: Facts{State: gpuv1.RemediationValidation, Since: now}, want: gpuv1.RemediationValidation},
		"reload healed":                       {facts: Facts{State: gpuv1.RemediationValidation, Plugin: Healthy, Since: now}, want: gpuv1.RemediationDone},
		"reload did not heal":                 {facts: Facts{State: gpuv1.RemediationValidation, Plugin: Unhealthy, Since: now}, want: gpuv1.RemediationRebootRequired},
		"stack not back after the reload":     {facts: Facts{State: gpuv1.RemediationValidation, Since: long}, want: gpuv1.RemediationRebootRequired},
		"reboot waits":                        {facts: Facts{State: gpuv1.RemediationRebootRequired, Since: long}, want: gpuv1.RemediationRebootRequired},
		"rebooted":                            {facts: Facts{State: gpuv1.RemediationRebootRequired, Rebooted: true}, want: gpuv1.RemediationValidation},
		"reboot healed":                       {facts: Facts{State: gpuv1.RemediationValidation, AfterReboot: true, Plugin: Healthy, Since: now}, want: gpuv1.RemediationDone},
		"reboot did not heal":                 {facts: Facts{State: gpuv1.RemediationValidation, AfterReboot: true, Plugin: Unhealthy, Since: now}, want: gpuv1.RemediationFailed},
		"stack not back after the reboot":     {facts: Facts{State: gpuv1.RemediationValidation, AfterReboot: true, Since: long}, want: gpuv1.RemediationFailed},
		"failed waits for a person":           {facts: Facts{State: gpuv1.RemediationFailed, UnhealthyGPUs: 1, Admitted: true}, want: gpuv1.RemediationFailed},
		"failed, approved again":              {facts: Facts{State: gpuv1.RemediationFailed, Approved: true, Admitted: true}, want: gpuv1.RemediationEviction},
		"failed, approved, holds its place":   {facts: Facts{State: gpuv1.RemediationFailed, Approved: true}, want: gpuv1.RemediationEviction},
		"failed, rebooted by a person":        {facts: Facts{State: gpuv1.RemediationFailed, Rebooted: true}, want: gpuv1.RemediationValidation},
		"reboot-required, approved again":     {facts: Facts{State: gpuv1.RemediationRebootRequired, Approved: true, Admitted: true}, want: gpuv1.RemediationEviction},
		"unknown state":                       {facts: Facts{State: "bogus"}, want: ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			p := policy
			if tt.policy != nil {
				p = *tt.policy
			}
			f := tt.facts
			f.Now = now
			if f.Since.IsZero() {
				f.Since = now
			}
			step := Next(f, p)
			g.Expect(step.Next).To(Equal(tt.want))
			g.Expect(step.Action).To(Equal(tt.action))
			if step.Next != f.State {
				g.Expect(step.Reason).NotTo(BeEmpty(), "every change says why")
			}
		})
	}
}

// Every state the machine can reach has a way out that is not a person's
// edit: a timeout, a reboot, or the GPUs' health. A state whose only way
// on were a watch event that never comes would wedge the node.
func TestNoStateWedges(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	p := Policy{AutoStart: true, EvictionTimeout: 5 * time.Minute, ValidationTimeout: 30 * time.Minute,
		DriverReplaceTimeout: 10 * time.Minute, RecurrenceWindow: time.Hour}
	for _, s := range []gpuv1.RemediationState{gpuv1.RemediationEviction, gpuv1.RemediationDevicePluginRestart,
		gpuv1.RemediationDriverReload, gpuv1.RemediationValidation} {
		// The worst facts: pods that never leave, a plugin never back, a
		// driver never replaced.
		f := Facts{State: s, Since: now.Add(-24 * time.Hour), Now: now, UnhealthyGPUs: 1, GPUPods: 1,
			DriverReloadable: true, DownstreamPods: 1}
		NewWithT(t).Expect(Next(f, p).Next).NotTo(Equal(s), "%s must time out", s)
	}
}

func TestTaintedFromStartToHealthy(t *testing.T) {
	g := NewWithT(t)
	for _, s := range []gpuv1.RemediationState{"", gpuv1.RemediationRequired, gpuv1.RemediationDone} {
		g.Expect(Tainted(s)).To(BeFalse(), "%q", s)
	}
	for _, s := range []gpuv1.RemediationState{gpuv1.RemediationEviction, gpuv1.RemediationDevicePluginRestart,
		gpuv1.RemediationDriverReload, gpuv1.RemediationValidation, gpuv1.RemediationRebootRequired, gpuv1.RemediationFailed} {
		g.Expect(Tainted(s)).To(BeTrue(), "%q", s)
	}
}
