package v1

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
)

// ManagerEviction is how GPU pods leave a node whose driver pod a person
// replaced outside an upgrade, from driver.manager's env, as NVIDIA's
// k8s-driver-manager reads it when such a pod starts over a loaded driver
// (k8s-driver-manager v0.12.0 cmd/driver-manager/main.go, uninstallDriver):
// it cordons the node and evicts the pods that use a GPU
// (ENABLE_GPU_POD_EVICTION), drains the node when that fails
// (ENABLE_AUTO_DRAIN), each bounded by DRAIN_TIMEOUT_SECONDS, and
// uncordons once the new driver is in. Unset values are NVIDIA's
// (assets/state-driver/0500_daemonset.yaml at gpu-operator v26.7.0). It is
// read from the API, not part of it.
// +kubebuilder:object:generate=false
type ManagerEviction struct {
	// Spec is the upgrade policy the replacement's steps follow: its
	// podDeletion and drain. It waits for no job: NVIDIA's manager does
	// not.
	Spec DriverUpgradePolicySpec
	// Evicts is ENABLE_GPU_POD_EVICTION: the GPU pods are evicted before
	// anything else.
	Evicts bool
}

// Acts reports whether anything is taken off the node: with neither
// eviction nor drain, NVIDIA's manager leaves the node as it is and its
// new driver waits for the GPU pods to end.
func (e ManagerEviction) Acts() bool {
	return e.Evicts || (e.Spec.Drain.Enable != nil && *e.Spec.Drain.Enable)
}

// Eviction reads the driver manager's env (nil: NVIDIA's defaults). A value
// that does not parse is an error naming the setting: the API refuses
// such booleans and durations, not a selector that does not parse.
func (m *DriverManagerSpec) Eviction() (ManagerEviction, error) {
	evict, drain, force, emptyDir := true, false, false, false
	var timeout time.Duration
	var selector PodSelector
	var errs []error
	for _, e := range m.env() {
		var err error
		switch e.Name {
		case ManagerEnvGPUPodEviction:
			evict, err = strconv.ParseBool(e.Value)
		case ManagerEnvAutoDrain:
			drain, err = strconv.ParseBool(e.Value)
		case ManagerEnvDrainForce:
			force, err = strconv.ParseBool(e.Value)
		case ManagerEnvDrainDeleteEmptyDir:
			emptyDir, err = strconv.ParseBool(e.Value)
		case ManagerEnvDrainTimeout:
			if timeout, err = time.ParseDuration(e.Value); err == nil && timeout < 0 {
				err = errors.New("a negative duration")
			}
		case ManagerEnvDrainPodSelector:
			selector = PodSelector(e.Value)
			_, err = labels.Parse(e.Value)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("env[%s] %q: %w", e.Name, e.Value, err))
		}
	}
	if len(errs) > 0 {
		return ManagerEviction{}, errors.Join(errs...)
	}
	seconds := int32(min(math.Ceil(timeout.Seconds()), math.MaxInt32))
	no := false
	return ManagerEviction{Evicts: evict, Spec: DriverUpgradePolicySpec{
		AutoUpgrade: &no,
		PodDeletion: PodDeletionSpec{Force: &force, TimeoutSeconds: &seconds, DeleteEmptyDir: &emptyDir},
		Drain: DrainSpec{Enable: &drain, Force: &force, PodSelector: selector, TimeoutSeconds: &seconds,
			DeleteEmptyDir: &emptyDir},
	}}, nil
}

func (m *DriverManagerSpec) env() []EnvVar {
	if m == nil {
		return nil
	}
	return m.Env
}

// ManagerEnvRefusals returns "<path>.env[<name>]: <why>" for each setting of
// the driver manager's env the operator does not act on: a name it does
// not honour, or a value that does not parse, in which case the driver
// upgrade's own podDeletion and drain apply to a driver pod replaced by
// hand.
func ManagerEnvRefusals(m *DriverManagerSpec, path string) []string {
	var out []string
	for _, e := range m.env() {
		if !slices.Contains(ManagerEnvHonoured, e.Name) {
			out = append(out, fmt.Sprintf("%s.env[%s]: no k8s-driver-manager container runs to read it; the driver upgrade honours %s only",
				path, e.Name, strings.Join(ManagerEnvHonoured, ", ")))
		}
	}
	if _, err := m.Eviction(); err != nil {
		out = append(out, fmt.Sprintf("%s.env: %v: a driver pod replaced by hand is followed by upgradePolicy's podDeletion and drain instead", path, err))
	}
	return out
}
