package driver

import (
	"testing"
	"time"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/timers"
)

// The upgrade's validation must outlast the driver container's own startup
// budget: a slow but healthy build would otherwise fail every node (issue
// 12, finding 7).
func TestValidationOutlastsTheDriverStartup(t *testing.T) {
	spec := podSpec(&gpuv1.ClusterPolicy{}, &gpuv1.DriverSpec{}, nil, state.OSRelease{ID: "ubuntu", VersionID: "22.04"})
	p := spec.Containers[0].StartupProbe
	if p == nil {
		t.Fatal("the driver container has no startup probe")
	}
	// The budget as Kubernetes documents it: nvidia-smi answers at once,
	// with an error, until the modules load.
	budget := time.Duration(p.InitialDelaySeconds)*time.Second + time.Duration(p.FailureThreshold*p.PeriodSeconds)*time.Second
	validation := timers.Defaults().DriverValidationTimeout
	t.Logf("driver startup budget %s, upgrade validation timeout %s", budget, validation)
	if validation <= budget {
		t.Fatalf("--driver-validation-timeout's default (%s) must exceed the driver's startup budget (%s)", validation, budget)
	}
}
