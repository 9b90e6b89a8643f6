package v1

import (
	"reflect"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

var opaqueType = reflect.TypeFor[*apiextensionsv1.JSON]()

// IgnoredFields returns the JSON paths, such as "spec.driver.rdma", of the
// fields that are set in the spec and that this operator accepts only for
// compatibility. It finds them by type, so a newly accepted field is
// reported without further code.
func (s *ClusterPolicySpec) IgnoredFields() []string { return OpaqueFields(s, "spec") }

// OpaqueFields returns the JSON paths under prefix of the fields of the
// struct s points to that hold accepted-only values (apiextensions JSON)
// and are set.
func OpaqueFields(s any, prefix string) []string {
	var paths []string
	collectOpaque(reflect.ValueOf(s).Elem(), prefix, &paths)
	return paths
}

func collectOpaque(v reflect.Value, path string, paths *[]string) {
	t := v.Type()
	for i := range t.NumField() {
		field, value := t.Field(i), v.Field(i)
		name, _, _ := strings.Cut(field.Tag.Get("json"), ",")
		childPath := path
		if name != "" {
			childPath = path + "." + name
		}
		switch {
		case field.Type == opaqueType:
			if !value.IsNil() {
				*paths = append(*paths, childPath)
			}
		case field.Type.Kind() == reflect.Struct:
			collectOpaque(value, childPath, paths)
		case field.Type.Kind() == reflect.Pointer && field.Type.Elem().Kind() == reflect.Struct && !value.IsNil():
			collectOpaque(value.Elem(), childPath, paths)
		}
	}
}
