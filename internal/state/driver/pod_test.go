package driver

import (
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/timers"
)

// The upgrade's validation must outlast the driver container's own startup
// budget: a slow but healthy build would otherwise fail every node (issue
// 12, finding 7).
func TestValidationOutlastsTheDriverStartup(t *testing.T) {
	spec, err := podSpec(&gpuv1.ClusterPolicy{}, state.DriverPool{Driver: &gpuv1.DriverSpec{}}, state.OSRelease{ID: "ubuntu", VersionID: "22.04"})
	if err != nil {
		t.Fatal(err)
	}
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

// A DaemonSet name is also its pods' selector label value: one over 63
// characters (a long NVIDIADriver name and an OS) is cut, and a hash keeps
// two such names apart; short names are as they were.
func TestDaemonSetNamesFitALabelValue(t *testing.T) {
	os := state.OSRelease{ID: "ubuntu", VersionID: "22.04"}
	short, _ := DaemonSetOf("gold", "580.126.20", os, true)
	if short != "nvidia-driver-daemonset-gold-ubuntu22.04" {
		t.Fatalf("short name changed: %s", short)
	}
	a, _ := DaemonSetOf("a-thirty-two-character-long-name1", "580.126.20", os, true)
	b, _ := DaemonSetOf("a-thirty-two-character-long-name2", "580.126.20", os, true)
	if len(a) > 63 || len(b) > 63 || a == b {
		t.Fatalf("long names %q (%d) and %q (%d)", a, len(a), b, len(b))
	}
}

// A driver pinned by digest serves every OS from one DaemonSet; a GPUDirect
// module's image is tagged per OS, so the pair is refused, saying which
// to pin, unless the module is pinned by digest too.
func TestGPUDirectImagesNeedAnOS(t *testing.T) {
	gds := &gpuv1.GPUDirectStorageSpec{Enabled: ptr.To(true), Repository: "nvcr.io/nvidia/cloud-native", Image: "nvidia-fs", Version: "2.29.4"}
	pool := state.DriverPool{Name: "default", Driver: &gpuv1.DriverSpec{}, GDS: gds}
	_, err := podSpec(&gpuv1.ClusterPolicy{}, pool, state.OSRelease{})
	if err == nil || !strings.Contains(err.Error(), "pin nvidia-fs-ctr by digest too, or the driver by version") {
		t.Fatalf("a digest driver with a tagged nvidia-fs image: %v", err)
	}
	gds.Version = gpuv1.ImageVersion("sha256:" + strings.Repeat("a", 64))
	spec, err := podSpec(&gpuv1.ClusterPolicy{}, pool, state.OSRelease{})
	if err != nil {
		t.Fatal(err)
	}
	if got := spec.Containers[1].Image; got != "nvcr.io/nvidia/cloud-native/nvidia-fs@"+string(gds.Version) {
		t.Fatalf("image %s", got)
	}
}
