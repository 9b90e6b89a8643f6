package pluginconfig

import (
	"crypto/sha256"
	"encoding/hex"
)

// ValidatedConfigMap is the operator's ConfigMap, in its namespace, of the
// configurations nodes run: the device plugin, GFD and the MPS control
// daemon mount it rather than devicePlugin.config's own ConfigMap, so that
// a file broken by an edit never reaches a pod that starts, restarts or
// is replaced. The policy cannot name it as devicePlugin.config.
const ValidatedConfigMap = "nvidia-device-plugin-validated-configs"

// Entry is a configuration nodes can run.
type Entry struct {
	// Data is the file as nodes read it.
	Data   string
	Config Config
	// Kept says the user's file is broken or gone, and Data is its last
	// good copy.
	Kept bool
}

// Digest is a short digest of the file: on the pod template of the pods
// that read it, a new one replaces them.
func (e Entry) Digest() string {
	sum := sha256.Sum256([]byte(e.Data))
	return hex.EncodeToString(sum[:8])
}

// Files are devicePlugin.config's files as the operator judges them.
type Files struct {
	// Problems says, for every entry of the user's ConfigMap, why the
	// operator does not run it as written, "" when it does.
	Problems map[string]string
	// Run are the configurations nodes run, by name: each file of the
	// user's ConfigMap the operator can run, as written, and the last good
	// copy of the others, where one was kept.
	Run map[string]Entry
}

// Policy says why the policy keeps a configuration from running on any
// node ("" when it does not): the device plugin refuses MPS under
// mig.strategy mixed, for one.
type Policy func(Config) string

// Resolve judges the user's files (nil data when the ConfigMap does not
// exist) against the last good copies kept (the validated ConfigMap's
// data), under the policy's own rules (nil for none). A file the operator
// cannot run as written keeps its last good copy: nodes go on running
// what they run, and nothing restarts.
func Resolve(data map[string]string, binary []string, kept map[string]string, policy Policy) Files {
	f := Files{Problems: make(map[string]string, len(data)+len(binary)), Run: make(map[string]Entry, len(data)+len(kept))}
	problemOf := func(c Config) string {
		if p := c.Unsupported(); p != "" {
			return p
		}
		if policy != nil {
			return policy(c)
		}
		return ""
	}
	for name, d := range data {
		c, err := Parse(d)
		switch {
		case err != nil:
			f.Problems[name] = err.Error()
		case problemOf(c) != "":
			f.Problems[name] = problemOf(c)
		default:
			f.Problems[name] = ""
			f.Run[name] = Entry{Data: d, Config: c}
		}
	}
	for _, name := range binary {
		f.Problems[name] = "a binary entry is no configuration file"
	}
	for name, d := range kept {
		if _, ok := f.Run[name]; ok {
			continue
		}
		// Kept copies were valid when copied; one that no longer parses
		// (an edit of the operator's ConfigMap) is no good copy.
		if c, err := Parse(d); err == nil && problemOf(c) == "" {
			f.Run[name] = Entry{Data: d, Config: c, Kept: true}
		}
	}
	return f
}

// Validated is the data of the validated ConfigMap: every configuration
// nodes can run as written, and the last good copy of a broken or gone
// one while inUse says a node runs it (or it is the default). A copy no
// node runs any more goes.
func (f Files) Validated(inUse func(name string) bool) map[string]string {
	out := make(map[string]string, len(f.Run))
	for name, e := range f.Run {
		if !e.Kept || inUse(name) {
			out[name] = e.Data
		}
	}
	return out
}

// MPSUnderMixed is the policy rule of k8s-device-plugin v0.20.0: it
// refuses MPS sharing under mig.strategy mixed
// (cmd/nvidia-device-plugin/main.go, validateFlags).
func MPSUnderMixed(mixed bool) Policy {
	return func(c Config) string {
		if mixed && c.MPS() {
			return "the device plugin refuses MPS sharing under mig.strategy mixed"
		}
		return ""
	}
}

// MPS are the configurations nodes run that share GPUs with MPS.
func (f Files) MPS() map[string]bool {
	out := map[string]bool{}
	for name, e := range f.Run {
		if e.Config.MPS() {
			out[name] = true
		}
	}
	return out
}

// KeptNames are the configurations that run from their last good copy.
func (f Files) KeptNames() map[string]bool {
	out := map[string]bool{}
	for name, e := range f.Run {
		if e.Kept {
			out[name] = true
		}
	}
	return out
}
