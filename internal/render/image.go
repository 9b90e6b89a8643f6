package render

import "strings"

// Image composes an image reference: repository/image:version, or
// repository/image@sha256:... when version is a digest; a version that is
// both, tag@sha256:..., gives repository/image:tag@sha256:..., which the
// runtime pulls by the digest. An empty repository leaves the registry to
// the container runtime's default.
func Image(repository, image, version string) string {
	ref := RepositoryImage(repository, image)
	if strings.HasPrefix(version, "sha256:") {
		return ref + "@" + version
	}
	return ref + ":" + version
}

// RepositoryImage is an image reference without its tag or digest:
// repository/image, or image alone with no repository.
func RepositoryImage(repository, image string) string {
	if repository == "" {
		return image
	}
	return strings.TrimSuffix(repository, "/") + "/" + image
}
