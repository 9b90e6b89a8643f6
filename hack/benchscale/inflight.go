package main

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/upgrade"
)

// inFlight counts the nodes in a driver upgrade (cordoned for it up to
// uncordoned), as their labels show: how much of the budget the upgrade
// uses. A phase's figures are its time-weighted mean and its peak.
type inFlight struct {
	count, peak int
	// area is the count integrated over time since from, in node-seconds.
	area       float64
	from, last time.Time
}

func upgrading(n *corev1.Node) bool {
	return n != nil && upgrade.InProgress(gpuv1.UpgradeState(n.Labels[gpuv1.LabelUpgradeState]))
}

// see records that a node went from old to cur at now.
func (f *inFlight) see(old, cur *corev1.Node, now time.Time) {
	was, is := upgrading(old), upgrading(cur)
	if was == is {
		return
	}
	f.advance(now)
	if is {
		f.count++
	} else {
		f.count--
	}
	f.peak = max(f.peak, f.count)
}

func (f *inFlight) advance(now time.Time) {
	if !f.last.IsZero() && now.After(f.last) {
		f.area += float64(f.count) * now.Sub(f.last).Seconds()
	}
	f.last = now
}

// restart begins a phase's figures at now.
func (f *inFlight) restart(now time.Time) {
	f.area, f.peak, f.from, f.last = 0, f.count, now, now
}

// figures returns the mean over the phase until now, and the peak.
func (f *inFlight) figures(now time.Time) (mean float64, peak int) {
	f.advance(now)
	if d := now.Sub(f.from).Seconds(); d > 0 {
		mean = f.area / d
	}
	return mean, f.peak
}
