package main

// RBAC the manager itself needs, whatever its controllers do: the leader
// election Lease in its own namespace, and events. Events about nodes and
// ClusterPolicies, which are cluster-scoped, go to the default namespace,
// so recording them needs a cluster-wide grant. They are written through
// the core API, where an Event's message may change: each carries a trail
// of steps (internal/eventtrail), merge-patched at each step and read back
// after a restart. Each controller declares its own rules next to its code. TokenReviews and SubjectAccessReviews let
// the metrics endpoint ask the API server who a caller is and whether it may
// read /metrics.

// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=gpu-operator,resources=leases,verbs=get;create;update
// +kubebuilder:rbac:groups="",resources=events,verbs=create;get;patch
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
