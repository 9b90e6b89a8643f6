package maintenance

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/migreconfig"
	"github.com/gpu-operator/gpu-operator/internal/modeswitch"
	"github.com/gpu-operator/gpu-operator/internal/remediation"
	"github.com/gpu-operator/gpu-operator/internal/upgrade"
)

// The look cache keeps a quiet node's steps for as long as its inputs
// stay: each machine's table must decide alike in its quiet states
// whatever the clock says. Random facts and policies in every state the
// quiet functions accept (a queued one not admitted) are stepped at their
// time and at later ones; the steps must not differ. A state made quiet
// whose table reads the clock (a validation's timeout) fails here.
func TestQuietStatesReadNoClock(t *testing.T) {
	rnd := rand.New(rand.NewPCG(54, 1))
	base := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	later := []time.Duration{time.Second, 7 * time.Minute, time.Hour, 400 * time.Hour}
	check := func(machine string, state any, step func(now time.Time) any) {
		t.Helper()
		at := step(base)
		for _, d := range later {
			if got := step(base.Add(d)); !reflect.DeepEqual(got, at) {
				t.Fatalf("%s in %q: %v later the step is %+v, not %+v", machine, state, d, got, at)
			}
		}
	}
	for range 3000 {
		for _, st := range []gpuv1.UpgradeState{"", gpuv1.UpgradeRequired, gpuv1.UpgradeCordonRequired, gpuv1.UpgradeWaitForJobs,
			gpuv1.UpgradePodDeletion, gpuv1.UpgradeDrainRequired, gpuv1.UpgradePodRestart, gpuv1.UpgradeValidation,
			gpuv1.UpgradeUncordon, gpuv1.UpgradeDone, gpuv1.UpgradeFailed} {
			if !quietUpgrade(st) {
				continue
			}
			var f upgrade.Facts
			var p upgrade.Policy
			randomize(rnd, &f, base)
			randomize(rnd, &p, base)
			f.State, f.Admitted = st, false
			check("the upgrade", st, func(now time.Time) any { f.Now = now; return upgrade.Next(f, p) })
		}
		for _, st := range []gpuv1.RemediationState{"", gpuv1.RemediationRequired, gpuv1.RemediationEviction,
			gpuv1.RemediationDevicePluginRestart, gpuv1.RemediationDriverReload, gpuv1.RemediationValidation,
			gpuv1.RemediationDone, gpuv1.RemediationRebootRequired, gpuv1.RemediationFailed} {
			if !quietRepair(st) {
				continue
			}
			var f remediation.Facts
			var p remediation.Policy
			randomize(rnd, &f, base)
			randomize(rnd, &p, base)
			f.State, f.Admitted = st, false
			check("the repair", st, func(now time.Time) any { f.Now = now; return remediation.Next(f, p) })
		}
		for _, st := range []gpuv1.MIGReconfigureState{"", gpuv1.MIGReconfigureRequired, gpuv1.MIGEviction, gpuv1.MIGClientsOff,
			gpuv1.MIGApply, gpuv1.MIGValidation, gpuv1.MIGReconfigureDone, gpuv1.MIGReconfigureFailed} {
			if !quietMIG(st) {
				continue
			}
			var f migreconfig.Facts
			var p migreconfig.Policy
			randomize(rnd, &f, base)
			randomize(rnd, &p, base)
			f.State, f.Admitted = st, false
			check("the MIG reconfiguration", st, func(now time.Time) any { f.Now = now; return migreconfig.Next(f, p) })
		}
		for _, st := range []gpuv1.ModeSwitchState{"", gpuv1.ModeSwitchRequired, gpuv1.ModeSwitchEviction, gpuv1.ModeSwitchPluginsOff,
			gpuv1.ModeSwitchPluginOn, gpuv1.ModeSwitchDone, gpuv1.ModeSwitchFailed} {
			if !quietSwitch(st) {
				continue
			}
			var f modeswitch.Facts
			var p modeswitch.Policy
			randomize(rnd, &f, base)
			randomize(rnd, &p, base)
			f.State, f.Admitted = st, false
			check("the allocation mode switch", st, func(now time.Time) any { f.Now = now; return modeswitch.Next(f, p) })
		}
	}
}

// randomize sets each field of the struct v points to at random: bools,
// small counts, durations up to two hours, times up to two hours before
// base, strings from a few (configurations and allocation modes among
// them).
func randomize(rnd *rand.Rand, v any, base time.Time) {
	s := reflect.ValueOf(v).Elem()
	words := []string{"", "all-1g.18gb", "all-disabled", string(gpuv1.AllocationDevicePlugin), string(gpuv1.AllocationDRA), "success", "failed"}
	for i := range s.NumField() {
		f := s.Field(i)
		switch {
		case !f.CanSet():
		case f.Type() == reflect.TypeFor[time.Duration]():
			f.SetInt(rnd.Int64N(int64(2 * time.Hour)))
		case f.Type() == reflect.TypeFor[time.Time]():
			f.Set(reflect.ValueOf(base.Add(-time.Duration(rnd.Int64N(int64(2 * time.Hour))))))
		case f.Kind() == reflect.Bool:
			f.SetBool(rnd.IntN(2) == 0)
		case f.CanInt():
			f.SetInt(rnd.Int64N(3))
		case f.Kind() == reflect.String:
			f.SetString(words[rnd.IntN(len(words))])
		}
	}
}
