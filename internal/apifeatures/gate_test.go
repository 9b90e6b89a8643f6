package apifeatures

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// An excerpt of a kube-apiserver's /metrics (v1.35: the gate beta, off).
const metrics = `# HELP kubernetes_feature_enabled [BETA] This metric records the data about the stage and enablement of a k8s feature.
# TYPE kubernetes_feature_enabled gauge
kubernetes_feature_enabled{name="DRADeviceTaintRules",stage="ALPHA"} 0
kubernetes_feature_enabled{name="DRADeviceTaints",stage="BETA"} 0
kubernetes_feature_enabled{name="DynamicResourceAllocation",stage=""} 1
apiserver_request_total{code="200",resource="nodes"} 42
`

// The gate's own line decides, not a gate whose name starts like it.
func TestGateIn(t *testing.T) {
	g := NewWithT(t)
	on, err := gateIn(strings.NewReader(metrics), DRADeviceTaints)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(on).To(BeFalse())
	on, err = gateIn(strings.NewReader(metrics), "DynamicResourceAllocation")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(on).To(BeTrue())
	_, err = gateIn(strings.NewReader(metrics), "NoSuchGate")
	g.Expect(err).To(MatchError(ErrNotListed))
	_, err = gateIn(strings.NewReader(`kubernetes_feature_enabled{name="DRADeviceTaints"} 0.5`+"\n"), DRADeviceTaints)
	g.Expect(err).To(MatchError(ContainSubstring("reports gate DRADeviceTaints as")))
}

// Read once and remembered; a failed read is tried again only after
// retryAfter, so that the policy's passes do not each fetch /metrics.
func TestGateRemembers(t *testing.T) {
	g := NewWithT(t)
	var calls atomic.Int32
	forbidden := atomic.Bool{}
	forbidden.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		if forbidden.Load() {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		_, _ = w.Write([]byte(metrics))
	}))
	defer srv.Close()
	client, err := rest.RESTClientFor(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{
		GroupVersion: &schema.GroupVersion{}, NegotiatedSerializer: scheme.Codecs.WithoutConversion()}})
	g.Expect(err).NotTo(HaveOccurred())
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	gate := &Gate{Client: client, Name: DRADeviceTaints, Now: func() time.Time { return now }}
	ctx := context.Background()

	_, known := gate.Enabled(ctx)
	g.Expect(known).To(BeFalse())
	_, known = gate.Enabled(ctx)
	g.Expect(known).To(BeFalse())
	g.Expect(calls.Load()).To(BeEquivalentTo(1), "not asked again before retryAfter")

	forbidden.Store(false)
	now = now.Add(retryAfter)
	on, known := gate.Enabled(ctx)
	g.Expect(known).To(BeTrue())
	g.Expect(on).To(BeFalse())
	gate.Enabled(ctx)
	g.Expect(calls.Load()).To(BeEquivalentTo(2), "remembered once read")
}
