package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced

// ComputeDomainClique lists the IMEX daemons of one NVLink clique (the
// nodes one NVLink partition connects) within a ComputeDomain. The driver
// creates it in its own namespace, named "<ComputeDomain UID>.<clique ID>".
type ComputeDomainClique struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Daemons are the clique's IMEX daemons, one per node.
	// +listType=map
	// +listMapKey=nodeName
	Daemons []ComputeDomainDaemonInfo `json:"daemons,omitempty"`
}

// +kubebuilder:object:root=true

// ComputeDomainCliqueList is a list of ComputeDomainCliques.
type ComputeDomainCliqueList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []ComputeDomainClique `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ComputeDomainClique{}, &ComputeDomainCliqueList{})
}

// ComputeDomainDaemonInfo is one IMEX daemon of a clique, on one node.
type ComputeDomainDaemonInfo struct {
	NodeName  string `json:"nodeName"`
	IPAddress string `json:"ipAddress"`
	CliqueID  string `json:"cliqueID"`
	// Index numbers the daemon within its clique, so that every node maps
	// the same IP address to the same DNS name: (cliqueID, index) is
	// unique. Optional, though not omitted when 0, so that a downgraded
	// driver still reads it.
	// +kubebuilder:validation:Optional
	Index int `json:"index"`
	// Status is Ready while the daemon can broker GPU memory exchanges.
	// Optional, for downgrades.
	// +kubebuilder:validation:Optional
	// +kubebuilder:validation:Enum=Ready;NotReady
	// +kubebuilder:default:=NotReady
	Status string `json:"status,omitempty"`
}
