package main

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// The manager asks the API server for uncompressed responses unless
// --api-compression is set: the request a client built from its config sends
// carries no Accept-Encoding: gzip (which makes the API server gzip watches).
func TestRestConfigAsksForCompressionOnlyWhenTold(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	// TLS, as every API server serves: without a TLS configuration client-go
	// falls back to http.DefaultTransport, which asks for gzip whatever the
	// config says.
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Accept-Encoding"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"APIVersions","versions":["v1"]}`))
	}))
	defer srv.Close()
	ca := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+srv.URL+`", certificate-authority-data: `+ca+`}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kubeconfig)

	for _, tc := range []struct {
		compression bool
		want        string
	}{{false, ""}, {true, "gzip"}} {
		cfg, err := restConfig(options{apiCompression: tc.compression})
		if err != nil {
			t.Fatal(err)
		}
		cfg.APIPath = "/api"
		cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
		c, err := rest.UnversionedRESTClientFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		seen = nil
		mu.Unlock()
		if err := c.Get().AbsPath("/api").Do(context.Background()).Error(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		got := seen
		mu.Unlock()
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("--api-compression=%v: Accept-Encoding of the requests %q, want one with %q", tc.compression, got, tc.want)
		}
	}
}
