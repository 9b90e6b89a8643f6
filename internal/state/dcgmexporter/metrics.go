package dcgmexporter

import (
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// MetricsCopy is the ConfigMap the exporters read their metrics list from:
// the operator's copy of dcgmExporter.config's, taken while that one holds
// a list the exporter can read. A user's ConfigMap deleted, emptied or
// broken leaves the copy as it was, so an exporter pod made again (a new
// node, an eviction) still starts, on the last good list.
const MetricsCopy = "nvidia-dcgm-exporter-metrics"

// promTypes are the Prometheus types dcgm-exporter accepts for a DCGM
// field (dcgm-exporter 4.5.3-4.8.2 internal/pkg/counters/variables.go,
// promMetricType).
var promTypes = map[string]bool{"gauge": true, "counter": true, "histogram": true, "summary": true, "label": true}

// CheckMetrics reports why dcgm-exporter would refuse a metrics list at
// start, reading it as its parser does (dcgm-exporter 4.5.3-4.8.2
// internal/pkg/counters/counter_config.go, ReadCSVFile and
// ExtractCounters): CSV with # comments and as many fields on every line as
// on the first, each field trimmed of spaces only, three a line (name,
// Prometheus type, help), a DCGM field (DCGM_FI_*) of a type the exporter
// knows, or one of the exporter's own (DCGM_EXP_*). A name of either prefix
// that DCGM does not know is not caught here: the exporter refuses it at
// start. Unlike the exporter, it refuses a list with no metric at all,
// which would collect nothing.
func CheckMetrics(list string) error {
	r := csv.NewReader(strings.NewReader(list))
	r.Comment = '#'
	records, err := r.ReadAll()
	if err != nil {
		return fmt.Errorf("not CSV as dcgm-exporter reads it: %w", err)
	}
	for i, rec := range records {
		if len(rec) == 0 {
			continue
		}
		for j := range rec {
			rec[j] = strings.Trim(rec[j], " ")
		}
		if len(rec) != 3 {
			return fmt.Errorf("record %d (%q): %d fields, want 3: name, Prometheus type, help", i+1, strings.Join(rec, ","), len(rec))
		}
		switch {
		case strings.HasPrefix(rec[0], "DCGM_EXP_"):
		case !strings.HasPrefix(rec[0], "DCGM_FI_"):
			return fmt.Errorf("record %d: %q is neither a DCGM field (DCGM_FI_*) nor one of the exporter's (DCGM_EXP_*)", i+1, rec[0])
		case !promTypes[rec[1]]:
			return fmt.Errorf("record %d: %q is not a Prometheus type the exporter knows (gauge, counter, histogram, summary, label)", i+1, rec[1])
		}
	}
	if len(records) == 0 {
		return errors.New("no metric listed")
	}
	return nil
}

// MetricsDigest is a digest of a metrics list: a new content restarts the
// exporters, which read it at start.
func MetricsDigest(list string) string {
	sum := sha256.Sum256([]byte(list))
	return hex.EncodeToString(sum[:8])
}

// metricsConfigMap is the copy the exporters mount.
func metricsConfigMap(in state.RenderInput) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   render.TypeMeta("v1", "ConfigMap"),
		ObjectMeta: render.ObjectMeta(in.Policy, MetricsCopy, in.Namespace, string(state.DCGMExporter)),
		Data:       map[string]string{MetricsKey: in.DCGMMetrics},
	}
}
