package draslices

import (
	"testing"

	"k8s.io/client-go/rest"

	"github.com/gpu-operator/gpu-operator/internal/test/wire"
)

func TestForConfigAsksForSlicesAsProtobuf(t *testing.T) {
	wire.ExpectProtobuf(t, "resource.k8s.io/v1", "ResourceSliceList", func(cfg *rest.Config) (wire.Runnable, error) {
		return ForConfig(cfg)
	})
}
