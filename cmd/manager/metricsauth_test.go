package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// The metrics filter lets through a bearer token the API server authenticates
// (TokenReview) whose user may GET the path (SubjectAccessReview), answers
// 401 without a token or with one the API server refuses, 403 to a user
// without the right and 500 when a review fails; answers are reused for their
// TTL, failures are not.
func TestMetricsAuthReviewsTokenAndAccess(t *testing.T) {
	cs := fake.NewClientset()
	var tokenReviews, accessReviews int
	reviewFails := false
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tokenReviews++
		if reviewFails {
			return true, nil, errors.New("apiserver unreachable")
		}
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview).DeepCopy()
		switch tr.Spec.Token {
		case "scraper", "stranger":
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{
				Username: "system:serviceaccount:monitoring:" + tr.Spec.Token, Groups: []string{"system:serviceaccounts"},
				Extra: map[string]authnv1.ExtraValue{"k": {"v"}}}}
		default:
			tr.Status = authnv1.TokenReviewStatus{Error: "invalid token"}
		}
		return true, tr, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		accessReviews++
		sar := a.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview).DeepCopy()
		nr := sar.Spec.NonResourceAttributes
		sar.Status.Allowed = sar.Spec.User == "system:serviceaccount:monitoring:scraper" && nr != nil && nr.Verb == "get" && nr.Path == "/metrics" &&
			len(sar.Spec.Groups) == 1 && sar.Spec.Extra["k"][0] == "v"
		return true, sar, nil
	})
	now := time.Unix(1000, 0)
	a := &reviewAuth{tokens: cs.AuthenticationV1().TokenReviews(), access: cs.AuthorizationV1().SubjectAccessReviews(), now: func() time.Time { return now }}
	h, err := a.filter(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metrics")) }))
	if err != nil {
		t.Fatal(err)
	}
	get := func(header string) int {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	for _, tc := range []struct {
		header string
		want   int
	}{
		{"", http.StatusUnauthorized},
		{"Basic c2NyYXBlcjo=", http.StatusUnauthorized},
		{"Bearer forged", http.StatusUnauthorized},
		{"Bearer stranger", http.StatusForbidden},
		{"Bearer scraper", http.StatusOK},
		{"bearer  scraper ", http.StatusOK},
	} {
		if got := get(tc.header); got != tc.want {
			t.Errorf("Authorization %q: %d, want %d", tc.header, got, tc.want)
		}
	}
	if tokenReviews != 3 || accessReviews != 2 {
		t.Errorf("%d token and %d access reviews, want 3 and 2 (the second scrape from the cache)", tokenReviews, accessReviews)
	}

	// Within the TTL nothing is asked again; after it, the reviews are.
	now = now.Add(authDenyTTL)
	get("Bearer scraper")
	get("Bearer stranger")
	if tokenReviews != 4 || accessReviews != 3 {
		t.Errorf("after %s: %d token and %d access reviews, want 4 and 3 (the refusal asked again)", authDenyTTL, tokenReviews, accessReviews)
	}
	now = now.Add(authAllowTTL)
	reviewFails = true
	if got := get("Bearer scraper"); got != http.StatusInternalServerError {
		t.Errorf("a failing review: %d, want 500", got)
	}
	reviewFails = false
	if got := get("Bearer scraper"); got != http.StatusOK {
		t.Errorf("after a failed review: %d, want 200 (failures are not remembered)", got)
	}
}
