package main

import (
	"fmt"
	"net/http"
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
