package main

import (
	"os"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gpu-operator/gpu-operator/internal/kubectlgpu"
)

func main() {
	// The clients log nothing a person asked for: errors are returned.
	ctrllog.SetLogger(logr.Discard())
	if err := kubectlgpu.NewCommand(os.Stdout).Execute(); err != nil {
		os.Exit(1)
	}
}
