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
	s.Validator = &apiextensionsv1.JSON{Raw: []byte(`{}`)}
	s.Driver.Manager = &DriverManagerSpec{Env: []EnvVar{{Name: ManagerEnvAutoDrain, Value: "true"}, {Name: "FORCE_REINSTALL", Value: "true"}}}
	s.Driver.Manager.Image = &apiextensionsv1.JSON{Raw: []byte(`"k8s-driver-manager"`)}
	got := s.RefusedFields()
	want := []string{
		"spec.driver.manager.image: no k8s-driver-manager container runs: the driver upgrade evicts GPU pods as its env says",
		"spec.validator: " + AcceptedOnly(reflect.TypeFor[ClusterPolicySpec](), "spec")["spec.validator"],
		"spec.driver.manager.env[FORCE_REINSTALL]: no k8s-driver-manager container runs to read it; the driver upgrade honours " +
			"ENABLE_GPU_POD_EVICTION, ENABLE_AUTO_DRAIN, DRAIN_USE_FORCE, DRAIN_POD_SELECTOR_LABEL, DRAIN_TIMEOUT_SECONDS, DRAIN_DELETE_EMPTYDIR_DATA only",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("RefusedFields() = %q, want %q", got, want)
	}
	if paths := s.IgnoredFields(); !reflect.DeepEqual(paths, []string{"spec.driver.manager.image", "spec.validator", "spec.driver.manager.env[FORCE_REINSTALL]"}) {
		t.Fatalf("IgnoredFields() = %q", paths)
	}
}
