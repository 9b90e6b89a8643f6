package dcgmexporter

import (
	"strings"
	"testing"
)

// What dcgm-exporter's parser refuses at start (4.5.3-4.8.2
// internal/pkg/counters/counter_config.go), and what it reads.
func TestCheckMetrics(t *testing.T) {
	for list, refused := range map[string]string{
		"# NVIDIA's sample\nDCGM_FI_DEV_SM_CLOCK,  gauge, SM clock frequency (in MHz).\n\nDCGM_FI_PROF_GR_ENGINE_ACTIVE, gauge, Ratio.\n": "",
		"DCGM_EXP_XID_ERRORS_COUNT, gauge, Count of XID Errors within user-specified time window.\n":                                      "",
		"DCGM_FI_DEV_GPU_UTIL, gauge,\"GPU utilization, in %\"\n":                                                                         "",
		"DCGM_FI_DEV_GPU_UTIL gauge GPU utilization\n":                                                                                    "1 fields, want 3",
		"DCGM_FI_DEV_GPU_UTIL, gauge, help, extra\n":                                                                                      "4 fields, want 3",
		"DCGM_FI_DEV_GPU_UTIL, gauges, GPU utilization\n":                                                                                 "not a Prometheus type",
		"GPU_UTIL, gauge, GPU utilization\n":                                                                                              "neither a DCGM field",
		"DCGM_FI_DEV_GPU_UTIL, gauge, \"a space before a quote\"\n":                                                                       "not CSV",
		"DCGM_FI_DEV_GPU_UTIL, gauge,\"unterminated\n":                                                                                    "not CSV",
		"# nothing but comments\n":                                                                                                        "no metric listed",
		"DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization\n   \n":                                                                             "wrong number of fields",
		"DCGM_FI_DEV_GPU_UTIL,\tgauge, GPU utilization\n":                                                                                 "not a Prometheus type",
		"DCGM_FI_DEV_GPU_UTIL, gauge, a\nDCGM_FI_DEV_FB_USED, gauge\n":                                                                    "wrong number of fields",
		"": "no metric listed",
	} {
		err := CheckMetrics(list)
		switch {
		case refused == "" && err != nil:
			t.Errorf("%q refused: %v", list, err)
		case refused != "" && (err == nil || !strings.Contains(err.Error(), refused)):
			t.Errorf("%q: got %v, want an error with %q", list, err, refused)
		}
	}
}
