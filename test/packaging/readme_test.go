package packaging

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// The README's Layout names every package under internal/, each as
// `internal/<path>`, so that a reader finds where each concern lives.
func TestReadmeLayoutNamesEveryInternalPackage(t *testing.T) {
	g := NewWithT(t)
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	g.Expect(err).NotTo(HaveOccurred())
	var missing []string
	root := filepath.Join("..", "..", "internal")
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		gofiles, _ := filepath.Glob(filepath.Join(path, "*.go"))
		if len(gofiles) == 0 {
			return nil
		}
		rel, err := filepath.Rel(filepath.Join("..", ".."), path)
		if err != nil {
			return err
		}
		if name := "`" + filepath.ToSlash(rel) + "`"; !strings.Contains(string(readme), name) {
			missing = append(missing, name)
		}
		return nil
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(missing).To(BeEmpty(), "packages the README's Layout does not name")
}
