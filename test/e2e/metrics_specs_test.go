//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// operatorMetricsURL is where startOperator serves metrics.
func operatorMetricsURL() string { return "https://" + operatorAddr(operatorMetricsPort) + "/metrics" }

// MetricsAuthSpec checks that the operator, run with the chart's RBAC,
// serves its metrics over HTTPS only to callers the API server
// authenticates and that hold the chart's metrics-reader ClusterRole.
func MetricsAuthSpec(ctx context.Context) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "e2e-scraper", Namespace: "default"}}
	Expect(k8s.Create(ctx, sa)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) { Expect(k8s.Delete(ctx, sa)).To(Succeed()) })
	tr := &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}
	Expect(k8s.SubResource("token").Create(ctx, sa, tr)).To(Succeed())
	token := tr.Status.Token

	// The certificate is self-signed: this spec is about who may read.
	httpc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // self-signed on loopback
	}}
	scrape := func(token string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, operatorMetricsURL(), nil)
		Expect(err).NotTo(HaveOccurred())
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := httpc.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	Eventually(func() int { code, _ := scrape(""); return code }).WithTimeout(30*time.Second).
		Should(Equal(http.StatusUnauthorized), "no token")
	code, body := scrape("not-a-token")
	Expect(code).To(Equal(http.StatusUnauthorized), body)
	code, body = scrape(token)
	Expect(code).To(Equal(http.StatusForbidden), "a valid token without the role: %s", body)

	// Go's TLS server answers a plain HTTP request with 400.
	plainHTTP := &http.Client{Timeout: 5 * time.Second}
	resp, err := plainHTTP.Get("http://" + operatorAddr(operatorMetricsPort) + "/metrics")
	Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	Expect(resp.StatusCode).To(Equal(http.StatusBadRequest), "plain HTTP must get no metrics")

	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-scraper-metrics"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "gpu-operator-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: sa.Namespace}},
	}
	Expect(k8s.Create(ctx, binding)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) { Expect(k8s.Delete(ctx, binding)).To(Succeed()) })
	// A refusal is remembered for ten seconds.
	Eventually(func(g Gomega) {
		code, body := scrape(token)
		g.Expect(code).To(Equal(http.StatusOK), body)
		g.Expect(body).To(ContainSubstring("gpu_operator_gpu_nodes"))
	}).WithTimeout(30 * time.Second).WithPolling(2 * time.Second).Should(Succeed())
}
