package pluginconfig

import (
	"testing"

	. "github.com/onsi/gomega"
)

func timeSlicing(replicas string) string {
	return "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: " + replicas + "\n"
}

// Nodes run each file as written while the operator can run it, and the
// last good copy of one an edit broke or removed; a file never good has
// nothing to run.
func TestResolve(t *testing.T) {
	mps := "version: v1\nsharing:\n  mps:\n    resources:\n    - {name: nvidia.com/gpu, replicas: 2}\n"
	renamed := "sharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n    - {name: nvidia.com/gpu, replicas: 3}\n"
	tests := map[string]struct {
		data     map[string]string
		binary   []string
		kept     map[string]string
		run      map[string]string // name: data
		kept2    []string          // names run from their copy
		problems map[string]string // name: substring, "" for none
	}{
		"valid files run as written": {
			data: map[string]string{"ts-4": timeSlicing("4"), "mps-2": mps},
			kept: map[string]string{"ts-4": timeSlicing("8")},
			run:  map[string]string{"ts-4": timeSlicing("4"), "mps-2": mps}, problems: map[string]string{"ts-4": "", "mps-2": ""},
		},
		"a broken edit runs the last good copy": {
			data: map[string]string{"ts-4": timeSlicing("-4")},
			kept: map[string]string{"ts-4": timeSlicing("4")},
			run:  map[string]string{"ts-4": timeSlicing("4")}, kept2: []string{"ts-4"}, problems: map[string]string{"ts-4": "at least 2"},
		},
		"an unsupported edit runs the last good copy": {
			data: map[string]string{"ts-4": renamed},
			kept: map[string]string{"ts-4": timeSlicing("4")},
			run:  map[string]string{"ts-4": timeSlicing("4")}, kept2: []string{"ts-4"}, problems: map[string]string{"ts-4": "renameByDefault"},
		},
		"a file never good runs nothing": {
			data: map[string]string{"ts-4": timeSlicing("-4")},
			run:  map[string]string{}, problems: map[string]string{"ts-4": "at least 2"},
		},
		"a removed key runs its copy": {
			data: map[string]string{"ts-2": timeSlicing("2")},
			kept: map[string]string{"ts-4": timeSlicing("4")},
			run:  map[string]string{"ts-2": timeSlicing("2"), "ts-4": timeSlicing("4")}, kept2: []string{"ts-4"}, problems: map[string]string{"ts-2": ""},
		},
		"a deleted ConfigMap runs the copies": {
			kept: map[string]string{"ts-4": timeSlicing("4")},
			run:  map[string]string{"ts-4": timeSlicing("4")}, kept2: []string{"ts-4"}, problems: map[string]string{},
		},
		"a binary entry is refused": {
			binary: []string{"blob"},
			run:    map[string]string{}, problems: map[string]string{"blob": "binary"},
		},
		"a copy edited into a broken file is no good copy": {
			data: map[string]string{"ts-4": timeSlicing("-4")},
			kept: map[string]string{"ts-4": timeSlicing("1")},
			run:  map[string]string{}, problems: map[string]string{"ts-4": "at least 2"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			f := Resolve(tt.data, tt.binary, tt.kept, nil)
			run := map[string]string{}
			var kept []string
			for n, e := range f.Run {
				run[n] = e.Data
				if e.Kept {
					kept = append(kept, n)
				}
			}
			g.Expect(run).To(Equal(tt.run))
			g.Expect(kept).To(ConsistOf(tt.kept2))
			g.Expect(len(f.KeptNames()) > 0).To(Equal(len(tt.kept2) > 0))
			g.Expect(f.Problems).To(HaveLen(len(tt.problems)))
			for n, want := range tt.problems {
				g.Expect(f.Problems).To(HaveKey(n))
				if want == "" {
					g.Expect(f.Problems[n]).To(BeEmpty(), n)
				} else {
					g.Expect(f.Problems[n]).To(ContainSubstring(want), n)
				}
			}
		})
	}
}

