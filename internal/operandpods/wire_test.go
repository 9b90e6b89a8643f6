package operandpods

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/gpu-operator/gpu-operator/internal/test/wire"
)

// The operand pods' watch is the operator's busiest: it must not be JSON.
func TestForNamespaceAsksForPodsAsProtobuf(t *testing.T) {
	accept := wire.FirstAccept(t, "v1", "PodList", func(cfg *rest.Config) (wire.Runnable, error) {
		return ForNamespace(cfg, "gpu-operator")
	})
	if !strings.HasPrefix(accept, runtime.ContentTypeProtobuf) {
		t.Errorf("the operand pods' informer asked for %q, want protobuf first", accept)
	}
}
