package main

import (
	"testing"
	"time"
)

// A phase's limit is what a thousand nodes get, grown in proportion past
// them and never shorter below.
func TestLimitGrowsWithTheNodes(t *testing.T) {
	for nodes, want := range map[int]time.Duration{20: 30 * time.Minute, 1000: 30 * time.Minute, 5000: 150 * time.Minute} {
		if got := (config{nodes: nodes}).limit(30 * time.Minute); got != want {
			t.Errorf("%d nodes: limit %s, want %s", nodes, got, want)
		}
	}
}