// The validated ConfigMap holds every file nodes can run as written, and
// a last good copy only while a node runs it; the MPS files are those of
// what runs.
func TestValidated(t *testing.T) {
	g := NewWithT(t)
	mps := "version: v1\nsharing:\n  mps:\n    resources:\n    - {name: nvidia.com/gpu, replicas: 2}\n"
	f := Resolve(map[string]string{"ts-2": timeSlicing("2"), "mps-2": "broken: ["},
		nil, map[string]string{"ts-4": timeSlicing("4"), "mps-2": mps}, nil)
	g.Expect(f.Validated(func(string) bool { return false })).To(Equal(map[string]string{"ts-2": timeSlicing("2")}))
	g.Expect(f.Validated(func(n string) bool { return n == "mps-2" })).To(Equal(map[string]string{"ts-2": timeSlicing("2"), "mps-2": mps}))
	g.Expect(f.MPS()).To(Equal(map[string]bool{"mps-2": true}))
	g.Expect(f.KeptNames()).To(Equal(map[string]bool{"ts-4": true, "mps-2": true}))
	g.Expect(f.Run["ts-2"].Digest()).To(HaveLen(16))
	g.Expect(f.Run["ts-2"].Digest()).NotTo(Equal(f.Run["ts-4"].Digest()))
}

// Under mig.strategy mixed the device plugin refuses MPS: an edit that
// makes a file MPS there keeps its last good copy, and an MPS copy is no
// good copy there.
func TestMPSUnderMixed(t *testing.T) {
	g := NewWithT(t)
	mps := "version: v1\nsharing:\n  mps:\n    resources:\n    - {name: nvidia.com/gpu, replicas: 2}\n"
	f := Resolve(map[string]string{"ts-4": mps, "mps-2": mps}, nil, map[string]string{"ts-4": timeSlicing("4"), "mps-2": mps},
		MPSUnderMixed(true))
	g.Expect(f.Problems).To(HaveKeyWithValue("ts-4", ContainSubstring("mig.strategy mixed")))
	g.Expect(f.Run).To(HaveKeyWithValue("ts-4", HaveField("Kept", true)))
	g.Expect(f.Run["ts-4"].Data).To(Equal(timeSlicing("4")))
	g.Expect(f.Run).NotTo(HaveKey("mps-2"))
	g.Expect(Resolve(map[string]string{"mps-2": mps}, nil, nil, MPSUnderMixed(false)).Run).To(HaveKey("mps-2"))
}

// Any file, however broken: Parse never panics, judges the same bytes the
// same way, and Resolve runs a file only where Parse found it runnable,
// keeping the last good copy otherwise.
func FuzzResolve(f *testing.F) {
	f.Add(timeSlicing("4"), timeSlicing("2"))
	f.Add("sharing:\n  mps:\n    resources:\n    - {name: gpu, replicas: 2, devices: [0, \"1:0\"]}\n", "")
	f.Add("sharing: [", "flags:\n  gfd:\n    sleepInterval: infinite\n")
	f.Fuzz(func(t *testing.T, data, kept string) {
		c, err := Parse(data)
		again, errAgain := Parse(data)
		if (err == nil) != (errAgain == nil) || c != again {
			t.Fatalf("Parse judged %q two ways", data)
		}
		files := Resolve(map[string]string{"f": data}, nil, map[string]string{"f": kept}, nil)
		runnable := err == nil && c.Unsupported() == ""
		if runnable != (files.Problems["f"] == "") {
			t.Fatalf("Resolve's problem %q for a file Parse judged runnable=%v", files.Problems["f"], runnable)
		}
		if e, ok := files.Run["f"]; ok && !runnable && (!e.Kept || e.Data != kept) {
			t.Fatalf("a file that cannot run runs as %+v", e)
		}
	})
}
