package kubectlgpu

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"sigs.k8s.io/yaml"
)

// archive is must-gather's tar.gz: every file under one directory, and a
// manifest that says what it holds and what it left out.
type archive struct {
	tw   *tar.Writer
	gz   *gzip.Writer
	dir  string
	now  time.Time
	made manifest
}

// manifest is must-gather's account of itself, written last as
// manifest.json and printed to the person.
type manifest struct {
	Created   time.Time `json:"created"`
	Namespace string    `json:"namespace"`
	// Nodes are the nodes whose operand pods' logs it holds, and why
	// those.
	Nodes      []string `json:"nodes"`
	NodesWhy   string   `json:"nodesWhy"`
	Files      []string `json:"files"`
	LeftOut    []string `json:"leftOut"`
	bytesTotal int64
}

func newArchive(w io.Writer, dir, namespace string, now time.Time) *archive {
	gz := gzip.NewWriter(w)
	return &archive{gz: gz, tw: tar.NewWriter(gz), dir: dir, now: now,
		made: manifest{Created: now, Namespace: namespace}}
}

// file adds name with data.
func (a *archive) file(name string, data []byte) error {
	if err := a.tw.WriteHeader(&tar.Header{Name: a.dir + "/" + name, Mode: 0o644, Size: int64(len(data)),
		ModTime: a.now, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := a.tw.Write(data); err != nil {
		return err
	}
	a.made.Files = append(a.made.Files, name)
	a.made.bytesTotal += int64(len(data))
	return nil
}

// yaml adds name with v as YAML.
func (a *archive) yaml(name string, v any) error {
	data, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return a.file(name, data)
}

// leftOut records what the archive does not hold, and why.
func (a *archive) leftOut(format string, args ...any) {
	a.made.LeftOut = append(a.made.LeftOut, fmt.Sprintf(format, args...))
}

// close writes the manifest and ends the archive.
func (a *archive) close() (manifest, error) {
	slices.Sort(a.made.LeftOut)
	m := a.made
	m.Files = append(slices.Clone(m.Files), "manifest.json")
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return m, err
	}
	if err := a.file("manifest.json", append(data, '\n')); err != nil {
		return m, err
	}
	if err := a.tw.Close(); err != nil {
		return m, err
	}
	return m, a.gz.Close()
}
