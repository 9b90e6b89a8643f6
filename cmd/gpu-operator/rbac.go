package main

// RBAC the manager itself needs, whatever its controllers do: the leader
// election Lease in its own namespace, and events. Events about nodes and
// ClusterPolicies, which are cluster-scoped, go to the default namespace,
// so recording them needs a cluster-wide grant. Each controller declares
// its own rules next to its code.

// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=gpu-operator,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
