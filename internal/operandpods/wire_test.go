package operandpods

import (
	"testing"

	"k8s.io/client-go/rest"

	"github.com/gpu-operator/gpu-operator/internal/test/wire"
)

// The operand pods' watch is the operator's busiest: it must not be JSON.
func TestForNamespaceAsksForPodsAsProtobuf(t *testing.T) {
	wire.ExpectProtobuf(t, "v1", "PodList", func(cfg *rest.Config) (wire.Runnable, error) {
		return ForNamespace(cfg, "gpu-operator")
	})
}
