// Package metricsauth guards the metrics endpoint: every request's bearer
// token is checked by the API server (TokenReview) and its caller must be
// allowed to get the URL (SubjectAccessReview), as the API server's own
// components do for theirs.
package metricsauth
