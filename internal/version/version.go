package version

// Version is the operator's release version, set with
// -ldflags "-X github.com/gpu-operator/gpu-operator/internal/version.Version=...".
var Version = "0.0.0-dev"
