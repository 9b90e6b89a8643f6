package driverpools

import (
	"os"
	"testing"

	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
)

// suite is this package's API server, operator and simulator.
var suite *controllertest.Suite

func TestMain(m *testing.M) { os.Exit(controllertest.Run(m, &suite)) }
