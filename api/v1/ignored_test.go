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

// The status lists the set fields with their reasons, and nothing unset.
func TestRefusedFields(t *testing.T) {
	s := &ClusterPolicySpec{}
	s.Validator = &apiextensionsv1.JSON{Raw: []byte(`{}`)}
	s.Driver.Manager = &apiextensionsv1.JSON{Raw: []byte(`{}`)}
	got := s.RefusedFields()
	want := []string{
		"spec.driver.manager: k8s-driver-manager does not run: the upgrade state machine cordons, evicts GPU pods, drains and " +
			"replaces drivers node by node (driver.upgradePolicy: podDeletion, drain)",
		"spec.validator: " + AcceptedOnly(reflect.TypeFor[ClusterPolicySpec](), "spec")["spec.validator"],
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("RefusedFields() = %q, want %q", got, want)
	}
	if paths := s.IgnoredFields(); !reflect.DeepEqual(paths, []string{"spec.driver.manager", "spec.validator"}) {
		t.Fatalf("IgnoredFields() = %q", paths)
	}
}
