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

// The Dockerfile builds a static binary in one stage, on the builder's
// platform for every target, and ships it alone on a distroless non-root
// base with no shell; both bases are pinned by digest, and the image says
// what it is in OCI labels.
func TestDockerfile(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	g.Expect(err).NotTo(HaveOccurred())
	var globals []string
	var stages [][]string // instructions per stage, continuation lines joined
	for _, line := range strings.Split(strings.ReplaceAll(string(data), "\\\n", " "), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		case strings.HasPrefix(line, "FROM "):
			stages = append(stages, nil)
		case len(stages) == 0:
			g.Expect(line).To(HavePrefix("ARG "), "only ARGs before the first FROM")
			globals = append(globals, line)
			continue
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], line)
	}
	pinned := regexp.MustCompile(`^ARG (GO_IMAGE|BASE_IMAGE)=[^@\s]+:[^@\s]+@sha256:[a-f0-9]{64}$`)
	g.Expect(globals).To(HaveLen(2))
	for _, a := range globals {
		g.Expect(a).To(MatchRegexp(pinned.String()), "a base image pinned by tag and digest")
	}
	g.Expect(stages).To(HaveLen(2), "a build stage and a runtime stage")
	build, final := strings.Join(stages[0], "\n"), stages[1]
	g.Expect(stages[0][0]).To(Equal("FROM --platform=$BUILDPLATFORM ${GO_IMAGE} AS build"), "cross-compiles, no emulation")
	g.Expect(build).To(ContainSubstring("CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath"))
	g.Expect(build).To(ContainSubstring("internal/version.Version=${VERSION}"))
	g.Expect(final[0]).To(Equal("FROM ${BASE_IMAGE}"))
	g.Expect(globals[1]).To(HavePrefix("ARG BASE_IMAGE=gcr.io/distroless/static:nonroot@"))
	g.Expect(final).To(ContainElement("USER 65532:65532"))
	g.Expect(final).To(ContainElement(`ENTRYPOINT ["/gpu-operator"]`), "exec form: there is no shell")
	for _, ins := range final {
		g.Expect(ins).NotTo(HavePrefix("RUN "), "the runtime stage runs nothing: it has no shell")
	}
	labels := strings.Join(final, "\n")
	for _, l := range []string{"title", "description", "source", "version=\"${VERSION}\"", "revision=\"${REVISION}\""} {
		g.Expect(labels).To(ContainSubstring("org.opencontainers.image."+l), "OCI label %s", l)
	}
}

// The build context holds what the Dockerfile copies and nothing else: no
// binaries, build outputs or history.
func TestDockerignore(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	g.Expect(err).NotTo(HaveOccurred())
	var rules []string
	for _, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			rules = append(rules, line)
		}
	}
	g.Expect(rules[0]).To(Equal("*"), "everything is excluded first")
	df, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	g.Expect(err).NotTo(HaveOccurred())
	for _, m := range regexp.MustCompile(`(?m)^COPY ([^-].*) \S+$`).FindAllStringSubmatch(string(df), -1) {
		for _, src := range strings.Fields(m[1]) {
			g.Expect(rules).To(ContainElement("!"+src), "the Dockerfile copies %s", src)
		}
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
