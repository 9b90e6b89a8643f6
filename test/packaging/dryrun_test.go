package packaging

import (
	"context"
	"os"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/test/envtest"
)

// k8sClient talks to the suite's API server with strict field validation.
var k8sClient client.Client

func TestMain(m *testing.M) {
	os.Exit(envtest.RunStrict(m, "test/packaging", func(c client.Client) error {
		k8sClient = c
		return c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gpu-operator"}})
	}))
}

// Every object the chart renders, hooks and the ClusterPolicy included,
// passes the API server's validation in a server-side dry run; kinds the
// test cluster does not serve (ServiceMonitor) are the only ones skipped.
func TestRenderedChartPassesServerValidation(t *testing.T) {
	for name, args := range map[string][]string{
		"documented command": {"--set", "driver.enabled=true", "--set", "driver.version=535.154.05"},
		"every value set":    {"-f", fullValues},
		"NVIDIADrivers":      {"-f", fullValues, "--set", "driver.nvidiaDriverCRD.enabled=true", "--set", "driver.kernelModuleConfig.name=gb200-params"},
	} {
		t.Run(name, func(t *testing.T) {
			checked, skipped := 0, 0
			for _, o := range template(t, args...) {
				err := k8sClient.Create(context.Background(), o, client.DryRunAll)
				if meta.IsNoMatchError(err) {
					skipped++
					continue
				}
				NewWithT(t).Expect(err).NotTo(HaveOccurred(), "%s %s", o.GetKind(), o.GetName())
				checked++
			}
			t.Logf("%d objects passed a server-side dry run, %d of unserved kinds skipped", checked, skipped)
			NewWithT(t).Expect(checked).To(BeNumerically(">=", 15))
		})
	}
}
