package loopget_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aether-mesh/svclb/internal/loopget"
)

func TestGetCommand(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/status":
			w.Write([]byte(`{"ok":true}`))
		case "/moved":
			http.Redirect(w, r, "/status", http.StatusFound)
		default:
			http.Error(w, "nope", http.StatusNotFound)
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, tc := range []struct {
		args     []string
		code     int
		out, err string
	}{
		{[]string{"-addr", addr, "/status"}, 0, `{"ok":true}`, ""},
		{[]string{"-addr", addr, "/missing"}, 1, "", "404"},
		// A redirect is an answer that is not the page: never followed.
		{[]string{"-addr", addr, "/moved"}, 1, "", "302"},
		{[]string{"-addr", addr, "status"}, 1, "", "does not start with /"},
		{[]string{"-addr", addr}, 2, "", "usage"},
		{[]string{"-addr", addr, "/a", "/b"}, 2, "", "usage"},
		{[]string{"/status"}, 1, "", "127.0.0.1:1"}, // the default address, where nothing listens
	} {
		var out, errOut bytes.Buffer
		code := loopget.Main(context.Background(), "svclb-test", "127.0.0.1:1", tc.args, &out, &errOut)
		if code != tc.code || out.String() != tc.out || !strings.Contains(errOut.String(), tc.err) {
			t.Errorf("get %q: exit %d, stdout %q, stderr %q; want %d, %q, stderr with %q", tc.args, code, out.String(), errOut.String(), tc.code, tc.out, tc.err)
		}
	}
}

// TestGetBoundsTheBody: a page over MaxBody is an error, not a read without end.
func TestGetBoundsTheBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := bytes.Repeat([]byte("x"), 1<<20)
		for i := 0; i <= loopget.MaxBody>>20; i++ {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	_, err := loopget.Get(context.Background(), strings.TrimPrefix(srv.URL, "http://"), "/big")
	if err == nil || !strings.Contains(err.Error(), "over") {
		t.Errorf("Get of a page over MaxBody: %v, want an error", err)
	}
}
