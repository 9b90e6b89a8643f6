package crdschema

import (
	"fmt"

	apiextensions "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apimachinery/pkg/runtime"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// Defaulted returns the policy with the CRD's defaults filled in exactly as
// the API server fills them, so that pure tests see what the operator sees.
func Defaulted(cp *gpuv1.ClusterPolicy) (*gpuv1.ClusterPolicy, error) {
	crd, err := Load()
	if err != nil {
		return nil, err
	}
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(
		crd.Spec.Versions[0].Schema.OpenAPIV3Schema, internal, nil); err != nil {
		return nil, fmt.Errorf("converting the CRD schema: %w", err)
	}
	structural, err := structuralschema.NewStructural(internal)
	if err != nil {
		return nil, fmt.Errorf("the CRD schema is not structural: %w", err)
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cp)
	if err != nil {
		return nil, err
	}
	structuraldefaulting.Default(obj, structural)
	out := &gpuv1.ClusterPolicy{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, out); err != nil {
		return nil, err
	}
	return out, nil
}
