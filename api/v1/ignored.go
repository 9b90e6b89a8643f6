package v1

import (
	"reflect"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

var opaqueType = reflect.TypeFor[*apiextensionsv1.JSON]()

// RefusedTag is the struct tag of an accepted-only field that says why
// the operator does not act on it: every such field has one, which
// status.ignoredFields quotes.
const RefusedTag = "refused"

// IgnoredFields returns the JSON paths, such as "spec.validator", of the
// fields that are set in the spec and that this operator accepts only for
// compatibility. It finds them by type, so a newly accepted field is
// reported without further code.
func (s *ClusterPolicySpec) IgnoredFields() []string { return PathsOf(s.RefusedFields()) }

// RefusedFields returns, for each field IgnoredFields lists, the path and
// why the operator does not act on it ("spec.validator: ..."): what
// status.ignoredFields holds.
func (s *ClusterPolicySpec) RefusedFields() []string {
	out := append(Refusals(s, "spec"), ManagerEnvRefusals(s.Driver.Manager, "spec.driver.manager")...)
	return append(out, ValidatorEnvRefusals(&s.Validator, "spec.validator")...)
}

// PathsOf cuts each "<path>: <why>" of Refusals to its path.
func PathsOf(refusals []string) []string {
	out := make([]string, 0, len(refusals))
	for _, r := range refusals {
		path, _, _ := strings.Cut(r, ": ")
		out = append(out, path)
	}
	return out
}

// OpaqueFields returns the JSON paths under prefix of the fields of the
// struct s points to that hold accepted-only values (apiextensions JSON)
// and are set.
func OpaqueFields(s any, prefix string) []string {
	var paths []string
	collectOpaque(reflect.ValueOf(s).Elem(), prefix, func(path, _ string) { paths = append(paths, path) })
	return paths
}

// Refusals returns "<path>: <why>" for each field OpaqueFields lists.
func Refusals(s any, prefix string) []string {
	var out []string
	collectOpaque(reflect.ValueOf(s).Elem(), prefix, func(path, why string) { out = append(out, path+": "+why) })
	return out
}

// AcceptedOnly returns every accepted-only field of a struct type, set or
// not, by JSON path under prefix, with why it is not acted on ("" where
// the field gives no reason, which a test forbids).
func AcceptedOnly(t reflect.Type, prefix string) map[string]string {
	out := map[string]string{}
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for i := range t.NumField() {
			field := t.Field(i)
			childPath := childPath(path, field)
			ft := field.Type
			switch {
			case ft == opaqueType:
				out[childPath] = field.Tag.Get(RefusedTag)
			case ft.Kind() == reflect.Struct:
				walk(ft, childPath)
			case ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct:
				walk(ft.Elem(), childPath)
			}
		}
	}
	walk(t, prefix)
	return out
}

func childPath(path string, field reflect.StructField) string {
	if name, _, _ := strings.Cut(field.Tag.Get("json"), ","); name != "" {
		return path + "." + name
	}
	return path
}

func collectOpaque(v reflect.Value, path string, found func(path, why string)) {
	t := v.Type()
	for i := range t.NumField() {
		field, value := t.Field(i), v.Field(i)
		childPath := childPath(path, field)
		switch {
		case field.Type == opaqueType:
			if !value.IsNil() {
				found(childPath, field.Tag.Get(RefusedTag))
			}
		case field.Type.Kind() == reflect.Struct:
			collectOpaque(value, childPath, found)
		case field.Type.Kind() == reflect.Pointer && field.Type.Elem().Kind() == reflect.Struct && !value.IsNil():
			collectOpaque(value.Elem(), childPath, found)
		}
	}
}
