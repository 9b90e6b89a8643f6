package v1

import (
	"reflect"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Every field the operator accepts without acting on it says why, in its
// refused tag: status.ignoredFields quotes it to the user.
func TestEveryAcceptedOnlyFieldSaysWhy(t *testing.T) {
	fields := AcceptedOnly(reflect.TypeFor[ClusterPolicySpec](), "spec")
	if len(fields) == 0 {
		t.Fatal("no accepted-only field found: the walk is broken")
	}
	for path, why := range fields {
		if why == "" {
			t.Errorf("%s is accepted without being acted on and gives no reason: add a refused tag", path)
		}
	}
}

// The status lists the set fields with their reasons, and nothing unset:
// of driver.manager, its image fields and the env it does not honour.
func TestRefusedFields(t *testing.T) {
	s := &ClusterPolicySpec{}
	s.Validator.Args = &apiextensionsv1.JSON{Raw: []byte(`["--x"]`)}
	s.Validator.CUDA = &ValidatorComponentSpec{Env: []EnvVar{{Name: EnvWithWorkload, Value: "false"}, {Name: "WITH_WAIT", Value: "true"}}}
	s.Driver.Manager = &DriverManagerSpec{Env: []EnvVar{{Name: ManagerEnvAutoDrain, Value: "true"}, {Name: "FORCE_REINSTALL", Value: "true"}}}
	s.Driver.Manager.Image = &apiextensionsv1.JSON{Raw: []byte(`"k8s-driver-manager"`)}
	got := s.RefusedFields()
	want := []string{
		"spec.driver.manager.image: no k8s-driver-manager container runs: the driver upgrade evicts GPU pods as its env says",
		"spec.validator.args: " + AcceptedOnly(reflect.TypeFor[ClusterPolicySpec](), "spec")["spec.validator.args"],
		"spec.driver.manager.env[FORCE_REINSTALL]: no k8s-driver-manager container runs to read it; the driver upgrade honours " +
			"ENABLE_GPU_POD_EVICTION, ENABLE_AUTO_DRAIN, DRAIN_USE_FORCE, DRAIN_POD_SELECTOR_LABEL, DRAIN_TIMEOUT_SECONDS, DRAIN_DELETE_EMPTYDIR_DATA only",
		"spec.validator.cuda.env[WITH_WAIT]: no validation container runs to read it; only WITH_WORKLOAD is read, " +
			"and validator.env reaches the CUDA workload's container",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("RefusedFields() = %q, want %q", got, want)
	}
	if paths := s.IgnoredFields(); !reflect.DeepEqual(paths, []string{"spec.driver.manager.image", "spec.validator.args",
		"spec.driver.manager.env[FORCE_REINSTALL]", "spec.validator.cuda.env[WITH_WAIT]"}) {
		t.Fatalf("IgnoredFields() = %q", paths)
	}
}

// The CUDA workload proof runs unless NVIDIA's switch of its CUDA workload
// turns it off, and the device plugin's workload, which it is, keeps it.
func TestWorkloadProofFollowsNVIDIAsSwitches(t *testing.T) {
	env := func(v string) *ValidatorComponentSpec {
		return &ValidatorComponentSpec{Env: []EnvVar{{Name: EnvWithWorkload, Value: v}}}
	}
	cases := []struct {
		name         string
		cuda, plugin *ValidatorComponentSpec
		want         bool
	}{
		{"nothing set", nil, nil, true},
		{"cuda on", env("true"), nil, true},
		{"cuda off", env("false"), nil, false},
		{"cuda off as NVIDIA parses it", env("0"), nil, false},
		{"cuda off, plugin's asked for", env("false"), env("true"), true},
		{"cuda off, plugin's off (NVIDIA's default)", env("false"), env("false"), false},
		{"plugin's off alone", nil, env("false"), true},
	}
	for _, c := range cases {
		v := &ValidatorSpec{CUDA: c.cuda, Plugin: c.plugin}
		if got := v.WorkloadProof(); got != c.want {
			t.Errorf("%s: WorkloadProof() = %v, want %v", c.name, got, c.want)
		}
	}
}
