package policy

import (
	"context"
	"fmt"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// Active returns the active ClusterPolicy, or nil when there is none.
func Active(ctx context.Context, r client.Reader) (*gpuv1.ClusterPolicy, error) {
	list := &gpuv1.ClusterPolicyList{}
	if err := r.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing ClusterPolicies: %w", err)
	}
	return Oldest(list.Items), nil
}

// Oldest returns the oldest policy not being deleted, by creation time and
// then name, so that every replica and every restart picks the same one.
func Oldest(items []gpuv1.ClusterPolicy) *gpuv1.ClusterPolicy {
	var live []*gpuv1.ClusterPolicy
	for i := range items {
		if items[i].DeletionTimestamp == nil {
			live = append(live, &items[i])
		}
	}
	if len(live) == 0 {
		return nil
	}
	return slices.MinFunc(live, func(a, b *gpuv1.ClusterPolicy) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
}
