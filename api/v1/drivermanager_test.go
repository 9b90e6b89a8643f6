package v1

import (
	"strings"
	"testing"
)

// NVIDIA's defaults where nothing is set (assets/state-driver/
// 0500_daemonset.yaml at v26.7.0): evict GPU pods, no drain, no time limit.
func TestManagerEvictionDefaultsAreNVIDIAs(t *testing.T) {
	for _, m := range []*DriverManagerSpec{nil, {}} {
		e, err := m.Eviction()
		if err != nil {
			t.Fatal(err)
		}
		if !e.Evicts || *e.Spec.Drain.Enable || *e.Spec.PodDeletion.TimeoutSeconds != 0 || *e.Spec.PodDeletion.Force ||
			*e.Spec.PodDeletion.DeleteEmptyDir || e.Spec.Drain.PodSelector != "" || !e.Acts() {
			t.Errorf("%v: got %+v", m, e)
		}
		if e.Spec.WaitForCompletion.PodSelector != "" {
			t.Error("NVIDIA's driver manager waits for no job")
		}
	}
}

func TestManagerEvictionReadsEachSetting(t *testing.T) {
	m := &DriverManagerSpec{Env: []EnvVar{
		{Name: ManagerEnvGPUPodEviction, Value: "false"}, {Name: ManagerEnvAutoDrain, Value: "true"},
		{Name: ManagerEnvDrainForce, Value: "True"}, {Name: ManagerEnvDrainPodSelector, Value: "app!=keep"},
		{Name: ManagerEnvDrainTimeout, Value: "90500ms"}, {Name: ManagerEnvDrainDeleteEmptyDir, Value: "1"},
	}}
	e, err := m.Eviction()
	if err != nil {
		t.Fatal(err)
	}
	d, pd := e.Spec.Drain, e.Spec.PodDeletion
	if e.Evicts || !*d.Enable || !*d.Force || !*pd.Force || d.PodSelector != "app!=keep" || *d.TimeoutSeconds != 91 ||
		*pd.TimeoutSeconds != 91 || !*d.DeleteEmptyDir || !*pd.DeleteEmptyDir || !e.Acts() {
		t.Errorf("got %+v", e)
	}
	off := &DriverManagerSpec{Env: []EnvVar{{Name: ManagerEnvGPUPodEviction, Value: "false"}}}
	if e, _ := off.Eviction(); e.Acts() {
		t.Error("neither eviction nor drain: nothing is taken off the node")
	}
}

// A value that does not parse names its setting, and the status says what
// applies instead.
func TestManagerEvictionRefusesWhatDoesNotParse(t *testing.T) {
	m := &DriverManagerSpec{Env: []EnvVar{{Name: ManagerEnvDrainPodSelector, Value: "a in (b"}, {Name: ManagerEnvDrainTimeout, Value: "300"}}}
	_, err := m.Eviction()
	if err == nil || !strings.Contains(err.Error(), "env[DRAIN_POD_SELECTOR_LABEL]") || !strings.Contains(err.Error(), "env[DRAIN_TIMEOUT_SECONDS]") {
		t.Fatalf("err = %v", err)
	}
	r := ManagerEnvRefusals(m, "spec.manager")
	if len(r) != 1 || !strings.HasPrefix(r[0], "spec.manager.env: ") || !strings.HasSuffix(r[0], "upgradePolicy's podDeletion and drain instead") {
		t.Errorf("refusals %q", r)
	}
}
