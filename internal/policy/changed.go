package policy

import (
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// SpecChanged passes the ClusterPolicy events that can change what the node
// and upgrade controllers decide: a policy created or deleted, its spec
// changed (a new generation), or its deletion started. A status update
// passes nothing: the ClusterPolicy controller writes status as nodes
// progress, and waking every node for each of those writes would make the
// rollout quadratic in the number of nodes.
func SpecChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
				e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
		},
	}
}
