package main

import (
	"strings"
	"testing"
)

// The guard fails a run past its bound, and only then; 0 sets none.
func TestRolloutRSSWithin(t *testing.T) {
	runs := []*Result{{RolloutPeakRSSMiB: 49.4}, {RolloutPeakRSSMiB: 101.2}}
	if err := rolloutRSSWithin(runs[:1], 100); err != nil {
		t.Errorf("49.4 MiB within 100: %v", err)
	}
	err := rolloutRSSWithin(runs, 100)
	if err == nil || !strings.Contains(err.Error(), "run 2: the operator's peak RSS in the rollout, 101.2 MiB, exceeds -max-rollout-rss-mib 100.0") {
		t.Errorf("101.2 MiB past 100: %v", err)
	}
	if err := rolloutRSSWithin(runs, 0); err != nil {
		t.Errorf("no bound: %v", err)
	}
}
