package packaging

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// The Dockerfile builds a static binary in one stage and ships it alone on
// a distroless non-root base, with no shell to run anything else.
func TestDockerfile(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	g.Expect(err).NotTo(HaveOccurred())
	var stages [][]string // instructions per stage, continuation lines joined
	for _, line := range strings.Split(strings.ReplaceAll(string(data), "\\\n", " "), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "FROM ") {
			stages = append(stages, nil)
		}
		g.Expect(stages).NotTo(BeEmpty(), "an instruction before FROM: %s", line)
		stages[len(stages)-1] = append(stages[len(stages)-1], line)
	}
	g.Expect(stages).To(HaveLen(2), "a build stage and a runtime stage")
	build, final := strings.Join(stages[0], "\n"), stages[1]
	g.Expect(build).To(MatchRegexp(`CGO_ENABLED=0 go build -trimpath`))
	g.Expect(build).To(ContainSubstring("internal/version.Version=${VERSION}"))
	g.Expect(final[0]).To(Equal("FROM gcr.io/distroless/static:nonroot"))
	g.Expect(final).To(ContainElement("USER 65532:65532"))
	g.Expect(final).To(ContainElement(`ENTRYPOINT ["/gpu-operator"]`), "exec form: there is no shell")
	for _, ins := range final {
		g.Expect(ins).NotTo(HavePrefix("RUN "), "the runtime stage runs nothing: it has no shell")
	}
}

// The binary built the Dockerfile's way is static and reports the version.
func TestBinaryBuiltTheDockerfileWay(t *testing.T) {
	g := NewWithT(t)
	bin := filepath.Join(t.TempDir(), "gpu-operator")
	build := exec.Command("go", "build", "-trimpath",
		"-ldflags", "-s -w -X github.com/gpu-operator/gpu-operator/internal/version.Version="+version(t),
		"-o", bin, "./cmd/gpu-operator")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))

	f, err := elf.Open(bin)
	g.Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	for _, p := range f.Progs {
		g.Expect(p.Type).NotTo(Equal(elf.PT_INTERP), "the binary needs a dynamic loader: it is not static")
	}
	out, err = exec.Command(bin, "--version").Output()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.TrimSpace(string(out))).To(Equal(version(t)))

	// The kustomize image tag follows VERSION too.
	k, err := os.ReadFile(filepath.Join(root, "config", "manager", "kustomization.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(regexp.MustCompile(`newTag: (\S+)`).FindStringSubmatch(string(k))).To(Equal([]string{"newTag: v" + version(t), "v" + version(t)}))
}
