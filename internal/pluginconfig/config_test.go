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
