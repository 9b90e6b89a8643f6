package timers

import (
	"flag"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestDefaultsAreValid(t *testing.T) {
	NewWithT(t).Expect(Defaults().Validate()).To(Succeed())
}

// Args and BindFlags name the same flags: the binary run with a
// Timers' Args runs with those timers.
func TestArgsRoundTrip(t *testing.T) {
	g := NewWithT(t)
	want := Defaults()
	want.HealthSettle = 2 * time.Second
	want.LeaseDuration = 7 * time.Second
	got := Defaults()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	got.BindFlags(fs)
	g.Expect(fs.Parse(want.Args())).To(Succeed())
	g.Expect(got).To(Equal(want))
}

func TestValidateNamesTheFlag(t *testing.T) {
	tests := map[string]struct {
		mutate func(*Timers)
		want   string
	}{
		"zero":                          {func(t *Timers) { t.HealthSettle = 0 }, "--health-settle=0s: must be positive"},
		"negative":                      {func(t *Timers) { t.MIGApplyTimeoutFloor = -time.Second }, "--mig-apply-timeout-floor"},
		"renew deadline past the lease": {func(t *Timers) { t.RenewDeadline = t.LeaseDuration }, "--leader-elect-renew-deadline"},
		"retry past the renew deadline": {func(t *Timers) { t.RetryPeriod = t.RenewDeadline }, "--leader-elect-retry-period"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			tm := Defaults()
			tt.mutate(&tm)
			NewWithT(t).Expect(tm.Validate()).To(MatchError(ContainSubstring(tt.want)))
		})
	}
}
