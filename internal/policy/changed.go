package policy

import (
	"maps"

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
	return predicate.Or(predicate.GenerationChangedPredicate{}, DeletionStarted())
}

// DeletionStarted passes an update that sets (or clears) the deletion
// timestamp. The API server also bumps the generation then, but the
// operator's cleanup must not hang on that detail.
func DeletionStarted() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		DeleteFunc: func(event.DeleteEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// CreatedOrDeleted passes creations and deletions only: a status reader
// of another resource cares whether a policy exists, not how it changes.
func CreatedOrDeleted() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return true },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// LabelsChanged passes creations, deletions and label changes: a node's
// labels say its pool, its mode and its states, which status readers count.
func LabelsChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return !maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
		},
	}
}
