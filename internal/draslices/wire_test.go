package draslices

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/gpu-operator/gpu-operator/internal/test/wire"
)

func TestForConfigAsksForSlicesAsProtobuf(t *testing.T) {
	accept := wire.FirstAccept(t, "resource.k8s.io/v1", "ResourceSliceList", func(cfg *rest.Config) (wire.Runnable, error) {
		return ForConfig(cfg)
	})
	if !strings.HasPrefix(accept, runtime.ContentTypeProtobuf) {
		t.Errorf("the ResourceSlices' informer asked for %q, want protobuf first", accept)
	}
}
