package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/procfs"
)

// usage is a process's resource use so far.
type usage struct {
	CPUSeconds float64
	// PeakRSS is the high-water mark of the resident set (VmHWM), bytes.
	PeakRSS uint64
}

// processUsage reads a live process's CPU time and peak RSS from /proc.
func processUsage(pid int) (usage, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return usage{}, err
	}
	stat, err := p.Stat()
	if err != nil {
		return usage{}, err
	}
	status, err := p.NewStatus()
	if err != nil {
		return usage{}, err
	}
	return usage{CPUSeconds: stat.CPUTime(), PeakRSS: status.VmHWM}, nil
}

// restRequests returns the operator's rest_client_requests_total by HTTP
// method, from its metrics endpoint: the second count the audit log is
// checked against. Watches count as GETs there.
func restRequests(metricsURL string) (map[string]float64, error) {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(metricsURL)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", metricsURL, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", metricsURL, err)
	}
	out := map[string]float64{}
	fam, ok := families["rest_client_requests_total"]
	if !ok {
		return nil, fmt.Errorf("%s has no rest_client_requests_total", metricsURL)
	}
	for _, m := range fam.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "method" {
				out[l.GetValue()] += m.GetCounter().GetValue()
			}
		}
	}
	return out, nil
}

// writesOf sums the write methods of a rest_client_requests_total reading.
func writesOf(byMethod map[string]float64) float64 {
	return byMethod["POST"] + byMethod["PUT"] + byMethod["PATCH"] + byMethod["DELETE"]
}

// rssSplit is what a process's resident set was made of at one reading:
// anonymous memory (the Go heap, its headroom, stacks, the runtime's own)
// and pages of its mapped files (mostly its binary's code and read-only
// data, shared with the page cache), in bytes.
type rssSplit struct {
	Anon, File uint64
}

func (s rssSplit) total() uint64 { return s.Anon + s.File }

// rssPeak polls a process's resident set every interval until ctx ends or
// the process is gone, and keeps the reading with the largest total: what
// the peak RSS is made of, which VmHWM does not say. With atPeak set, it
// calls it, beside the polling, each time the total passes the last one
// it called it for by peakStep: a heap profile then shows what the heap
// held near the peak (as of the last garbage collection), which a profile
// at a chosen time misses (the upgrade's spike lasts seconds).
type rssPeak struct {
	mu   sync.Mutex
	peak rssSplit
	// told is the total atPeak was last called for.
	told uint64
}

// peakStep is how far a new peak must pass the last one profiled: each
// heap profile costs the operator a little CPU.
const peakStep = 2 << 20

func watchRSS(ctx context.Context, pid int, interval time.Duration, atPeak func(rssSplit)) *rssPeak {
	r := &rssPeak{}
	// One call of atPeak at a time, off the polling: a profile takes a
	// while to fetch, and the readings must go on. A peak that comes while
	// one is fetched asks for one more, of the largest reading by then.
	peaked := make(chan struct{}, 1)
	if atPeak != nil {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-peaked:
					atPeak(r.get())
				}
			}
		}()
	}
	go func() {
		p, err := procfs.NewProc(pid)
		if err != nil {
			return
		}
		for {
			st, err := p.NewStatus()
			if err != nil {
				return
			}
			if r.see(rssSplit{Anon: st.RssAnon, File: st.RssFile}) {
				select {
				case peaked <- struct{}{}:
				default: // one is asked for already
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(interval):
			}
		}
	}()
	return r
}

// see takes a reading, and reports whether it is a peak peakStep past the
// last one reported.
func (r *rssPeak) see(s rssSplit) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.total() <= r.peak.total() {
		return false
	}
	r.peak = s
	if s.total() < r.told+peakStep {
		return false
	}
	r.told = s.total()
	return true
}

// get returns the largest reading so far.
func (r *rssPeak) get() rssSplit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.peak
}
