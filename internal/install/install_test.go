package install

import (
	"context"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func crd(name string, labels map[string]string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// Deleting the CRDs on uninstall deletes the operator's own and the NFD
// CRDs setup created; one another installer created stays, and with it
// every NodeFeature of that NFD (issue 13, item 1). The DRA driver's
// ComputeDomain CRDs stay, setup's too: their objects may be another
// driver's, and their finalizers would hold the deletion for ever.
func TestDeleteCRDsLeavesAnotherInstallersNFD(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ours := map[string]string{LabelInstalledBy: installedBy}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		crd("clusterpolicies.nvidia.com", nil),
		crd("nodefeatures.nfd.k8s-sigs.io", ours),
		crd("nodefeaturerules.nfd.k8s-sigs.io", map[string]string{LabelInstalledBy: "Helm"}),
		crd("computedomains.resource.nvidia.com", ours),
		crd("computedomaincliques.resource.nvidia.com", nil),
	).Build()
	if err := deleteCRDs(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	left := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.List(context.Background(), left); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range left.Items {
		names = append(names, x.Name)
	}
	want := []string{"computedomaincliques.resource.nvidia.com", "computedomains.resource.nvidia.com", "nodefeaturerules.nfd.k8s-sigs.io"}
	if !slices.Equal(names, want) {
		t.Fatalf("left %v, want %v", names, want)
	}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "clusterpolicies.nvidia.com"}, crd("", nil)); err == nil {
		t.Fatal("the ClusterPolicy CRD was not deleted")
	}
}
