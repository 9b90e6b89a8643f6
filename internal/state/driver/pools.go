package driver

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// AnnotationVersion is on the driver pod template and so on each driver
// pod: the label-safe driver version it runs.
const AnnotationVersion = gpuv1.OperatorAnnotationPrefix + "driver-version"

// DaemonSetName is the name users know from the NVIDIA GPU Operator; a
// per-OS DaemonSet appends the OS: nvidia-driver-daemonset-ubuntu22.04.
const DaemonSetName = "nvidia-driver-daemonset"

// AppComponent is the app.kubernetes.io/component of the driver's
// DaemonSets and pods, NVIDIA's: what NVIDIA's upgrade controller,
// must-gather and users select driver pods by, under a ClusterPolicy or
// an NVIDIADriver alike.
const AppComponent = "nvidia-driver"

// poolPrefix is the name of a pool's DaemonSets, before the OS.
func poolPrefix(pool string) string {
	if pool == gpuv1.DefaultDriverPool {
		return DaemonSetName
	}
	return DaemonSetName + "-" + pool
}

// DaemonSetOf names the DaemonSet of a pool whose driver runs a version on
// a node of an OS: one per pool and OS, or one per pool for a digest, which
// serves every OS. It is false when the OS, which the name needs, is not
// known.
func DaemonSetOf(pool string, version gpuv1.DriverVersion, os state.OSRelease, osKnown bool) (string, bool) {
	name := poolPrefix(pool)
	if IsDigest(version) {
		return fitName(name), true
	}
	return fitName(name + "-" + os.String()), osKnown
}

// PrecompiledImage is a precompiled pool's image for a kernel on an OS,
// tagged as NVIDIA tags them: <branch>-<kernel>-<os>, the kernel as NFD
// labels it (gpu-operator v26.7.0 api/nvidia/v1alpha1/nvidiadriver_types.go
// GetPrecompiledImagePath).
func PrecompiledImage(spec *gpuv1.DriverSpec, k state.Kernel) string {
	return render.Image(string(spec.Repository), string(spec.Image), string(spec.Version)+"-"+k.Version+"-"+k.OS.String())
}

// PrecompiledDaemonSetOf names the DaemonSet of a precompiled pool for a
// kernel on an OS, as NVIDIA names them (nvidia-driver-daemonset-<kernel>-
// <os>), with the pool's name for a pool other than the default. The
// kernel is written as NVIDIA's getSanitizedKernelVersion writes it
// (gpu-operator v26.7.0 controllers/object_controls.go): no architecture
// suffix, _ as ., lower case, as names need; the name then ends with a
// hash of the kernel, so that two kernels never share a name.
func PrecompiledDaemonSetOf(pool string, k state.Kernel) string {
	kernel := strings.ToLower(strings.ReplaceAll(archSuffix.ReplaceAllString(k.Version, ""), "_", "."))
	kernel = strings.TrimRight(kernel, ".-")
	name := poolPrefix(pool) + "-" + kernel + "-" + k.OS.String()
	if kernel != k.Version {
		sum := sha256.Sum256([]byte(k.Version))
		name += "-" + hex.EncodeToString(sum[:3])
	}
	return fitName(name)
}

// archSuffix is the architecture at the end of a RHEL kernel's version.
var archSuffix = regexp.MustCompile(`[._]?(x86_64|aarch64)(_64k)?$`)

// maxNameLength is the longest DaemonSet name: it is also the value of the
// pods' selector label.
const maxNameLength = 63

// fitName cuts a name too long for a label value and ends it with a hash
// of the whole, so that two long names stay apart.
func fitName(name string) string {
	if len(name) <= maxNameLength {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return strings.TrimRight(name[:maxNameLength-9], "-.") + "-" + hex.EncodeToString(sum[:4])
}

// IsDigest reports whether a driver version pins an image digest, which
// serves every OS.
func IsDigest(v gpuv1.DriverVersion) bool { return strings.HasPrefix(string(v), "sha256:") }

// LabelValue is a driver version as a label value: label values cannot hold
// the colon of a digest, so sha256:<hex> becomes sha256-<hex>, cut to 63.
func LabelValue(v gpuv1.DriverVersion) string {
	s := strings.Replace(string(v), ":", "-", 1)
	if len(s) > 63 {
		s = s[:63]
	}
	return s
}
