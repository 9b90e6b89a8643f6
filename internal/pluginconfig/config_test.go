package pluginconfig

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestParse(t *testing.T) {
	ts := func(replicas string) string {
		return "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: " + replicas + "\n"
	}
	tests := map[string]struct {
		data        string
		want        Sharing
		err         string
		unsupported string
	}{
		"time-slicing":     {data: ts("4"), want: Sharing{Replicas: 4, Strategy: "time-slicing"}},
		"no sharing":       {data: "version: v1\nflags:\n  migStrategy: none\n", want: NotShared},
		"empty":            {data: "", want: NotShared},
		"short name":       {data: "sharing:\n  timeSlicing:\n    resources:\n    - {name: gpu, replicas: 2}\n", want: Sharing{Replicas: 2, Strategy: "time-slicing"}},
		"one replica":      {data: ts("1"), err: "at least 2"},
		"no resources":     {data: "sharing:\n  timeSlicing: {}\n", err: "lists no resources"},
		"unnamed resource": {data: "sharing:\n  timeSlicing:\n    resources:\n    - {replicas: 2}\n", err: "has no name"},
		"unknown version":  {data: "version: v2\n", err: "unknown version"},
		"not YAML":         {data: "sharing: [", err: "not a device plugin configuration file"},
		"MPS":              {data: "sharing:\n  mps:\n    resources:\n    - {name: nvidia.com/gpu, replicas: 2}\n", want: Sharing{Replicas: 2, Strategy: "mps"}},
		"MPS, renamed":     {data: "sharing:\n  mps:\n    renameByDefault: true\n    resources:\n    - {name: nvidia.com/gpu, replicas: 2}\n", want: Sharing{Replicas: 2, Strategy: "mps", Renamed: true}, unsupported: "renameByDefault"},
		"renamed":          {data: "sharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n    - {name: nvidia.com/gpu, replicas: 3}\n", want: Sharing{Replicas: 3, Strategy: "time-slicing", Renamed: true}, unsupported: "renameByDefault"},
		// What k8s-device-plugin v0.20.0 refuses to start with, as its
		// api/config/v1 decoding does (replicas.go, resources.go,
		// flags.go, duration.go).
		"devices a typo":        {data: ts("4") + "      devices: al\n", err: "the only valid string input is 'all'"},
		"devices none":          {data: ts("4") + "      devices: 0\n", err: "a count of devices must be > 0"},
		"devices a bad ref":     {data: ts("4") + "      devices: [GPU-nope]\n", err: "unsupported device"},
		"devices by ref":        {data: ts("4") + "      devices: [0, \"1:0\", GPU-b1028956-cfa2-0990-bf4a-5da9abb51763, \"MIG-GPU-b1028956-cfa2-0990-bf4a-5da9abb51763/3/0\"]\n", want: Sharing{Replicas: 4, Strategy: "time-slicing"}},
		"resource name invalid": {data: "sharing:\n  timeSlicing:\n    resources:\n    - {name: GPU_shared, replicas: 2}\n", err: "incorrect format for resource name"},
		"rename invalid":        {data: "sharing:\n  timeSlicing:\n    resources:\n    - {name: gpu, rename: \"a b\", replicas: 2}\n", err: "rename"},
		"no replicas":           {data: "sharing:\n  timeSlicing:\n    resources:\n    - {name: gpu}\n", err: "has no replicas"},
		"a flag of a bad type":  {data: "version: v1\nflags:\n  failOnInitError: maybe\n", err: "not a device plugin configuration file"},
		"a bad sleep interval":  {data: "flags:\n  gfd:\n    sleepInterval: soon\n", err: "sleepInterval"},
		"an infinite interval":  {data: "flags:\n  gfd:\n    sleepInterval: infinite\n", want: NotShared},
		"a bad list strategy":   {data: "flags:\n  plugin:\n    deviceListStrategy: 5\n", err: "invalid deviceListStrategy"},
		"a resource no pattern": {data: "resources:\n  gpus:\n  - {name: a100}\n", err: "'pattern' field"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			c, err := Parse(tt.data)
			if tt.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c.Sharing).To(Equal(tt.want))
			if tt.unsupported == "" {
				g.Expect(c.Unsupported()).To(BeEmpty())
			} else {
				g.Expect(c.Unsupported()).To(ContainSubstring(tt.unsupported))
			}
		})
	}
}

// With problems in both resource sections, the message is the same at
// every parse: status shows it, and a changing one would be a write.
func TestParseNamesOneProblemEveryTime(t *testing.T) {
	g := NewWithT(t)
	data := "resources:\n  gpus:\n  - {name: a100}\n  mig:\n  - {pattern: '*'}\n"
	for range 32 {
		_, err := Parse(data)
		g.Expect(err).To(MatchError(ContainSubstring("resources.gpus: resources must have a 'pattern' field set")))
	}
}
