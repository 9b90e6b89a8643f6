package maintenance

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/draslices"
)

// +kubebuilder:rbac:groups=resource.k8s.io,resources=resourceclaims,verbs=get

// holdsNVIDIAClaim reports whether one of a pod's ResourceClaims holds a
// device of NVIDIA's DRA driver, a GPU or an NVLink compute domain's
// channel: on a node in allocation mode dra, that is how a pod holds a
// GPU. The claims are read live, only in the steps that count or evict
// GPU pods; a claim that cannot be read counts, so that a failed read
// never lets a driver go from under a workload.
func (r *Reconciler) holdsNVIDIAClaim(ctx context.Context, p *corev1.Pod) bool {
	for _, name := range claimNames(p) {
		if r.APIReader == nil {
			return true
		}
		claim := &resourcev1.ResourceClaim{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: name}, claim)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return true
		case claim.Status.Allocation == nil:
			continue
		}
		for _, res := range claim.Status.Allocation.Devices.Results {
			if res.Driver == draslices.GPUDriver || res.Driver == draslices.ComputeDomainDriver {
				return true
			}
		}
	}
	return false
}

// claimNames are the ResourceClaims a pod uses: those it names, shared
// with other pods, and those made for it from a template, named in its
// status once made.
func claimNames(p *corev1.Pod) []string {
	made := map[string]string{}
	for _, s := range p.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil {
			made[s.Name] = *s.ResourceClaimName
		}
	}
	var names []string
	for _, c := range p.Spec.ResourceClaims {
		switch {
		case c.ResourceClaimName != nil:
			names = append(names, *c.ResourceClaimName)
		case made[c.Name] != "":
			names = append(names, made[c.Name])
			delete(made, c.Name)
		}
	}
	for _, n := range made {
		names = append(names, n) // a status entry the spec does not name
	}
	return names
}
