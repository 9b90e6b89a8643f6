package main

import (
	"crypto/tls"
	"testing"

	. "github.com/onsi/gomega"
)

func TestParseFlags(t *testing.T) {
	tests := map[string]struct {
		args      []string
		namespace string
		wantErr   string
		check     func(g Gomega, o *options)
	}{
		"namespace from the environment": {
			namespace: "gpu-operator",
			check: func(g Gomega, o *options) {
				g.Expect(o.namespace).To(Equal("gpu-operator"))
				g.Expect(o.leaderElect).To(BeFalse())
				g.Expect(o.metricsAddr).To(Equal(":8443"))
				g.Expect(o.metricsSecure).To(BeTrue(), "metrics must need authentication unless turned off")
				g.Expect(o.probeAddr).To(Equal(":8081"))
			},
		},
		"missing namespace names the variable": {
			wantErr: "OPERATOR_NAMESPACE is not set",
		},
		"version needs no namespace": {
			args:  []string{"--version"},
			check: func(g Gomega, o *options) { g.Expect(o.showVersion).To(BeTrue()) },
		},
		"leader election and log flags": {
			args:      []string{"--leader-elect", "--zap-log-level=debug", "--zap-encoder=console"},
			namespace: "ns",
			check:     func(g Gomega, o *options) { g.Expect(o.leaderElect).To(BeTrue()) },
		},
		"unknown flag": {
			args: []string{"--no-such-flag"}, namespace: "ns",
			wantErr: "no-such-flag",
		},
		"bad log encoder": {
			args: []string{"--zap-encoder=xml"}, namespace: "ns",
			wantErr: "xml",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			t.Setenv(namespaceEnv, tt.namespace)
			o, err := parseFlags(tt.args)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			tt.check(g, o)
		})
	}
}

func TestMetricsOptions(t *testing.T) {
	g := NewWithT(t)
	secure := metricsOptions(&options{metricsAddr: ":8443", metricsSecure: true, metricsCerts: "/certs"})
	g.Expect(secure.SecureServing).To(BeTrue())
	g.Expect(secure.FilterProvider).NotTo(BeNil(), "HTTPS alone lets anyone who reaches the port read metrics")
	g.Expect(secure.CertDir).To(Equal("/certs"))
	g.Expect(secure.TLSOpts).To(HaveLen(1))
	cfg := &tls.Config{NextProtos: []string{"h2"}}
	secure.TLSOpts[0](cfg)
	g.Expect(cfg.NextProtos).To(Equal([]string{"http/1.1"}), "no HTTP/2")

	plain := metricsOptions(&options{metricsAddr: "127.0.0.1:18080"})
	g.Expect(plain.SecureServing).To(BeFalse())
	g.Expect(plain.FilterProvider).To(BeNil())
	g.Expect(plain.BindAddress).To(Equal("127.0.0.1:18080"))
}
