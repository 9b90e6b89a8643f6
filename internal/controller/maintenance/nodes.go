package maintenance

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

// asNode reads the node the API server returned for an apply: the client
// decodes the response into the apply configuration, which mirrors the
// node's fields.
func asNode(ac *corev1ac.NodeApplyConfiguration) (*corev1.Node, error) {
	raw, err := json.Marshal(ac)
	if err != nil {
		return nil, fmt.Errorf("reading the written node: %w", err)
	}
	n := &corev1.Node{}
	if err := json.Unmarshal(raw, n); err != nil {
		return nil, fmt.Errorf("reading the written node: %w", err)
	}
	return n, nil
}
