package main

// RBAC the manager itself needs, whatever its controllers do: the leader
// election Lease and the events it records, in its own namespace. Each
// controller declares its own rules next to its code.

// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=gpu-operator,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,namespace=gpu-operator,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",namespace=gpu-operator,resources=events,verbs=create;patch
