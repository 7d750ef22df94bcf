package main

import (
	"context"
	"crypto/sha256"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authnv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authzv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// The metrics endpoint's authentication and authorisation, written here
// instead of taken from controller-runtime (filters.WithAuthenticationAndAuthorization)
// for the binary's size alone: that filter builds on k8s.io/apiserver's
// delegating authenticator and authorizer, which link CEL, OpenTelemetry's
// gRPC exporter and the API server's configuration types, 16 MB of the 83 MB
// binary, most of it mapped into the manager's memory (docs/scale.md). What it
// does for this endpoint is two reviews, which this filter asks the same way:
// a TokenReview of the request's bearer token and a SubjectAccessReview of the
// user for the request's verb and path (a non-resource URL, as the chart's
// metrics-reader ClusterRole grants it), each answer kept for a while.
// Client certificates and anonymous requests are refused, as they were.

const (
	// authAllowTTL is how long an allowed token is reused, and authDenyTTL
	// a refused one: the delegating filter's one minute (authentication) and
	// 30 s (denied authorisations).
	authAllowTTL = time.Minute
	authDenyTTL  = 30 * time.Second
	// reviewTimeout bounds each review.
	reviewTimeout = 10 * time.Second
	// authCacheSize bounds the answers kept; a few scrapers use the endpoint.
	authCacheSize = 256
)

// metricsAuthFilter is the metrics server's FilterProvider.
func metricsAuthFilter(cfg *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
	authn, err := authnv1client.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	authz, err := authzv1client.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	a := &reviewAuth{tokens: authn.TokenReviews(), access: authz.SubjectAccessReviews(), now: time.Now}
	return a.filter, nil
}

// reviewAuth asks the API server who a bearer token is and whether that user
// may use a path, and remembers the answers.
type reviewAuth struct {
	tokens authnv1client.TokenReviewInterface
	access authzv1client.SubjectAccessReviewInterface
	now    func() time.Time

	mu    sync.Mutex
	cache map[[sha256.Size]byte]authAnswer
}

type authAnswer struct {
	code  int
	msg   string
	until time.Time
}

func (a *reviewAuth) filter(log logr.Logger, next http.Handler) (http.Handler, error) {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ans := a.check(req.Context(), log, bearer(req), strings.ToLower(req.Method), req.URL.Path)
		if ans.code != http.StatusOK {
			http.Error(w, ans.msg, ans.code)
			return
		}
		next.ServeHTTP(w, req)
	}), nil
}

// bearer is the request's bearer token; empty when it has none.
func bearer(req *http.Request) string {
	scheme, token, ok := strings.Cut(strings.TrimSpace(req.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// check answers whether token may use verb on path: 200, 401 (no token, or
// one the API server does not accept), 403 (not authorised) or 500 (a review
// failed; not remembered).
func (a *reviewAuth) check(ctx context.Context, log logr.Logger, token, verb, path string) authAnswer {
	if token == "" {
		return authAnswer{code: http.StatusUnauthorized, msg: "Unauthorized"}
	}
	key := sha256.Sum256([]byte(verb + "\x00" + path + "\x00" + token))
	now := a.now()
	a.mu.Lock()
	ans, ok := a.cache[key]
	a.mu.Unlock()
	if ok && now.Before(ans.until) {
		return ans
	}
	ans = a.review(ctx, log, token, verb, path)
	if ans.code == http.StatusInternalServerError {
		return ans
	}
	ans.until = now.Add(authDenyTTL)
	if ans.code == http.StatusOK {
		ans.until = now.Add(authAllowTTL)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cache == nil || len(a.cache) >= authCacheSize {
		for k, v := range a.cache {
			if !now.Before(v.until) {
				delete(a.cache, k)
			}
		}
		if len(a.cache) >= authCacheSize {
			a.cache = nil
		}
		if a.cache == nil {
			a.cache = map[[sha256.Size]byte]authAnswer{}
		}
	}
	a.cache[key] = ans
	return ans
}

func (a *reviewAuth) review(ctx context.Context, log logr.Logger, token, verb, path string) authAnswer {
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	tr, err := a.tokens.Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		log.Error(err, "Authentication failed")
		return authAnswer{code: http.StatusInternalServerError, msg: "Authentication failed"}
	}
	if !tr.Status.Authenticated {
		log.V(4).Info("Authentication failed", "error", tr.Status.Error)
		return authAnswer{code: http.StatusUnauthorized, msg: "Unauthorized"}
	}
	u := tr.Status.User
	extra := map[string]authzv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	sar, err := a.access.Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
		NonResourceAttributes: &authzv1.NonResourceAttributes{Path: path, Verb: verb},
	}}, metav1.CreateOptions{})
	if err != nil {
		log.Error(err, "Authorization failed", "user", u.Username)
		return authAnswer{code: http.StatusInternalServerError, msg: "Authorization for user " + u.Username + " failed"}
	}
	if !sar.Status.Allowed || sar.Status.Denied {
		log.V(4).Info("Authorization denied", "user", u.Username, "reason", sar.Status.Reason)
		return authAnswer{code: http.StatusForbidden, msg: "Authorization denied for user " + u.Username}
	}
	return authAnswer{code: http.StatusOK}
}
