package packaging

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	"github.com/gpu-operator/gpu-operator/internal/metrics"
)

// prometheusRuleAPI tells helm template that the cluster serves
// PrometheusRules.
var prometheusRuleAPI = []string{"--api-versions", "monitoring.coreos.com/v1/PrometheusRule"}

// monitoring renders the chart's rules and dashboard with the values on,
// and writes them where promtool and promnames read them: the rules as a
// plain rule file (the PrometheusRule's spec), the dashboard's JSON.
func monitoring(t *testing.T, g Gomega) (rules, dashboard string) {
	objs := template(t, append(prometheusRuleAPI, "--set", "alerts.enabled=true", "--set", "dashboards.enabled=true")...)
	rule := find(objs, "PrometheusRule", "gpu-operator")
	g.Expect(rule).NotTo(BeNil(), "alerts.enabled renders a PrometheusRule")
	spec, _, _ := unstructured.NestedMap(rule.Object, "spec")
	data, err := yaml.Marshal(spec)
	g.Expect(err).NotTo(HaveOccurred())
	dir := t.TempDir()
	rules = filepath.Join(dir, "rules.yaml")
	g.Expect(os.WriteFile(rules, data, 0o600)).To(Succeed())

	cm := find(objs, "ConfigMap", "gpu-operator-dashboard")
	g.Expect(cm).NotTo(BeNil(), "dashboards.enabled renders the dashboard's ConfigMap")
	g.Expect(cm.GetLabels()).To(HaveKeyWithValue("grafana_dashboard", "1"), "the Grafana sidecar's label")
	json, _, _ := unstructured.NestedString(cm.Object, "data", "gpu-operator.json")
	dashboard = filepath.Join(dir, "dashboard.json")
	g.Expect(os.WriteFile(dashboard, []byte(json), 0o600)).To(Succeed())
	return rules, dashboard
}

// tool runs a binary of bin/ and returns its output.
func tool(t *testing.T, name string, args ...string) string {
	t.Helper()
	path := filepath.Join(root, "bin", name)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no %s in bin/: run `make tools` (or `make test`) to build it: %v", name, err)
	}
	out, err := exec.Command(path, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Both render only when asked for, and the rules need the Prometheus
// Operator's kind.
func TestMonitoringOffByDefault(t *testing.T) {
	g := NewWithT(t)
	objs := template(t, prometheusRuleAPI...)
	g.Expect(find(objs, "PrometheusRule", "gpu-operator")).To(BeNil())
	g.Expect(find(objs, "ConfigMap", "gpu-operator-dashboard")).To(BeNil())
	_, err := helm("template", "gpu-operator", chartPath, "-n", "gpu-operator", "--set", "alerts.enabled=true")
	g.Expect(err).To(MatchError(ContainSubstring("install the Prometheus Operator's CRDs first")))
}

// The rules pass promtool, and every alert has a runbook in docs/alerts.md.
func TestAlertRulesPassPromtool(t *testing.T) {
	g := NewWithT(t)
	rules, _ := monitoring(t, g)
	g.Expect(tool(t, "promtool", "check", "rules", rules)).To(ContainSubstring("SUCCESS"))

	data, err := os.ReadFile(rules)
	g.Expect(err).NotTo(HaveOccurred())
	runbooks, err := os.ReadFile(filepath.Join(root, "docs", "alerts.md"))
	g.Expect(err).NotTo(HaveOccurred())
	alerts := regexp.MustCompile(`(?m)^\s*-?\s*alert: (\w+)$`).FindAllStringSubmatch(string(data), -1)
	g.Expect(alerts).To(HaveLen(8))
	for _, a := range alerts {
		g.Expect(string(runbooks)).To(ContainSubstring("### "+a[1]+"\n"), "docs/alerts.md has a runbook for %s", a[1])
		g.Expect(string(data)).To(ContainSubstring("#"+strings.ToLower(a[1])), "the alert links its runbook")
	}
}

// Every metric a rule or panel names is exported: by the operator (its
// own metrics, and controller-runtime's leader election gauge), by
// dcgm-exporter's default list, or by Prometheus itself (up).
func TestMonitoringNamesExportedMetrics(t *testing.T) {
	g := NewWithT(t)
	rules, dashboard := monitoring(t, g)
	used := strings.Fields(tool(t, "promnames", "-rules", rules, "-dashboard", dashboard))
	g.Expect(used).To(ContainElements("gpu_operator_node_not_ready", "DCGM_FI_DEV_GPU_UTIL"), "promnames reads both")

	exported := map[string]bool{"up": true}
	for _, n := range operatorMetricNames(g) {
		exported[n] = true
	}
	for _, n := range dcgmExporterMetricNames(g) {
		exported[n] = true
	}
	for _, n := range used {
		g.Expect(exported).To(HaveKey(n), "%s, named by the chart's rules or dashboard, is exported by nobody", n)
	}
}

// operatorMetricNames are the names the operator's registry serves: its
// own metrics (each histogram with its series' suffixes) and the leader
// election gauge controller-runtime registers.
func operatorMetricNames(g Gomega) []string {
	m, err := metrics.New(prometheus.NewRegistry())
	g.Expect(err).NotTo(HaveOccurred())
	var names []string
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	v := reflect.ValueOf(m).Elem()
	for i := range v.NumField() {
		c, ok := v.Field(i).Interface().(prometheus.Collector)
		g.Expect(ok).To(BeTrue(), "field %s of metrics.Metrics is a collector", v.Type().Field(i).Name)
		ch := make(chan *prometheus.Desc, 1)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			name := fqName.FindStringSubmatch(d.String())[1]
			names = append(names, name)
			if _, isHistogram := c.(prometheus.Histogram); isHistogram {
				names = append(names, name+"_bucket", name+"_sum", name+"_count")
			}
		}
	}
	// A leader elector's creation sets controller-runtime's gauge to 0
	// for its Lease; an unset vector would not be gathered.
	_, err = leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Name: "gpu-operator.nvidia.com"},
			LockConfig: resourcelock.ResourceLockConfig{Identity: "test"}},
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(_ context.Context) {}, OnStoppedLeading: func() {}},
		Name:      "gpu-operator.nvidia.com",
	})
	g.Expect(err).NotTo(HaveOccurred())
	families, err := ctrlmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		names = append(names, familyNames(f)...)
	}
	g.Expect(names).To(ContainElement("leader_election_master_status"))
	return names
}

func familyNames(f *dto.MetricFamily) []string {
	if f.GetType() == dto.MetricType_HISTOGRAM {
		return []string{f.GetName(), f.GetName() + "_bucket", f.GetName() + "_sum", f.GetName() + "_count"}
	}
	return []string{f.GetName()}
}

// dcgmExporterMetricNames reads testdata/dcgm-exporter-metrics.txt.
func dcgmExporterMetricNames(g Gomega) []string {
	f, err := os.Open(filepath.Join(root, "test", "packaging", "testdata", "dcgm-exporter-metrics.txt"))
	g.Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	var names []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		if line := strings.TrimSpace(s.Text()); line != "" && !strings.HasPrefix(line, "#") {
			names = append(names, line)
		}
	}
	g.Expect(s.Err()).NotTo(HaveOccurred())
	return names
}
