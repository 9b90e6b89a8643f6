package main

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestWavesSplitEachStateOnEachNode(t *testing.T) {
	g := NewWithT(t)
	start := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	at := func(sec float64) time.Time { return start.Add(time.Duration(sec * float64(time.Second))) }
	pods := []podTimes{
		// nfd has no gate: its DaemonSet time runs from the start.
		{node: "n1", state: "nfd", created: at(1), scheduled: at(2), readyAt: at(4)},
		{node: "n1", state: "driver", created: at(7), scheduled: at(7), readyAt: at(10)},
		{node: "n1", state: "toolkit", created: at(12), scheduled: at(13), readyAt: at(14)},
		// n2's driver gate was opened by no write after nfd was ready: not
		// a wave of this rollout, left out.
		{node: "n2", state: "nfd", created: at(1), scheduled: at(1), readyAt: at(2)},
		{node: "n2", state: "driver", created: at(3), scheduled: at(3), readyAt: at(5)},
	}
	prerequisites := map[string][]string{"driver": {"nfd"}, "toolkit": {"nfd", "driver"}}
	gated := map[string]bool{"driver": true, "toolkit": true}
	writes := map[string][]time.Time{
		"n1": {at(0.5), at(5.5), at(11)},
		"n2": {at(0.5), at(9)},
	}
	w := waves(pods, prerequisites, gated, writes, start)

	// driver on n1: nfd ready at 4, gate at 5.5, created 7, bound 7, ready 10.
	// toolkit on n1: driver ready at 10, gate at 11, created 12, bound 13, ready 14.
	g.Expect(w.States["driver"].Decision).To(Equal(Stat{N: 1, Mean: 1.5, P90: 1.5}))
	g.Expect(w.States["driver"].DaemonSet).To(Equal(Stat{N: 1, Mean: 1.5, P90: 1.5}))
	g.Expect(w.States["toolkit"].Decision).To(Equal(Stat{N: 1, Mean: 1, P90: 1}))
	g.Expect(w.States["toolkit"].Kubelet).To(Equal(Stat{N: 1, Mean: 1, P90: 1}))
	g.Expect(w.States["nfd"].Decision.N).To(BeZero(), "no gate, no decision")
	g.Expect(w.States["nfd"].DaemonSet).To(Equal(Stat{N: 2, Mean: 1, P90: 1}))
	g.Expect(w.All.Decision).To(Equal(Stat{N: 2, Mean: 1.25, P90: 1.5}))
	g.Expect(w.All.Scheduler.N).To(Equal(4), "n2's driver is left out")
	g.Expect(w.All.Scheduler.Mean).To(Equal(0.5))
}

func TestStatP90(t *testing.T) {
	g := NewWithT(t)
	var v []float64
	for i := 1; i <= 10; i++ {
		v = append(v, float64(i))
	}
	g.Expect(stat(v)).To(Equal(Stat{N: 10, Mean: 5.5, P90: 9}))
	g.Expect(stat(nil)).To(Equal(Stat{}))
}
