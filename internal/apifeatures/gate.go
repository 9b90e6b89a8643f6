package apifeatures

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// DRADeviceTaints is the gate under which the API server keeps the device
// taints of ResourceSlices, which the DRA driver's health check publishes
// (k8s.io/api resource/v1 Device.Taints, +featureGate=DRADeviceTaints):
// off by default before Kubernetes 1.36, and then dropped on write.
const DRADeviceTaints = "DRADeviceTaints"

// ErrNotListed says the API server's metrics do not name the gate.
var ErrNotListed = errors.New("the API server's kubernetes_feature_enabled metric does not name the gate")

// metricPrefix starts each line of the metric that reports a feature
// gate's state (k8s.io/component-base/featuregate, in every kube-apiserver
// since 1.26): kubernetes_feature_enabled{name="X",stage="BETA"} 1.
const metricPrefix = "kubernetes_feature_enabled{"

// GateEnabled reads whether the API server runs with a feature gate on,
// from its /metrics. The lines are scanned as they stream rather than
// parsed whole: the exposition runs to megabytes on a large cluster, and
// one gauge is wanted.
func GateEnabled(ctx context.Context, c rest.Interface, gate string) (bool, error) {
	body, err := c.Get().AbsPath("/metrics").Stream(ctx)
	if err != nil {
		return false, fmt.Errorf("reading the API server's /metrics: %w", err)
	}
	defer func() { _ = body.Close() }()
	return gateIn(body, gate)
}

func gateIn(r io.Reader, gate string) (bool, error) {
	want := `name="` + gate + `"`
	scanner := bufio.NewScanner(r)
	scanner.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for scanner.Scan() {
		line := scanner.Text()
		if !strings.HasPrefix(line, metricPrefix) || !strings.Contains(line, want) {
			continue
		}
		fields := strings.Fields(line)
		switch fields[len(fields)-1] {
		case "1":
			return true, nil
		case "0":
			return false, nil
		}
		return false, fmt.Errorf("the API server reports gate %s as %q", gate, line)
	}
	if err := scanner.Err(); err != nil {
		return false, fmt.Errorf("reading the API server's /metrics: %w", err)
	}
	return false, ErrNotListed
}

// retryAfter is how soon a read that failed is tried again: /metrics runs
// to megabytes, and the policy is reconciled far more often.
const retryAfter = 10 * time.Minute

// Gate remembers a gate's state once read: the API server's gates change
// only with its restart, after which the operator is restarted too (as for
// the kinds it serves). A read that failed is tried again after
// retryAfter.
type Gate struct {
	Client rest.Interface
	Name   string
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	mu       sync.Mutex
	known    bool
	on       bool
	failedAt time.Time
}

// Enabled reports the gate's state, and false for known when it could not
// be read.
func (g *Gate) Enabled(ctx context.Context) (on, known bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now
	if g.Now != nil {
		now = g.Now
	}
	if !g.known && (g.failedAt.IsZero() || now().Sub(g.failedAt) >= retryAfter) {
		on, err := GateEnabled(ctx, g.Client, g.Name)
		if err != nil {
			g.failedAt = now()
			return false, false
		}
		g.on, g.known = on, true
	}
	return g.on, g.known
}
